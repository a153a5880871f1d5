"""``crosscurv table RUN_DIR...``: the paper's Table 1 from run directories."""

from __future__ import annotations

import sys

HELP = (
    "Render Table 1 (Correct, JC hits, GS hits, MAE, Max. AE per task and estimate, "
    "best value per metric marked) from run directories written by `crosscurv run`, with two "
    "baselines: "
    "the majority winner and the one-step eta^2 C_S (`--one-step`)."
)


def add_arguments(p) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories holding records.csv and summary.json")
    p.add_argument("--format", choices=("markdown", "plain"), default="markdown", help="markdown (bold best) or plain (* best)")
    p.add_argument("--paper", action="store_true", help="also print ours next to the paper's Table 1 numbers")
    p.add_argument("--one-step", action="store_true",
                   help="add the one-step baseline row (the sign of eta^2 C_S at each JC iterate) "
                        "to runs that lack "
                        "it: replays each such run's JC trajectory (one gradient and one M_S g "
                        "per iteration) and "
                        "writes RUN_DIR/one_step.csv beside the records")


def run(args) -> int:
    from crosscurv.experiments.reports.table import load_run, paper_comparison, render_table

    runs = [load_run(r) for r in args.runs]
    if args.one_step and any("one_step" not in r.columns for r in runs):
        from crosscurv.experiments.reports.one_step_along_jc import replay

        for r in [r for r in runs if "one_step" not in r.columns]:
            replay(r.path, log=lambda line: print(line, file=sys.stderr))
        runs = [load_run(r) for r in args.runs]
    fmt = "github" if args.format == "markdown" else "simple"
    print(render_table(runs, fmt))
    if args.paper:
        print()
        print(paper_comparison(runs, fmt))
    return 0
