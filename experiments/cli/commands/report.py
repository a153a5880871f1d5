"""``crosscurv report``: derivations, scaling, the three studies, Table 1 and figures."""

from __future__ import annotations

from crosscurv.theory.errors import InputError

HELP = (
    "Regenerate reports/: symbolic derivations, the error-scaling study, the three controlled "
    "studies (mlp, fl, lora; one thread each), Table 1, figures, the motivation study, the studies "
    "over seeds and the regime map (aggregated from reports/sweeps, which `make studies` computes) "
    "and an index. Complete runs are reused and interrupted ones resumed; --fresh recomputes the "
    "studies and motivation runs."
)


def add_arguments(p) -> None:
    p.add_argument("--preset", default="default",
                   help="smoke, default (CPU main job) or paper (GPU)")
    p.add_argument("--out", default="reports", help="output folder (default: reports)")
    p.add_argument("--tasks", default="mlp,fl,lora", help="comma-separated studies to run")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--skip-derive", action="store_true",
                   help="do not rerun the symbolic derivations")
    p.add_argument("--skip-scaling", action="store_true", help="do not rerun the scaling study")
    p.add_argument("--quick-scaling", action="store_true",
                   help="run the scaling study with --quick")
    p.add_argument("--fresh", action="store_true",
                   help="recompute runs even when complete ones exist")
    p.add_argument("--check", action="store_true",
                   help="instead: recompute committed runs (RUN_DIR..., default every run under "
                        "--out) from their summary.json and compare with their records "
                        "(validate-records tolerances); exit 1 at the first disagreement")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                   help="with --check: the run folders to check")
    p.add_argument("--iters", type=int, default=None, metavar="N",
                   help="with --check: compare the first N records of each run (default: all)")


def check(args) -> int:
    """``crosscurv report --check [RUN_DIR ...] [--iters N] [--out ROOT]``: one line per run on
    stdout, progress on stderr; exit code 0 all agree, 1 the first disagreement (checking stops
    there)."""
    import sys

    from crosscurv.experiments.reports.check import check_runs

    if not args.check:
        raise InputError("RUN_DIR and --iters only apply with --check")
    if args.iters is not None and args.iters < 1:
        raise InputError(f"--iters must be >= 1, got {args.iters}")
    result = check_runs(args.run_dirs, args.iters, root=args.out,
                        log=lambda m: print(f"crosscurv: check {m}", file=sys.stderr, flush=True),
                        on_run=lambda rc: print("\n".join([rc.line()] + [f"  note: {n}"
                                                                         for n in rc.notes]),
                                                flush=True))
    if result.ok:
        print(f"all {len(result.runs)} runs agree with their committed records")
    else:
        rc = result.first_disagreement
        if rc.comparison is not None and rc.comparison.diagnoses:
            for d in rc.comparison.diagnoses:
                print(f"diagnosis: {d}")
        left = len(result.run_dirs) - len(result.runs)
        if left:
            print(f"stopped at the first disagreement; {left} run(s) not checked")
    return result.exit_code


def run(args) -> int:
    if args.check or args.run_dirs or args.iters is not None:
        return check(args)
    from crosscurv.experiments.cli import main
    from crosscurv.experiments.reports.build import STUDIES, build_report

    if args.preset not in ("smoke", "default", "paper"):
        raise InputError(f"unknown preset {args.preset!r} (choose smoke, default or paper)")
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    bad = [t for t in tasks if t not in STUDIES]
    if bad or not tasks:
        raise InputError(f"unknown study {', '.join(bad) or '(none)'} "
                         f"(choose from {', '.join(STUDIES)})")
    return build_report(
        args.out,
        args.preset,
        tasks,
        scaling=not args.skip_scaling,
        derive=not args.skip_derive,
        quick_scaling=args.quick_scaling,
        fresh=args.fresh,
        device=args.device,
        command=main,
    )
