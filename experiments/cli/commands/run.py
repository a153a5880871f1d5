"""``crosscurv run``: the controlled JC vs pattern-S protocol on one task (paper, Section 5.1).

Writes ``records.csv`` (streamed, one row per iteration: ``k, loss_jc,
loss_s, gap, recursive, cumulative, jc_only, bound_bk``), ``summary.json``
(effective settings, status, the Section 5.1 metrics of each estimate,
iterations per second, G and L estimates) and ``checkpoint.pt`` into
``--out``.  Exit codes: 0 complete, 2 bad input (one line, nothing
overwritten), 3 diverged (records so far kept), 130 interrupted (resume with
``--resume``).  ``--resume --iters K2`` with ``K2`` above the run's ``K``
extends a finished or interrupted run to ``K2`` (the records equal those of an
uninterrupted run to ``K2``); every other setting must match.  ``--optimizer
momentum:BETA|adam[:B1,B2,EPS]`` and ``--block-lr NAME=FACTOR,...`` run both
trajectories with that optimizer and record the generalized estimates in the
same columns (plain ``sgd`` without factors: the paper's protocol unchanged).
"""

from __future__ import annotations

import json
import math
import re
import sys
import time

HELP = (
    "Run JC and a delay pattern S side by side from the same initial parameters (full batch, "
    "constant learning rate) and stream the measured loss gap with the recursive (Theorem 2), "
    "cumulative (Theorem 3), JC-only and bound estimates. TASK is a built-in task (mlp, fl, lora), "
    "module:factory or path/to/file.py:factory returning a crosscurv.numeric.Task."
)


def add_task_arguments(p, iters_help: str = "iterations K >= 1 (default: the preset's)") -> None:
    """The flags :func:`load` reads: which task, its preset, ``lr``, ``iters``, dtype, device, seed, local data
    and weights, and the thread count (shared by every command that builds a task this way)."""
    p.add_argument("task", metavar="TASK", help="built-in task name, module:factory or path/to/file.py:factory")
    p.add_argument("--preset", choices=("smoke", "default", "edge", "paper"), default=None,
                   help="built-in task sizes and settings (default: default)")
    p.add_argument("--lr", type=float, default=None, help="constant learning rate eta > 0 (default: the preset's)")
    p.add_argument("--iters", type=int, default=None, help=iters_help)
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="parameter dtype (default: float32 for built-ins, the factory's for user tasks)")
    p.add_argument("--device", default=None,
                   help="auto, cpu, cuda or cuda:N (default: auto for built-ins, the factory's for user tasks)")
    p.add_argument("--seed", type=int, default=0, help="initialisation and power-iteration seed (default 0)")
    p.add_argument("--data", default=None, metavar="PATH", help="local data folder for a built-in task")
    p.add_argument("--model", default=None, metavar="PATH", help="local model weights (lora)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="intra-op threads (default: OMP_NUM_THREADS if set, else 1: two were measured slower than one "
                        "on a shared 2-core machine; recorded in summary.json as threads and threads_source)")


def add_arguments(p) -> None:
    add_task_arguments(p)
    p.add_argument("--pattern", default=None,
                   help="delay pattern: jc, gs, gs:ORDER, chain, chain:ORDER or i<-j,... (default: the task's)")
    p.add_argument("--out", default=None, help="run directory (default: runs/<task>-<pattern>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its checkpoint; with a larger --iters, extend it")
    p.add_argument("--json", action="store_true", help="print the summary JSON on stdout")
    p.add_argument("--hvp", choices=("auto", "forward", "reverse"), default="auto",
                   help="Hessian-vector products: reverse = double backward on one retained graph per point, "
                        "forward = batched forward-over-reverse; auto (default) = reverse when the model has a "
                        "double backward, else forward")
    p.add_argument("--hvp-chunk", type=int, default=None, metavar="N",
                   help="at most N forward-over-reverse products per vmap batch (memory cap; default all)")
    p.add_argument("--offload", choices=("auto", "on", "off"), default="auto",
                   help="park the carried vectors off the compute device between uses (host memory on a GPU, "
                        "files in the run folder on the CPU); auto (default): once the 7 carried vectors reach 16 MiB "
                        "(about 600,000 float32 parameters), or under memory pressure")
    p.add_argument("--optimizer", default="sgd", metavar="SPEC",
                   help="block-separable optimizer of both runs: sgd (default: the paper's plain steps), "
                        "momentum:BETA (torch.optim.SGD heavy ball) or adam[:B1,B2,EPS] (torch.optim.Adam); the "
                        "estimates are their generalizations (docs/optimizers.md)")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step sizes: block NAME (or its 1-based index) steps with lr * FACTOR; "
                        "unnamed blocks 1 (e.g. B=4 for LoRA+ ratio 4 on lora)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="records between checkpoints (default: one a minute at most, and one before the last "
                        "iteration)")


def _check_flags(args):
    from crosscurv.numeric.protocol import ProtocolError

    if args.lr is not None and (not math.isfinite(args.lr) or args.lr <= 0):
        raise ProtocolError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.iters is not None and args.iters < 1:
        raise ProtocolError(f"--iters must be >= 1, got {args.iters}")
    if getattr(args, "hvp_chunk", None) is not None and args.hvp_chunk < 1:
        raise ProtocolError(f"--hvp-chunk must be >= 1, got {args.hvp_chunk}")
    if getattr(args, "threads", None) is not None and args.threads < 1:
        raise ProtocolError(f"--threads must be >= 1, got {args.threads}")
    if getattr(args, "checkpoint_every", None) is not None and args.checkpoint_every < 1:
        raise ProtocolError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


class _Progress:
    """tqdm bar on a terminal; otherwise a line every ~10% of K on stderr."""

    def __init__(self, total: int, label: str):
        self.total, self.label = total, label
        self.bar = None
        self.t0 = time.perf_counter()
        self.start = None
        self.step = max(1, total // 10)
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=label, unit="it", file=sys.stderr)
            except Exception:  # tqdm missing or broken: plain lines
                self.bar = None

    def __call__(self, k: int, total: int) -> None:
        if self.start is None:  # first record of this session (k - 1 records came before, e.g. on resume)
            self.start = k - 1
        if self.bar is not None:
            self.bar.update(k - self.bar.n)
            return
        if k % self.step == 0 or k == total:
            el = time.perf_counter() - self.t0
            rate = (k - self.start) / el if el > 0 else float("nan")
            print(f"crosscurv: {self.label}: k={k}/{total} ({100 * k // total}%), {rate:.2f} it/s",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _print_summary(summary: dict, out_dir: str) -> None:
    from tabulate import tabulate

    s = summary["settings"]
    opt = s.get("optimizer", {}).get("spec", "sgd")
    if s.get("block_lr"):
        opt += ", block-lr " + ",".join(f"{b}={f!r}" for b, f in s["block_lr"].items())
    print(f"{summary['status']}: {summary['records']} iterations of {s['task']} "
          f"(pattern {s['pattern']['name']} {_describe(s['pattern'])}, lr {s['lr']}, {s['dtype']}, {s['device']}"
          f"{'' if opt == 'sgd' else ', optimizer ' + opt})")
    if "threads" in s:
        from crosscurv.experiments.cli.threads import describe

        print(describe(s["threads"], s.get("threads_source", "not recorded")))
    rows = []
    for name, m in summary["metrics"].items():
        rows.append([name, f"{m['correct']:.1f}%", f"{m['jc_hits'][0]}/{m['jc_hits'][1]}",
                     f"{m['s_hits'][0]}/{m['s_hits'][1]}", _g(m["mae"]), _g(m["max_ae"])])
    if rows:
        print(tabulate(rows, headers=["estimate", "Correct", "JC hits", "GS hits", "MAE", "Max. AE"],
                       tablefmt="simple", disable_numparse=True))
    c = summary["constants"]
    t = summary["timing"]
    rate = t.get("iterations_per_s")
    print(f"G ~ {_g(c['G'])}, L ~ {_g(c['L'])} (a-posteriori estimates); "
          f"{'%.2f it/s' % rate if rate else 'no new iterations'}; records in {out_dir}")


def _describe(pattern: dict) -> str:
    return "{" + ", ".join(f"{i}<-{j}" for i, j in pattern["pairs"]) + "}"


def _g(x) -> str:
    return "nan" if x is None else f"{x:.3g}"


def run(args) -> int:
    result, out = execute(args)
    if args.json:
        from crosscurv.numeric.records import json_safe

        print(json.dumps(json_safe(result.summary), indent=2, allow_nan=False))
    else:
        _print_summary(result.summary, out)
    if result.status == "diverged":
        print(f"crosscurv: {result.message}", file=sys.stderr)
    return result.exit_code


def parse(argv: list) -> object:
    """``crosscurv run`` arguments as the command parses them (for callers such as ``crosscurv report``)."""
    import argparse

    p = argparse.ArgumentParser(prog="crosscurv run")
    add_arguments(p)
    return p.parse_args(argv)


def _record_threads(settings: dict, args, out: str) -> None:
    """``settings["threads_source"]``: why the run uses ``settings["threads"]`` threads (:mod:`crosscurv.experiments.cli.threads`;
    the summary printed at the end says it in one line).  A resumed run keeps the reason it was started with (same count), so that
    resuming compares equal settings; a run started before the reason was recorded records none."""
    import os

    from crosscurv.experiments.cli import threads as thread_choice
    source = thread_choice.SOURCE
    if args.resume:
        try:
            with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
                saved = json.load(fh).get("settings") or {}
        except (OSError, ValueError, AttributeError):
            saved = {}
        if saved.get("threads") == settings["threads"] and "threads" in saved:
            source = saved.get("threads_source")
    if source is not None:
        settings["threads_source"] = source


def load(args):
    """The task, its settings, ``lr`` and ``iters`` for parsed arguments (shared with ``crosscurv advise``).

    Reads ``task``, ``preset``, ``lr``, ``iters``, ``seed``, ``dtype``, ``device``, ``data``, ``model``,
    ``optimizer`` (checked before the task is built) and the optional ``hvp_chunk`` / ``checkpoint_every``.
    Bad input raises :class:`crosscurv.theory.errors.InputError`."""
    from crosscurv.experiments.tasks.loading import is_builtin, load_task
    from crosscurv.numeric.device import resolve_device, resolve_dtype
    from crosscurv.numeric.protocol import ProtocolError

    _check_flags(args)
    from crosscurv.experiments.cli import threads as thread_choice
    thread_choice.apply(getattr(args, "threads", None))
    from crosscurv.numeric.optimizers import parse_optimizer

    parse_optimizer(args.optimizer)  # a bad spec fails before the task is built
    device = resolve_device(args.device) if args.device is not None else None
    dtype = resolve_dtype(args.dtype) if args.dtype is not None else None
    task, settings = load_task(args.task, args.preset, device=device, dtype=dtype, seed=args.seed,
                               data_path=args.data, model_path=args.model)
    if args.preset is None and is_builtin(args.task):
        settings["preset"] = settings.get("preset", "default")

    lr = args.lr if args.lr is not None else settings.get("lr")
    iters = args.iters if args.iters is not None else settings.get("iters")
    if lr is None:
        raise ProtocolError(f"task {args.task} sets no learning rate: pass --lr")
    if iters is None:
        raise ProtocolError(f"task {args.task} sets no number of iterations: pass --iters")
    return task, settings, lr, iters


def execute(args):
    """Load the task and run the protocol for parsed arguments; returns ``(ProtocolResult, run folder)``.

    Bad input raises :class:`crosscurv.theory.errors.InputError` (a changed setting on ``--resume``:
    :class:`crosscurv.numeric.protocol.SettingsChangedError`)."""
    import torch  # import cost paid here, not at CLI start

    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.theory.patterns import parse_pattern

    task, settings, lr, iters = load(args)
    spec = args.pattern or settings.get("pattern") or task.default_pattern
    pattern = parse_pattern(str(spec), task.n_blocks, task.block_names)
    from crosscurv.numeric.optimizers import optimizer_setup

    setup = optimizer_setup(task, args.optimizer, args.block_lr)
    out = args.out or f"runs/{_slug(task.name)}-{_slug(pattern.name)}" + ("" if setup.plain else "-" + _slug(setup.describe()))

    settings.update(
        lr=lr, iters=iters, pattern_spec=str(spec), seed=args.seed,
        dtype=str(task.dtype).replace("torch.", ""), device=str(task.device),
        data_path=args.data, model_path=args.model,
        # float32 reductions depend on it: a run resumed with another thread count is refused
        threads=torch.get_num_threads(),
    )
    _record_threads(settings, args, out)
    label = f"{task.name} {pattern.name}"
    progress = _Progress(int(iters), label)
    try:
        result = run_protocol(
            task, pattern, lr, iters, out_dir=out, resume=args.resume, hvp_method=args.hvp, seed=args.seed,
            settings=settings, checkpoint_every=args.checkpoint_every, chunk_size=args.hvp_chunk,
            progress=progress, offload={"auto": None, "on": True, "off": False}[args.offload],
            optimizer=setup.spec, block_lr=setup.named,
        )
    finally:
        progress.close()
    return result, out
