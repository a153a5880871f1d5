"""``crosscurv studies``: Table 1 over seeds, the regime map and the thread comparison, from sweep
folders."""

from __future__ import annotations

HELP = (
    "Aggregate sweep folders written by `crosscurv sweep` into OUT/studies.md and "
    "OUT/figures/studies_*.png: Table 1 over seeds (mean and [min, max] of every metric, next to "
    "the paper's), winner timelines over seeds, the regime map (agreement and MAE against the "
    "largest eta*sharpness and the first crossing of 2, with a computed sentence per task and "
    "estimate) and, with --threads-compare, how far runs with another thread count agree. Runs "
    "still running are left out and counted."
)


def add_arguments(p) -> None:
    p.add_argument("--seeds", metavar="DIR", nargs="+", default=[],
                   help="sweep folder(s) with one run per seed of each task (several are pooled; a "
                        "task's seeds are cut to their smallest K)")
    p.add_argument("--regime", metavar="DIR", nargs="+", default=[],
                   help="sweep folders of learning-rate grids (the regime map)")
    p.add_argument("--threads-compare", metavar="DIR", nargs="+", default=[],
                   help="sweep folders repeating seeds-study runs with another thread count")
    p.add_argument("--out", default="reports", help="report folder (default: reports)")


def run(args) -> int:
    import shlex

    from crosscurv.experiments.studies import write_studies_report

    argv = ["crosscurv", "studies"]
    if args.seeds:
        argv += ["--seeds", *args.seeds]
    if args.regime:
        argv += ["--regime", *args.regime]
    if args.threads_compare:
        argv += ["--threads-compare", *args.threads_compare]
    argv += ["--out", args.out]
    res = write_studies_report(args.out, seeds=args.seeds, regime=args.regime,
                               threads=args.threads_compare,
                               command=" ".join(shlex.quote(a) for a in argv))
    print(f"wrote {res.path} and {len(res.figures)} figure(s)")
    if res.coverage:
        print(f"seeds: {res.coverage}")
    return 0
