"""Run one panel for one seed on the trajectory runner (:mod:`crosscurv.numeric.trajectory`):
streamed records, probes, checkpoints, resume.

Run folder (``OUT/<panel>/seed<S>/``)::

    records.csv   one row per step (:data:`.panel.RECORD_FIELDS`), flushed as written
    probes.csv    one row per probed step (:data:`.panel.PROBE_FIELDS`)
    summary.json  settings, data and model used, status, timing
    checkpoint.pt the panel's state after the last checkpointed step (not for sharing)

Iteration ``k = 1..n_steps`` of the runner is the panel's step ``k`` (a probe first where one is
due); iteration ``0`` computes nothing. A killed run continues with ``resume=True`` from its
checkpoint: the CSVs are cut back to the checkpoint's rows and the steps after it are recomputed, so
the result is bit for bit that of an uninterrupted run (CPU, same threads). ``resume=True`` on a
folder without a checkpoint starts the run afresh.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import torch

from crosscurv.numeric.protocol_checks import ProtocolError
from crosscurv.numeric.records import RecordWriter, json_safe, write_summary
from crosscurv.numeric.trajectory import RecordsKind, Run, RunFolder, check_resume_settings
from crosscurv.theory.errors import MotivationError

from .panel import PROBE_FIELDS, RECORD_FIELDS
from .records import read_table, truncate_table

__all__ = ["MotivationError", "build_panel", "run_panel", "RunResult"]

RECORDS, PROBES, SUMMARY = "records.csv", "probes.csv", "summary.json"


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


def _keep(path: str, n: int) -> list:
    """The first ``n`` rows of the table at ``path`` kept (a missing one created) and returned."""
    if not os.path.exists(path):
        RecordWriter(path, fields=RECORD_FIELDS).close()
    truncate_table(path, n)
    return read_table(path)[1]


class PanelRun:
    """The runner's body: the panel's steps, its probes and their timing."""

    def __init__(self, panel, settings: dict, summary: dict, probes_path: str):
        self.panel, self.settings, self.head = panel, settings, summary
        self.probes_path, self.n_probe, self.probes = probes_path, 0, None
        self.t_probe = self.c_probe = 0.0

    def open_probes(self, n_probe: int, append: bool) -> None:
        """The probes table, cut back to ``n_probe`` rows when ``append``."""
        if append:
            truncate_table(self.probes_path, n_probe)
        self.n_probe = n_probe
        self.probes = RecordWriter(self.probes_path, append=append, fields=PROBE_FIELDS)

    def iteration(self, k: int, run: Run) -> None:
        if k == 0:
            return
        panel = self.panel
        if panel.probe_every and (k - 1) % panel.probe_every == 0:
            tp, cp = time.perf_counter(), time.process_time()
            self.probes.write({"k": k, **panel.probe(k)})
            self.n_probe += 1
            self.t_probe += time.perf_counter() - tp
            self.c_probe += time.process_time() - cp
        run.emit(k, panel.step(k))

    def vectors(self) -> dict:
        return {}

    def state(self) -> dict:
        return {"probes": self.n_probe, "state": self.panel.state_dict()}

    def sources(self, vectors):
        return None

    def summary(self, run, status, message, diverged_at):
        return self.head if status == "running" else None


def _settings(name, seed, settings, dtype, device, data_path, model_path) -> dict:
    return {"panel": name, "seed": seed, "settings": settings,
            "dtype": str(dtype).replace("torch.", ""), "device": str(device),
            "data_path": None if data_path is None else str(data_path),
            "model_path": None if model_path is None else str(model_path)}


def run_panel(name: str, settings: dict, seed: int, out_dir: str, *, resume: bool = False,
              progress=None, device="cpu", dtype=torch.float32, data_path=None, model_path=None,
              checkpoint_every: int = 10) -> RunResult:
    """Train panel ``name`` for one seed into ``out_dir`` (see the module docstring).

    Args:
        settings: the preset's settings (:mod:`.presets`), recorded in the summary.
        progress: optional ``progress(k, n)`` callback after each step.
        checkpoint_every: steps between checkpoints (and always before the last one).

    Raises:
        MotivationError: ``out_dir`` already holds records and ``resume`` is false,
            or its checkpoint was written with other settings.
    """
    full = _settings(name, seed, settings, dtype, device, data_path, model_path)
    folder = RunFolder(out_dir, RECORDS, SUMMARY)
    probes = os.path.join(out_dir, PROBES)
    if resume and not os.path.exists(folder.checkpoint):  # killed before its first checkpoint
        for path in (folder.records, probes):
            if os.path.exists(path):
                os.remove(path)
        resume = False
    try:
        ck = folder.load_checkpoint(device) if resume else None
        if ck is None:
            folder.check_fresh()
        else:
            check_resume_settings(ck["settings"], {**json_safe(full), "iters": ck["settings"].get(
                "iters")}, out_dir)
    except ProtocolError as exc:
        raise MotivationError(str(exc)) from None
    if ck is None and os.path.exists(probes):  # no run in the folder: a stale table
        os.remove(probes)
    panel = build_panel(name, settings, seed, device=device, dtype=dtype, data_path=data_path,
                        model_path=model_path)
    head = {"panel": name, "seed": seed, "status": "running", "settings": full, "info": panel.info,
            "labels": {"seq": panel.seq_label, "sim": panel.sim_label,
                       "gs": getattr(panel, "gs_label", None)},
            "step_unit": panel.step_unit, "n_steps": panel.n_steps,
            "eval_every": panel.eval_every, "probe_every": panel.probe_every}
    body = PanelRun(panel, {**json_safe(full), "iters": panel.n_steps}, head, probes)
    run = Run(panel.n_steps, folder, RecordsKind(RECORD_FIELDS, lambda rec: [rec], _keep),
              checkpoint_every, progress=progress)
    done, start = False, 0
    if ck is not None:
        done, _, start = run.resume_point(ck)
        panel.load_state_dict(ck["state"])
        body.open_probes(int(ck["probes"]), append=True)
    else:
        folder.create()
        body.open_probes(0, append=False)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        run.execute(body, start, done, device)
    finally:
        body.probes.close()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    # CPU seconds: the process's own time, meaningful on a shared machine when single-threaded
    summary = dict(head, status="complete", steps=panel.n_steps, probes=body.n_probe,
                   timing={"seconds": elapsed, "cpu_seconds": cpu, "probe_seconds": body.t_probe,
                           "probe_cpu_seconds": body.c_probe, "resumed_from": run.resumed_from or 0,
                           "threads": torch.get_num_threads()})
    write_summary(folder.summary, summary)
    return RunResult(out_dir, "complete", summary)


def load_run(out_dir: str) -> dict:
    """``{"summary", "records", "probes"}`` of a run folder (rows as dicts)."""
    with open(os.path.join(out_dir, SUMMARY), encoding="utf-8") as fh:
        summary = json.load(fh)
    return {"summary": summary, "records": read_table(os.path.join(out_dir, RECORDS))[1],
            "probes": read_table(os.path.join(out_dir, PROBES))[1]}
