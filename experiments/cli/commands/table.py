"""``crosscurv table RUN_DIR...``: the paper's Table 1 from run directories."""

from __future__ import annotations

HELP = (
    "Render Table 1 (Correct, JC hits, GS hits, MAE, Max. AE per task and estimate, "
    "best value per metric marked) from run directories written by `crosscurv run`."
)


def add_arguments(p) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories holding records.csv and summary.json")
    p.add_argument("--format", choices=("markdown", "plain"), default="markdown", help="markdown (bold best) or plain (* best)")
    p.add_argument("--paper", action="store_true", help="also print ours next to the paper's Table 1 numbers")


def run(args) -> int:
    from crosscurv.experiments.reports.table import load_run, paper_comparison, render_table

    runs = [load_run(r) for r in args.runs]
    fmt = "github" if args.format == "markdown" else "simple"
    print(render_table(runs, fmt))
    if args.paper:
        print()
        print(paper_comparison(runs, fmt))
    return 0
