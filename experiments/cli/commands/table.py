"""``crosscurv table RUN_DIR...``: the paper's Table 1 from run directories."""

from __future__ import annotations

import sys

HELP = (
    "Render Table 1 (Correct, JC hits, GS hits, MAE, Max. AE, Undecided, Coverage, Precision, "
    "Calibrated per task and estimate, best value per metric marked) from run directories written "
    "by `crosscurv run`, with two baselines: the majority winner and the one-step eta^2 C_S "
    "(`--one-step`); settings that differ between the runs (preset, pattern, lr, seed, "
    "optimizer, dtype) get a column each, those they share a line above the table."
)


def add_arguments(p) -> None:
    import argparse

    from crosscurv.experiments.reports.table import column_notes

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "columns:\n" + column_notes(width=96)
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="directories holding records.csv and summary.json",
    )
    p.add_argument(
        "--format",
        choices=("markdown", "plain"),
        default="markdown",
        help="markdown (bold best) or plain (* best)",
    )
    p.add_argument(
        "--paper", action="store_true", help="also print ours next to the paper's Table 1 numbers"
    )
    p.add_argument(
        "--one-step",
        action="store_true",
        help="add the one-step baseline row (the sign of eta^2 C_S at each JC iterate) to runs "
             "that lack it: replays each such run's JC trajectory (one gradient and one M_S g per "
             "iteration) and writes RUN_DIR/one_step.csv beside the records",
    )


def run(args) -> int:
    from crosscurv.experiments.reports.table import (column_notes, differing_settings, load_run,
                                                     paper_comparison, render_table, run_settings)

    runs = [load_run(r) for r in args.runs]
    if args.one_step and any("one_step" not in r.columns for r in runs):
        from crosscurv.experiments.reports.one_step_along_jc import replay

        for r in [r for r in runs if "one_step" not in r.columns]:
            replay(r.path, log=lambda line: print(line, file=sys.stderr))
        runs = [load_run(r) for r in args.runs]
    fmt = "github" if args.format == "markdown" else "simple"
    differ = differing_settings(runs)
    same = {k: v for k, v in run_settings(runs[0]).items() if k not in differ and v != "?"}
    if same:
        print(
            ("every run: " if len(runs) > 1 else "run: ")
            + ", ".join(f"{k} {v}" for k, v in same.items())
        )
        print()
    print(render_table(runs, fmt, settings=differ))
    for r in runs:  # a diverged run's rows are over the iterations before it diverged
        if r.summary.get("status") == "diverged":
            at = r.summary.get("diverged_at", "?")
            print(f"\n{r.path} diverged at k = {at}: its rows cover the {r.iters} iterations "
                  "before, not a finished run")
    print()
    print(column_notes())
    if args.paper:
        print()
        print(paper_comparison(runs, fmt))
    return 0
