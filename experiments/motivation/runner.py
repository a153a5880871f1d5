"""Run one panel for one seed: streamed records, probes, checkpoints, resume.

Run folder (``OUT/<panel>/seed<S>/``)::

    records.csv   one row per step (:data:`.panel.RECORD_FIELDS`), flushed as written
    probes.csv    one row per probed step (:data:`.panel.PROBE_FIELDS`)
    summary.json  settings, data and model used, status, timing
    checkpoint.pt the panels' state after the last checkpointed step (not for sharing)

A killed run continues with ``resume=True`` from its checkpoint: the CSVs are
cut back to the checkpoint's rows and the steps after it are recomputed, so
the result is bit for bit that of an uninterrupted run (CPU, same threads).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import torch

from crosscurv.numeric.records import RecordWriter, atomic_torch_save, json_safe, write_summary
from crosscurv.theory.errors import MotivationError

from .panel import PROBE_FIELDS, RECORD_FIELDS
from .records import read_table, truncate_table

__all__ = ["MotivationError", "build_panel", "run_panel", "RunResult"]

RECORDS, PROBES, SUMMARY, CHECKPOINT = "records.csv", "probes.csv", "summary.json", "checkpoint.pt"


def build_panel(name: str, settings: dict, seed: int, **kw):
    """The panel object of ``name`` (``mlp``, ``fl``, ``lora``)."""
    if name == "mlp":
        from .mlp import MLPPanel as cls
    elif name == "fl":
        from .fl import FLPanel as cls
    elif name == "lora":
        from .lora import LoRAPanel as cls
    else:
        raise MotivationError(f"unknown panel {name!r} (panels: mlp, fl, lora)")
    return cls(settings, seed, **kw)


@dataclass
class RunResult:
    out_dir: str
    status: str
    summary: dict


def _key(settings: dict) -> str:
    return json.dumps(json_safe(settings), sort_keys=True)


def run_panel(name: str, settings: dict, seed: int, out_dir: str, *, resume: bool = False, progress=None,
              device="cpu", dtype=torch.float32, data_path=None, model_path=None,
              checkpoint_every: int = 10) -> RunResult:
    """Train panel ``name`` for one seed into ``out_dir`` (see the module docstring).

    Args:
        settings: the preset's settings (:mod:`.presets`), recorded in the summary.
        progress: optional ``progress(k, n)`` callback after each step.
        checkpoint_every: steps between checkpoints (and always after the last one).

    Raises:
        MotivationError: ``out_dir`` already holds records and ``resume`` is false,
            or its checkpoint was written with other settings.
    """
    os.makedirs(out_dir, exist_ok=True)
    paths = {f: os.path.join(out_dir, f) for f in (RECORDS, PROBES, SUMMARY, CHECKPOINT)}
    full = {"panel": name, "seed": seed, "settings": settings, "dtype": str(dtype).replace("torch.", ""),
            "device": str(device), "data_path": None if data_path is None else str(data_path),
            "model_path": None if model_path is None else str(model_path)}
    has_rows = os.path.exists(paths[RECORDS]) and os.path.getsize(paths[RECORDS]) > 0
    if has_rows and not resume:
        raise MotivationError(f"{out_dir} already holds records; pass --resume to continue it or choose another --out")
    panel = build_panel(name, settings, seed, device=device, dtype=dtype, data_path=data_path, model_path=model_path)
    start, n_probe = 0, 0
    if resume and os.path.exists(paths[CHECKPOINT]):
        ck = torch.load(paths[CHECKPOINT], map_location=device, weights_only=False)
        if ck["key"] != _key(full):
            raise MotivationError(f"{out_dir} was run with other settings; use another --out or delete it")
        panel.load_state_dict(ck["state"])
        start, n_probe = ck["k"], ck["probes"]
        truncate_table(paths[RECORDS], start)
        truncate_table(paths[PROBES], n_probe)
    elif resume and has_rows:  # killed before the first checkpoint: start over
        os.remove(paths[RECORDS])
        if os.path.exists(paths[PROBES]):
            os.remove(paths[PROBES])
    append = start > 0
    rec = RecordWriter(paths[RECORDS], append=append, fields=RECORD_FIELDS)
    prb = RecordWriter(paths[PROBES], append=append, fields=PROBE_FIELDS)
    summary = {"panel": name, "seed": seed, "status": "running", "settings": full, "info": panel.info,
               "labels": {"seq": panel.seq_label, "sim": panel.sim_label, "gs": getattr(panel, "gs_label", None)},
               "step_unit": panel.step_unit, "n_steps": panel.n_steps, "eval_every": panel.eval_every,
               "probe_every": panel.probe_every}
    write_summary(paths[SUMMARY], summary)
    t0, c0 = time.perf_counter(), time.process_time()
    t_probe = c_probe = 0.0
    try:
        for k in range(start + 1, panel.n_steps + 1):
            if panel.probe_every and (k - 1) % panel.probe_every == 0:
                tp, cp = time.perf_counter(), time.process_time()
                prb.write({"k": k, **panel.probe(k)})
                n_probe += 1
                t_probe += time.perf_counter() - tp
                c_probe += time.process_time() - cp
            rec.write(panel.step(k))
            if k % checkpoint_every == 0 or k == panel.n_steps:
                atomic_torch_save({"key": _key(full), "k": k, "probes": n_probe, "state": panel.state_dict()},
                                  paths[CHECKPOINT])
            if progress is not None:
                progress(k, panel.n_steps)
    finally:
        rec.close()
        prb.close()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    # CPU seconds: the process's own time, meaningful on a shared machine when single-threaded
    summary.update(status="complete", steps=panel.n_steps, probes=n_probe,
                   timing={"seconds": elapsed, "cpu_seconds": cpu, "probe_seconds": t_probe,
                           "probe_cpu_seconds": c_probe, "resumed_from": start,
                           "threads": torch.get_num_threads()})
    write_summary(paths[SUMMARY], summary)
    return RunResult(out_dir, "complete", summary)


def load_run(out_dir: str) -> dict:
    """``{"summary", "records", "probes"}`` of a run folder (rows as dicts)."""
    with open(os.path.join(out_dir, SUMMARY), encoding="utf-8") as fh:
        summary = json.load(fh)
    return {"summary": summary, "records": read_table(os.path.join(out_dir, RECORDS))[1],
            "probes": read_table(os.path.join(out_dir, PROBES))[1]}
