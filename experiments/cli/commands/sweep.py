"""``crosscurv sweep``: a grid of ``crosscurv run`` runs on Ray, aggregated.

Exit codes: 0 every run complete; 3 at least one run diverged or failed (the others finished; see
``sweep.csv``); 2 bad grid or options (one line, nothing run); 70 internal error; 130 interrupted
(rerun with ``--resume``).
"""

from __future__ import annotations


HELP = (
    "Run every combination of tasks x presets x learning rates x seeds x patterns as one "
    "`crosscurv run` each, as Ray tasks (a local Ray instance started on demand, or --address to "
    "join a cluster; one GPU per run where the workers have GPUs), into OUT/runs/<name>/, and "
    "aggregate them into OUT/sweep.csv, OUT/sweep.md and OUT/sweep_agreement.png. Axes come from "
    "the flags or a TOML file (--grid); flags replace the file's axes. Rerun with --resume to "
    "reuse complete runs and resume interrupted ones."
)


def add_arguments(p) -> None:
    p.add_argument("--grid", metavar="FILE.toml", default=None,
                   help="TOML file with keys task, preset, lr, seed, pattern (a value or a "
                        "list), iters, dtype")
    p.add_argument("--task", nargs="+", metavar="TASK", default=None,
                   help="built-in task names (mlp, fl, lora), module:factory or "
                        "path/to/file.py:factory")
    p.add_argument("--preset", nargs="+", metavar="PRESET", default=None,
                   help="smoke, default, edge, paper (default: each run's default)")
    p.add_argument("--lr", nargs="+", metavar="ETA", default=None,
                   help="learning rates (default: each preset's)")
    p.add_argument("--seed", nargs="+", metavar="SEED", default=None,
                   help="seeds: integers or inclusive ranges A-B (default 0)")
    p.add_argument("--pattern", nargs="+", metavar="PATTERN", default=None,
                   help="delay patterns in `crosscurv run --pattern` syntax (default: each task's)")
    p.add_argument("--iters", type=int, default=None,
                   help="iterations K of every run (default: each preset's)")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="dtype of every run")
    p.add_argument("--out", default="sweep", help="sweep folder (default: sweep)")
    p.add_argument("--workers", type=int, default=None,
                   help="runs at a time (default: the number of CPUs, or of the cluster's CPUs "
                        "with --address)")
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads per run (default 1: two were measured slower than one "
                        "on a shared 2-core machine)")
    p.add_argument("--address", default=None,
                   help="join a running Ray cluster (e.g. auto or HOST:6379) instead of starting "
                        "a local one")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out: reuse complete runs, resume interrupted ones")
    p.add_argument("--quiet", action="store_true", help="no line per finished run")


def build_spec(args):
    """The :class:`SweepSpec` of the flags (and ``--grid`` file)."""
    from crosscurv.experiments.sweep.spec import (AXES, SweepError, axis_values, read_toml,
                                                  spec_from_mapping)

    data = read_toml(args.grid) if args.grid else {}
    for axis in AXES:
        vals = axis_values(axis, getattr(args, axis))
        if vals is not None:
            data[axis] = list(vals)
    if args.iters is not None:
        data["iters"] = args.iters
    if args.dtype is not None:
        data["dtype"] = args.dtype
    if "task" not in data:
        raise SweepError("the grid needs at least one task (--task or task = [...] in --grid)")
    return spec_from_mapping(data, where=args.grid or "grid")


def run(args) -> int:
    from crosscurv.experiments.sweep import run_sweep

    spec = build_spec(args)
    result = run_sweep(spec, args.out, workers=args.workers, threads=args.threads,
                       address=args.address, resume=args.resume, progress=not args.quiet)
    n_ok = len(result.rows) - len(result.incomplete)
    t = result.timing
    print(f"{n_ok}/{len(result.rows)} runs complete ({t['executed']} run now, "
          f"{len(result.rows) - t['executed']} reused); {t['total_s']:.1f} s"
          + (f" (Ray start-up {t['ray_start_s']:.1f} s)" if t["ray_start_s"] else ""))
    for r in result.incomplete:
        print(f"  {r['name']}: {r['status']}: {r['error']}")
    print(f"results: {result.csv}, {result.markdown}" + (f", {result.figure}" if result.figure
                                                         else ""))
    return result.exit_code
