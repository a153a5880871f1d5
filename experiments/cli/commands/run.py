"""``crosscurv run``: the controlled JC vs pattern-S protocol on one task (paper, Section 5.1).

Writes ``records.csv``, ``summary.json``, ``checkpoint.pt`` and ``figure.png`` into ``--out`` and
prints the answer (:mod:`crosscurv.experiments.reports.answer`). Exit codes: 0 complete, 2 bad
input, 3 diverged, 130 interrupted (``--resume``; ``--resume --iters K2`` extends a run). The flags
that decide the records are a :class:`crosscurv.experiments.runs.RunDescription`, performed by
:func:`crosscurv.experiments.runs.run`; this module parses, prints and picks the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from crosscurv.experiments.runs import Progress as _Progress  # noqa: F401  (crosscurv advise)
from crosscurv.experiments.runs import slug as _slug  # noqa: F401  (crosscurv advise)
from crosscurv.experiments.reports.numbers import number
from crosscurv.theory.errors import InputError

#: The figure ``crosscurv run`` draws into the run folder when the run ends.
FIGURE_FILE = "figure.png"

HELP = (
    "Run JC and a delay pattern S side by side from the same initial parameters (full batch, "
    "constant learning rate) and stream the measured loss gap with the recursive (Theorem 2), "
    "cumulative (Theorem 3), JC-only and bound estimates. TASK is a built-in task (mlp, fl, lora), "
    "module:factory or path/to/file.py:factory returning a crosscurv.numeric.Task."
)


def add_task_arguments(p, iters_help: str = "iterations K >= 1 (default: the preset's)") -> None:
    """The flags :func:`load` reads: which task, its preset, ``lr``, ``iters``, dtype, device, seed,
    local data and weights, and the thread count (shared by every command that builds a task this
    way)."""
    p.add_argument("task", metavar="TASK", help="built-in task name, module:factory or "
                                                "path/to/file.py:factory")
    p.add_argument("--preset", choices=("smoke", "default", "edge", "paper"), default=None,
                   help="built-in task sizes and settings (default: default)")
    p.add_argument("--lr", type=float, default=None,
                   help="constant learning rate eta > 0 (default: the preset's)")
    p.add_argument("--iters", type=int, default=None, help=iters_help)
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="parameter dtype (default: float32 for built-ins, the factory's for user "
                        "tasks)")
    p.add_argument("--device", default=None,
                   help="auto, cpu, cuda or cuda:N (default: auto for built-ins, the factory's "
                        "for user tasks)")
    p.add_argument("--seed", type=int, default=0,
                   help="initialisation and power-iteration seed (default 0)")
    p.add_argument("--data", default=None, metavar="PATH",
                   help="local data folder for a built-in task")
    p.add_argument("--model", default=None, metavar="PATH", help="local model weights (lora)")
    p.add_argument("--threads", type=_threads, default=None, metavar="N|auto",
                   help="intra-op threads (default: OMP_NUM_THREADS if set, else 1: the same "
                        "float32 records on every machine; two were measured slower than one on a "
                        "shared 2-core machine); auto: the count that computes the task's gradient "
                        "fastest here, measured at the start (1, 2, 4, ... CPUs); recorded in "
                        "summary.json as threads and threads_source")


def add_arguments(p) -> None:
    add_task_arguments(p)
    p.add_argument("--pattern", default=None,
                   help="delay pattern: jc, gs, gs:ORDER, chain, chain:ORDER or i<-j,... "
                        "(default: the task's)")
    p.add_argument("--out", default=None, help="run directory (default: runs/<task>-<pattern>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its checkpoint; with a larger --iters, "
                        "extend it")
    p.add_argument("--json", action="store_true", help="print the summary JSON on stdout")
    p.add_argument("--hvp", choices=("auto", "forward", "reverse"), default="auto",
                   help="Hessian-vector products: reverse = double backward on one retained graph "
                        "per point, forward = batched forward-over-reverse; auto (default) = term "
                        "by term, one term's graph at a time, for a task whose loss is a sum of "
                        "terms (fl: one per client), else reverse when the model has a double "
                        "backward, else forward")
    p.add_argument("--hvp-chunk", type=int, default=None, metavar="N",
                   help="at most N forward-over-reverse products per vmap batch (memory cap; "
                        "default all)")
    p.add_argument("--offload", choices=("auto", "on", "off"), default="auto",
                   help="park the carried vectors off the compute device between uses (host memory "
                        "on a GPU, files in the run folder on the CPU); auto (default): once the 7 "
                        "carried vectors reach 16 MiB (about 600,000 float32 parameters), or under "
                        "memory pressure")
    add_optimizer_arguments(p)
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="records between checkpoints (default: one a minute at most, and one "
                        "before the last iteration)")
    p.add_argument("--no-figure", action="store_true",
                   help=f"do not draw {FIGURE_FILE} (the losses, the measured gap with the "
                        "estimates and their error bands, the winner per iteration) into the run "
                        "folder when the run ends")


def add_optimizer_arguments(p) -> None:
    """``--optimizer`` and ``--block-lr``: the update rule of a run (shared by ``run`` and
    ``advise``).
    """
    p.add_argument("--optimizer", default="sgd", metavar="SPEC",
                   help="block-separable optimizer of both runs: sgd (default: the paper's plain "
                        "steps), momentum:BETA (torch.optim.SGD heavy ball) or adam[:B1,B2,EPS] "
                        "(torch.optim.Adam); the estimates are their generalizations "
                        "(docs/optimizers.md)")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step sizes: block NAME (or its 1-based index) steps with lr * "
                        "FACTOR; unnamed blocks 1 (e.g. B=4 for LoRA+ ratio 4 on lora)")


def description_from_args(args):
    """The :class:`crosscurv.experiments.runs.RunDescription` of parsed ``crosscurv run`` arguments
    (an ``argparse.Namespace``; flags a command does not have, such as ``--pattern`` for ``crosscurv
    advise``, take their defaults). A value out of range is refused by its setting's check, the
    message led by the flag (``--lr: learning rate must be ...``)."""
    import dataclasses

    from crosscurv.experiments.runs import RunDescription, RunDescriptionError, check_setting

    fields = dataclasses.fields(RunDescription)
    kw = {f.name: getattr(args, f.name) for f in fields if hasattr(args, f.name)}
    for name, value in kw.items():
        try:
            check_setting(name, value)
        except InputError as exc:
            flag = "TASK" if name == "task" else "--" + name.replace("_", "-")
            raise RunDescriptionError(f"{flag}: {exc}") from None
    return RunDescription(**kw)


def _print_summary(summary: dict, out_dir: str, records=(), figure: str | None = None) -> None:
    from tabulate import tabulate

    s = summary["settings"]
    opt = s.get("optimizer", {}).get("spec", "sgd")
    if s.get("block_lr"):
        opt += ", block-lr " + ",".join(f"{b}={f!r}" for b, f in s["block_lr"].items())
    label, pairs = _pattern_text(s)
    print(f"{summary['status']}: {summary['records']} iterations of {s['task']} "
          f"(pattern {label} {pairs}, lr {s['lr']}, {s['dtype']}, {s['device']}"
          f"{'' if opt == 'sgd' else ', optimizer ' + opt})")
    if "threads" in s:
        from crosscurv.experiments.cli.threads import describe

        line = describe(s["threads"], s.get("threads_source", "not recorded"))
        timed = s.get("threads_auto_seconds")
        if isinstance(timed, dict) and timed:
            line += "; seconds per gradient: " + ", ".join(f"{k}: {v:.3g}" for k,
                                                           v in timed.items())
        print(line)
    if summary["status"] == "diverged":  # no metrics over the divergence: the last finite state
        from crosscurv.experiments.reports.answer import diverged_lines

        print("\n".join(diverged_lines(list(records), out_dir)))
        if figure:
            print(f"figure of the finite iterations: {figure}")
        return
    if records:
        from crosscurv.experiments.reports.answer import answer_lines
        from crosscurv.numeric.records import records_columns

        print("\n".join(answer_lines(records_columns(list(records)), label)))
    rows = []
    for name, m in summary["metrics"].items():
        rows.append([name, f"{m['correct']:.1f}%", f"{m['jc_hits'][0]}/{m['jc_hits'][1]}",
                     f"{m['s_hits'][0]}/{m['s_hits'][1]}", _g(m["mae"]), _g(m["max_ae"])])
    if rows:
        print(tabulate(rows, headers=["estimate", "Correct", "JC hits", "GS hits", "MAE",
                                      "Max. AE"],
                       tablefmt="simple", disable_numparse=True))
    c = summary["constants"]
    t = summary["timing"]
    rate = t.get("iterations_per_s")
    print(f"G ~ {_g(c['G'])}, L ~ {_g(c['L'])} (a-posteriori estimates); "
          f"{'%.2f it/s' % rate if rate else 'no new iterations'}; records in {out_dir}"
          + (f"; figure {figure}" if figure else ""))


def _pattern_text(settings: dict) -> tuple[str, str]:
    """``("gs:V,U", "{U<-V}")``: the run's pattern spelled and described with the task's block
    names."""
    from crosscurv.theory.patterns import DelayPattern, spelling

    try:
        pattern = DelayPattern.from_dict(settings["pattern"])
    except (KeyError, TypeError, ValueError, InputError):  # an older summary's pattern record
        return settings["pattern"]["name"], _describe(settings["pattern"])
    names = list(settings.get("blocks") or {}) or None
    return spelling(pattern, names), pattern.describe(names)


def _describe(pattern: dict) -> str:
    return "{" + ", ".join(f"{i}<-{j}" for i, j in pattern["pairs"]) + "}"


def _g(x) -> str:
    return number(x)


def draw_figure(result, out_dir: str) -> str | None:
    """Draw ``FIGURE_FILE`` of a finished or diverged run into ``out_dir`` from all its records (a
    resumed run's included); returns its path, or ``None`` (no records; a failure is one line on
    stderr, the run's outcome unchanged)."""
    records = [r for r in result.records]
    if not records or out_dir is None:
        return None
    try:
        from crosscurv.experiments.reports.plotting import run_figure
        from crosscurv.numeric.records import records_columns

        s = result.summary["settings"]
        label, _ = _pattern_text(s)
        title = f"{s['task']}: JC and S = {label}, lr {s['lr']}, K = {records[-1]['k']}"
        if result.status == "diverged":
            title += f" (diverged at k = {result.summary.get('diverged_at')})"
        path = os.path.join(out_dir, FIGURE_FILE)
        return str(run_figure(records_columns(records), path, title, label))
    except Exception as exc:  # the records are written; a figure that fails does not undo them
        print(f"crosscurv: figure not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def run(args) -> int:
    result, out = execute(args)
    figure = None if args.no_figure else draw_figure(result, out)
    if args.json:
        from crosscurv.numeric.records import json_safe

        print(json.dumps(json_safe(result.summary), indent=2, allow_nan=False))
    else:
        _print_summary(result.summary, out, result.records, figure)
    if result.status == "diverged":
        print(f"crosscurv: {result.message}", file=sys.stderr)
    return result.exit_code


def parse(argv: list) -> object:
    """``crosscurv run`` arguments as the command parses them
    (``description_from_args(parse(argv))``)."""
    import argparse

    p = argparse.ArgumentParser(prog="crosscurv run")
    add_arguments(p)
    return p.parse_args(argv)


def _threads(text: str):
    """``--threads``: an integer or ``auto`` (its range is checked with the other settings)."""
    from crosscurv.experiments.thread_count import AUTO

    if text == AUTO:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 1 or {AUTO}, got {text!r}") from None


def load(args):
    """The task, its settings, ``lr`` and ``iters`` for parsed arguments (shared with ``crosscurv
    advise``): :func:`crosscurv.experiments.runs.load` of their description.

    Bad input raises :class:`crosscurv.theory.errors.InputError`."""
    from crosscurv.experiments import runs
    from crosscurv.experiments.cli import threads as thread_choice
    from crosscurv.experiments.thread_count import AUTO

    description = description_from_args(args)
    # --threads auto is measured by the caller once the task is built
    # (crosscurv.experiments.runs.auto_threads)
    thread_choice.apply(None if description.threads == AUTO else description.threads)
    return runs.load(description)


def execute(args):
    """Run the protocol for parsed arguments (:func:`crosscurv.experiments.runs.run`); returns
    ``(ProtocolResult, run folder)``.

    Bad input raises :class:`crosscurv.theory.errors.InputError` (a changed setting on ``--resume``:
    :class:`crosscurv.numeric.protocol.SettingsChangedError`)."""
    from crosscurv.experiments import runs
    from crosscurv.experiments.cli import threads as thread_choice

    description = description_from_args(args)
    progress = runs.Progress()
    try:
        return runs.run(description, args.out or runs.DEFAULT_OUT, resume=args.resume,
                        progress=progress, threads_source=thread_choice.SOURCE)
    finally:
        progress.close()
