"""The study commands of the make targets: one ``main``-like function per ``python -m`` module.

Each function parses its command line with :mod:`argparse` and calls the library function of its
module, which takes plain typed parameters::

    python -m crosscurv.experiments.studies.contest SWEEP... --out FILE       contest()
    python -m crosscurv.experiments.studies.trust --out DIR                  trust()
    python -m crosscurv.experiments.studies.certificates                     certificates()
    python -m crosscurv.experiments.studies.pattern_search                   pattern_search()
    python -m crosscurv.experiments.studies.optimizers.runner run|report     optimizer_runner()
    python -m crosscurv.experiments.studies.optimizers.orders                optimizer_orders()
    python -m crosscurv.experiments.reports.one_step_along_jc PATH...        one_step_along_jc()
    python -m crosscurv.experiments.reports.site_check                       site_check()
    python -m crosscurv.experiments.conformance.portability                  portability()
    python -m crosscurv.experiments.conformance.rounding                     rounding()
    python -m crosscurv.experiments.sweep.rerender FOLDER...                 sweep_rerender()
    python -m crosscurv.experiments.studies.contest_seeds SWEEP... --out FILE contest_seeds()
    python -m crosscurv.experiments.studies.contest_lora SWEEP... --out FILE  contest_lora()
    python -m crosscurv.experiments.motivation.rate_scan --out D --report F  rate_scan()

Each module's ``if __name__ == "__main__":`` block calls its function here. ``argv`` ``None`` reads
``sys.argv[1:]``; the return value is the exit status (bad input: one line on standard error and 2
where the study says so; argparse's own errors exit 2 with its usage).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from crosscurv.theory.errors import InputError

__all__ = ["contest", "trust", "certificates", "pattern_search", "optimizer_runner",
           "optimizer_orders", "one_step_along_jc", "site_check", "portability", "rounding",
           "sweep_rerender", "contest_seeds", "contest_lora", "rate_scan"]


def _argv(argv) -> list[str]:
    return list(sys.argv[1:] if argv is None else argv)


def _summary(module) -> str:
    """The first paragraph of a module's docstring, on one line (its parser's description)."""
    return " ".join(module.__doc__.split("\n\n")[0].split())


def _one_line(name: str, exc: Exception) -> int:
    print(f"{name}: {exc}", file=sys.stderr)
    return 2


def _sweeps_report(name: str, mod, write, argv) -> int:
    """``python -m MODULE SWEEP... --out FILE``: ``write(sweeps, out)``, one line on bad input."""
    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("sweeps", nargs="+", help="sweep folders (crosscurv sweep --out)")
    ap.add_argument("--out", required=True, help="the markdown file to write")
    args = ap.parse_args(argv)
    try:
        out = write(args.sweeps, args.out)
    except InputError as exc:
        return _one_line(name, exc)
    print(f"wrote {out}")
    return 0


def contest(argv=None) -> int:
    from crosscurv.experiments.studies import contest as mod

    return _sweeps_report("contest", mod, mod.write_contest, argv)


def _lrs(text: str | None) -> dict:
    """``--lrs "fl=0.05,0.01;mlp=0.01"`` as ``{task: [lr, ...]}``."""
    out: dict = {}
    for part in (text or "").split(";"):
        if part.strip():
            name, vals = part.split("=", 1)
            out[name.strip()] = [float(v) for v in vals.split(",")]
    return out


def trust(argv=None) -> int:
    from crosscurv.experiments.studies import trust as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--lrs", default=None,
                    help='per task learning rates, "fl=0.05,0.01;mlp=0.01" (default: preset)')
    args = ap.parse_args(argv)
    print(mod.trust_study(args.out, args.tasks.split(","), args.preset, args.iters, _lrs(args.lrs)))
    return 0


def certificates(argv=None) -> int:
    from crosscurv.experiments.studies import certificates as mod

    ap = argparse.ArgumentParser(prog="python -m crosscurv.experiments.studies.certificates",
                                 description=_summary(mod))
    ap.add_argument("--out", default="runs/certificates", help="folder of the cached runs")
    ap.add_argument("--report", default="reports/certificates.md", help="the report written")
    ap.add_argument("--collect-only", action="store_true",
                    help="run (or read back) the runs, write nothing else")
    args = ap.parse_args(argv)
    rows = mod.collect(args.out)
    if args.collect_only:
        return 0
    from crosscurv.experiments.studies.certificates_findings import write_report

    write_report(rows, args.report, "make certificates-study")
    return 0


def pattern_search(argv=None) -> int:
    from crosscurv.experiments.studies import pattern_search as mod

    ap = argparse.ArgumentParser(prog="python -m crosscurv.experiments.studies.pattern_search")
    ap.add_argument("--out", default="reports/advise")
    ap.add_argument("--sample", type=int, default=40, help="random patterns trained per mlp space")
    ap.add_argument("--no-zoo", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="write OUT/search.md again from OUT/search.json (its runs and command), "
                         "running nothing")
    a = ap.parse_args(argv)
    if a.report_only:
        mod.rewrite_report(a.out)
        return 0
    command = ("python -m crosscurv.experiments.studies.pattern_search "
               + " ".join(shlex.quote(x) for x in _argv(argv)))
    print(mod.search_study(a.out, a.sample, not a.no_zoo, command))
    return 0


def optimizer_runner(argv=None) -> int:
    from crosscurv.experiments.studies.optimizers import runner as mod
    from crosscurv.experiments.studies.optimizers.plan import ITERS, SEEDS

    ap = argparse.ArgumentParser(description=_summary(mod))
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="perform the runs that are not complete")
    r.add_argument("--out", default="runs/optimizer-studies",
                   help="run folders (default runs/optimizer-studies)")
    r.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    r.add_argument("--iters", type=int, default=ITERS)
    r.add_argument("--only", default=None, help="comma-separated study names (default all)")
    p = sub.add_parser("report", help="copy records and summaries, write OUT/optimizers.md")
    p.add_argument("--runs", default="runs/optimizer-studies", help="the run folders of `run`")
    p.add_argument("--out", default="reports", help="report folder (default reports)")
    p.add_argument("--iters", type=int, default=ITERS)
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.cmd == "run":
        only = set(args.only.split(",")) if args.only else None
        return 1 if mod.run_all(args.out, seeds, args.iters, only) else 0
    from crosscurv.experiments.studies.optimizers.report import write_report

    print(f"wrote {write_report(args.runs, args.out, seeds, args.iters)}")
    return 0


def optimizer_orders(argv=None) -> int:
    from crosscurv.experiments.studies.optimizers import orders as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--quick", action="store_true", help="4 grid points instead of 6")
    ap.add_argument("--only", default=None,
                    help="comma-separated optimizer rows to run (default all)")
    args = ap.parse_args(argv)
    mod.print_orders(4 if args.quick else 6, None if args.only is None else args.only.split(","))
    return 0


def one_step_along_jc(argv=None) -> int:
    from crosscurv.experiments.reports import one_step_along_jc as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("paths", nargs="+", help="run folders, or sweep folders (their runs/*)")
    ap.add_argument("--fresh", action="store_true",
                    help="recompute files that are already complete")
    args = ap.parse_args(argv)
    try:
        mod.replay_runs(args.paths, args.fresh)
    except InputError as exc:
        return _one_line("one_step_along_jc", exc)
    return 0


def site_check(argv=None) -> int:
    from crosscurv.experiments.reports import site_check as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--site", default="site", help="the built site (make docs)")
    ap.add_argument("--page", default="results/", help="the page to check, relative to the site")
    ap.add_argument("--out", default="build/docs-check",
                    help="folder for the screenshot and the DOM record")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds each Chromium call may take")
    args = ap.parse_args(argv)
    try:
        fails, summary = mod.check_site(args.site, args.page, args.out, args.timeout)
    except InputError as exc:
        return _one_line("site_check", exc)
    for f in fails:
        print(f"site_check: FAILED: {f}")
    if not fails:
        print(f"site_check: {summary}")
    return 1 if fails else 0


def portability(argv=None) -> int:
    from crosscurv.experiments.conformance import portability as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--iters", type=int, default=30, help="records compared per run (default 30)")
    ap.add_argument("--runs", nargs="+", default=mod.RUNS,
                    help="run folders (default the committed studies)")
    ap.add_argument("--emulations", default=None,
                    help="comma-separated subset of the emulation names (default all)")
    ap.add_argument("--out", default=os.path.join("reports", "portability.md"))
    ap.add_argument("--cache", default=mod.CACHE,
                    help=f"where each subprocess result is kept (default {mod.CACHE})")
    ap.add_argument("--fresh", action="store_true", help="ignore the cache")
    ap.add_argument("--cached-only", action="store_true",
                    help="measure nothing: the report of the results already in the cache "
                         "(the rest listed as not measured)")
    ap.add_argument("--tables", action="store_true",
                    help="also the table-level comparison (module docstring)")
    ap.add_argument("--sweeps", default=os.path.join("reports", "sweeps"),
                    help="the seed sweeps (default reports/sweeps)")
    ap.add_argument("--one", default=None, metavar="RUN_DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        return mod.check_one(args.one, args.iters)
    emulations = (None if args.emulations is None
                  else tuple(n.strip() for n in args.emulations.split(",")))
    options = mod.PortabilityOptions(
        iters=args.iters, runs=tuple(args.runs), emulations=emulations, out=args.out,
        cache=args.cache,
        fresh=args.fresh, cached_only=args.cached_only, tables=args.tables, sweeps=args.sweeps,
        argv=tuple(_argv(argv)))
    try:
        return mod.write_portability(options)
    except InputError as exc:
        return _one_line("portability", exc)


def rounding(argv=None) -> int:
    from crosscurv.experiments.conformance import rounding as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--tasks", default="mlp,fl,lora",
                    help="built-in tasks (comma-separated; empty for none)")
    ap.add_argument("--presets", default="smoke:10,default:3",
                    help="PRESET:K,... runs of each task (default smoke:10,default:3; K omitted: "
                         "the preset's)")
    ap.add_argument("--no-golden", action="store_true", help="leave out the golden cases")
    ap.add_argument("--json", action="store_true",
                    help="print every comparison as JSON (input of --load)")
    ap.add_argument("--load", nargs="+", metavar="FILE", default=None,
                    help="print the table of saved --json outputs (merged) instead of measuring")
    ap.add_argument("--dtypes", default="float32,float64",
                    help="dtypes measured (default float32,float64)")
    ap.add_argument("--emulate", action="store_true",
                    help="measure under each emulated instruction set "
                         "(crosscurv.experiments.conformance.emulation), each in its own "
                         "subprocess")
    ap.add_argument("--cache", default=os.path.join("build", "rounding"),
                    help="with --emulate: where each emulation's measurement is kept (default "
                         "build/rounding)")
    ap.add_argument("--out", default=None, metavar="FILE", help="write the Markdown report to FILE")
    ap.add_argument("--cached-only", action="store_true",
                    help="with --emulate: measure nothing, report the emulations already in "
                         "--cache")
    a = ap.parse_args(argv)
    options = mod.RoundingOptions(
        tasks=a.tasks, presets=a.presets, no_golden=a.no_golden, json=a.json,
        load=None if a.load is None else tuple(a.load),
        dtypes=tuple(d.strip() for d in a.dtypes.split(",") if d.strip()), emulate=a.emulate,
        cache=a.cache, out=a.out, cached_only=a.cached_only, argv=tuple(_argv(argv)))
    try:
        return mod.write_rounding(options)
    except InputError as exc:
        return _one_line("rounding", exc)


def sweep_rerender(argv=None) -> int:
    from crosscurv.experiments.sweep import rerender as mod

    ap = argparse.ArgumentParser(prog="python -m crosscurv.experiments.sweep.rerender",
                                 description="Write each sweep folder's sweep.md again from its "
                                             "sweep.csv.")
    ap.add_argument("folders", nargs="+", metavar="FOLDER")
    args = ap.parse_args(argv)
    for folder in args.folders:
        if not os.path.isfile(os.path.join(folder, "sweep.csv")):
            print(f"error: {folder}: no sweep.csv (not a sweep folder)", file=sys.stderr)
            return 2
        print(mod.rerender(folder))
    return 0


def contest_seeds(argv=None) -> int:
    from crosscurv.experiments.studies import contest_seeds as mod

    return _sweeps_report("contest_seeds", mod, mod.write_contest_seeds, argv)


def contest_lora(argv=None) -> int:
    from crosscurv.experiments.studies import contest_lora as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("sweeps", nargs="+", help="sweep folders (crosscurv sweep --out)")
    ap.add_argument("--out", required=True, help="the markdown file to write")
    ap.add_argument("--motivation", help="the --report folder of the lora Figure 1 panel on the "
                                         "pretrained T5 (quoted)")
    ap.add_argument("--scan", action="append", default=[], help="the report of a "
                    "crosscurv.experiments.motivation.rate_scan (quoted; repeatable)")
    args = ap.parse_args(argv)
    try:
        out = mod.write_contest_lora(args.sweeps, args.out, args.motivation, args.scan)
    except InputError as exc:
        return _one_line("contest_lora", exc)
    print(f"wrote {out}")
    return 0


def rate_scan(argv=None) -> int:
    from crosscurv.experiments.motivation import rate_scan as mod

    ap = argparse.ArgumentParser(description=_summary(mod))
    ap.add_argument("--rates", help="comma-separated learning rates (default: the panel's "
                    "DEFAULT_RATES, for mlp " + ",".join(f"{x:g}" for x in mod.RATES) + ")")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    ap.add_argument("--panel", choices=tuple(mod.IMPLEMENTATIONS), default="mlp")
    ap.add_argument("--model", metavar="DIR", help="local T5 weights (lora panel)")
    ap.add_argument("--preset", choices=("smoke", "default"), default="default")
    ap.add_argument("--out", required=True, help="the run folder")
    ap.add_argument("--report", required=True, help="the markdown file to write")
    args = ap.parse_args(argv)
    if args.rates is None:
        args.rates = ",".join(f"{x:g}" for x in mod.DEFAULT_RATES[args.panel])
    try:
        try:
            rates = [float(x) for x in args.rates.split(",") if x.strip()]
            seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        except ValueError:
            raise InputError(f"--rates and --seeds take comma-separated numbers, got "
                             f"{args.rates!r}, {args.seeds!r}") from None
        panel = "" if args.panel == "mlp" else f"--panel {args.panel} "
        command = (f"python -m crosscurv.experiments.motivation.rate_scan {panel}--rates "
                   f"{args.rates} --seeds {args.seeds} --preset {args.preset} --out {args.out} "
                   f"--report {args.report}")
        if args.model is not None:
            command += f" --model {args.model}"
        mod.run_scan(rates, seeds, args.out, args.report, args.preset, command, args.panel,
                     args.model)
    except InputError as exc:
        return _one_line("rate_scan", exc)
    print(f"wrote {args.report}")
    return 0
