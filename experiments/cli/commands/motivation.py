"""``crosscurv motivation``: the paper's Figure 1 with the practical implementations.

Trains, per panel and seed, the sequential and simultaneous practical implementations side by side
(:mod:`crosscurv.experiments.motivation`) and streams ``OUT/<panel>/seed<S>/records.csv`` and
``probes.csv``; runs ``validate-step`` on deterministic versions of each panel's steps
(``OUT/<panel>/verdicts.json``); with ``--report DIR`` writes ``DIR/motivation.md`` and
``DIR/figures/motivation_*.png``. Exit codes: 0 done, 2 bad input (one line), 130 interrupted
(continue with ``--resume``).
"""

from __future__ import annotations

import json
import os
import sys
import time

HELP = (
    "The motivation study (the paper's Figure 1): sequential vs simultaneous practical "
    "implementations in three settings (mlp: in-place back-propagation vs JC, plus exact GS; fl: "
    "FedAlt vs FedSim; lora: alternating vs simultaneous factor updates), per-step records "
    "streamed to CSV, the one-step cross-curvature criterion along the runs, validate-step "
    "verdicts on deterministic versions of each step."
)


def add_arguments(p) -> None:
    p.add_argument("--panel", choices=("mlp", "fl", "lora"), default=None,
                   help="one panel (default: all three)")
    p.add_argument("--preset", choices=("smoke", "default", "paper"), default="default",
                   help="sizes and steps (default: default, the CPU job; paper: the appendix's "
                        "settings)")
    p.add_argument("--seed", type=int, default=None,
                   help="run this seed only (default: the preset's seeds)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="comma-separated seeds (default: 0,1,2 at default)")
    p.add_argument("--out", default=None, help="run folder (default: runs/motivation-<preset>)")
    p.add_argument("--resume", action="store_true", help="continue interrupted runs in --out")
    p.add_argument("--data", default=None, metavar="DIR",
                   help="local full data for the chosen --panel (MNIST IDX, cifar-10-batches-py, "
                        "GLUE SST-2)")
    p.add_argument("--model", default=None, metavar="DIR", help="local T5 weights (lora panel)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    p.add_argument("--no-verdicts", action="store_true", help="skip the validate-step verdicts")
    p.add_argument("--report", default=None, metavar="DIR",
                   help="also write DIR/motivation.md and DIR/figures/motivation_*.png")


def _seeds(args) -> list[int]:
    from crosscurv.experiments.motivation.presets import DEFAULT_SEEDS
    from crosscurv.experiments.motivation.runner import MotivationError

    if args.seed is not None and args.seeds is not None:
        raise MotivationError("give --seed or --seeds, not both")
    if args.seed is not None:
        return [args.seed]
    if args.seeds is None:
        return list(DEFAULT_SEEDS[args.preset])
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise MotivationError(
            f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise MotivationError(f"--seeds must list distinct integers, got {args.seeds!r}")
    return seeds


class _Progress:
    """A line every ~10% of the steps on stderr (the habit of ``crosscurv run``)."""

    def __init__(self, label: str):
        self.label, self.t0, self.start = label, time.perf_counter(), None

    def __call__(self, k: int, total: int) -> None:
        if self.start is None:
            self.start = k - 1
        if k % max(1, total // 10) == 0 or k == total:
            el = time.perf_counter() - self.t0
            rate = (k - self.start) / el if el > 0 else float("nan")
            print(f"crosscurv: {self.label}: k={k}/{total} ({100 * k // total}%), {rate:.2f} it/s",
                  file=sys.stderr, flush=True)


def _complete(run_dir: str, key: dict) -> bool:
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8") as fh:
            s = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return False
    return s.get("status") == "complete" and s.get("settings") == key


def run(args) -> int:
    import torch

    from crosscurv.experiments.motivation import PANELS
    from crosscurv.experiments.motivation.presets import panel_settings
    from crosscurv.experiments.motivation.runner import MotivationError, run_panel
    from crosscurv.numeric.device import resolve_device
    from crosscurv.numeric.records import json_safe, write_summary

    panels = [args.panel] if args.panel else list(PANELS)
    if args.data is not None and args.panel is None:
        raise MotivationError("--data is per panel: give --panel mlp, fl or lora with it")
    if args.model is not None and args.panel != "lora":
        raise MotivationError("--model (T5 weights) needs --panel lora")
    for path, what in ((args.data, "--data"), (args.model, "--model")):
        if path is not None and not os.path.exists(os.path.expanduser(path)):
            raise MotivationError(f"{what}: {path} does not exist")
    seeds = _seeds(args)
    device = resolve_device(args.device)
    out = args.out or f"runs/motivation-{args.preset}"
    dtype = torch.float32

    # refuse before computing anything: an unfinished run is continued only with --resume
    plan = []
    for panel in panels:
        settings = panel_settings(panel, args.preset)
        for seed in seeds:
            run_dir = os.path.join(out, panel, f"seed{seed}")
            key = {"panel": panel, "seed": seed, "settings": settings, "dtype": "float32",
                   "device": str(device),
                   "data_path": None if args.data is None else str(args.data),
                   "model_path": None if args.model is None else str(args.model)}
            done = _complete(run_dir, json.loads(json.dumps(json_safe(key))))
            rec = os.path.join(run_dir, "records.csv")
            if not done and os.path.isfile(rec) and os.path.getsize(rec) > 0 and not args.resume:
                raise MotivationError(f"{run_dir} already holds records; pass --resume to continue "
                                      f"it or choose another --out")
            plan.append((panel, settings, seed, run_dir, done))

    timings: dict = {}
    for panel, settings, seed, run_dir, done in plan:
        if done:
            print(f"motivation {panel} seed {seed}: complete run found in {run_dir}, reused",
                  flush=True)
            continue
        t0 = time.perf_counter()
        res = run_panel(panel, settings, seed, run_dir, resume=args.resume, device=device,
                        dtype=dtype, data_path=args.data, model_path=args.model,
                        progress=_Progress(f"motivation {panel} seed {seed}"))
        dt = time.perf_counter() - t0
        timings.setdefault(panel, {})[seed] = dt
        print(f"motivation {panel} seed {seed}: {res.summary['steps']} "
              f"{res.summary['step_unit']}s in {dt:.1f} s "
              f"(probes {res.summary['timing']['probe_seconds']:.1f} s); records in {run_dir}",
              flush=True)

    if not args.no_verdicts:
        from crosscurv.experiments.motivation.verdicts import identify

        for panel in panels:
            path = os.path.join(out, panel, "verdicts.json")
            if os.path.isfile(path):
                print(f"motivation {panel}: verdicts found in {path}, reused", flush=True)
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            results = identify(panel)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_summary(path, {"panel": panel, "seconds": dt, "cpu_seconds": cpu,
                                 "threads": torch.get_num_threads(), "results": results})
            for r in results:
                print(f"motivation {panel}: {r['label']}: {r['verdict']}", flush=True)
            print(f"motivation {panel}: verdicts in {dt:.1f} s -> {path}", flush=True)

    if args.report is not None:
        from crosscurv.experiments.motivation.report import write_motivation_report

        md = write_motivation_report(args.report, runs_dir=out, preset=args.preset, panels=panels,
                                     seeds=seeds)
        print(f"motivation report: {md}", flush=True)
    return 0
