"""``crosscurv scaling``: observed orders of the paper's remainders, written to ``scaling.md`` with
figures."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from crosscurv.theory.errors import InputError

HELP = (
    "Error-scaling study: the one-step remainder (Theorem 1), the recursion remainder (Theorem 2), "
    "the cumulative error at fixed T = eta K (Theorem 3) and the GS order difference, on a random "
    "quartic polynomial, the 8-layer MLP on MNIST (float64), its smooth piece at theta0 and a "
    "LoRA-like bilinear model. Writes DIR/scaling.md and DIR/figures/scaling_*.png, prints the "
    "fitted orders. Exit 0: every order within its tolerance (|p-3| <= 0.15; |p-2| <= 0.15 for "
    "cumulative); 1: one is outside; 3: none outside, but one has no point in the asymptotic "
    "window (no order can be fitted: a finding). Also the observed orders of the optimizer "
    "generalizations (per-block step sizes, heavy ball, Adam; reported, not judged)."
)


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="fewer MNIST examples and shorter horizons (under 2 minutes)")
    parser.add_argument("--json", action="store_true",
                        help='print {problem: {"one_step": p, "recursion": p, "cumulative": p, '
                             '"order_invariance": p}} instead of the text summary')
    parser.add_argument("--out", default="reports", metavar="DIR",
                        help="output folder for scaling.md and figures/ (default: reports)")
    parser.add_argument("--problems", default=None, metavar="LIST",
                        help="comma-separated subset of "
                             "quartic,mnist_mlp,mnist_mlp_piece,bilinear (default: all)")
    parser.add_argument("--optimizers", default=None, metavar="LIST",
                        help="optimizer studies (beyond the paper): none, or SPEC[@K0];... e.g. "
                             "'sgd;momentum:0.9@32;adam' (block factors 1, 4, 0.5 on a tanh MLP; "
                             "default: sgd, momentum:0.5@8 and adam with the full suite, none with "
                             "--problems)")


def _say(msg: str) -> None:
    print(f"[scaling] {msg}", file=sys.stderr, flush=True)


def _problems(spec):
    from crosscurv.experiments.scaling import PROBLEMS

    if spec is None:
        return None
    names = [p.strip() for p in spec.split(",") if p.strip()]
    unknown = [p for p in names if p not in PROBLEMS]
    if unknown or not names:
        raise InputError(f"unknown problem(s) {', '.join(unknown) or repr(spec)} (choose from "
                         f"{', '.join(PROBLEMS)})")
    return names


def run(args) -> int:
    problems = _problems(args.problems)
    from crosscurv.experiments.scaling.optimizers import parse_rows

    rows = parse_rows(args.optimizers) if args.optimizers is not None or problems is None else ()
    out = Path(args.out)
    try:
        (out / "figures").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output folder {out}: {exc.strerror}") from None

    from crosscurv.experiments.scaling import (NO_WINDOW, OFFICIAL, TOLERANCE, render_markdown,
                                               scaling_suite)
    from crosscurv.experiments.scaling.figures import write_figures

    t0 = time.perf_counter()
    results = scaling_suite(quick=args.quick, progress=_say, problems=problems)
    opt_results = []
    if rows:
        from crosscurv.experiments.scaling.optimizers import optimizer_suite

        opt_results = optimizer_suite(rows, quick=args.quick, progress=_say)
    seconds = time.perf_counter() - t0
    _say("writing figures")
    studies = {r.key: r.studies for r in results}
    figs = write_figures(studies, out / "figures")
    rel = [f"figures/{f.name}" for f in figs]
    text = render_markdown(results, quick=args.quick, seconds=seconds, figures=rel,
                           tolerance=TOLERANCE, optimizers=opt_results)
    try:
        (out / "scaling.md").write_text(text)
    except OSError as exc:
        raise InputError(f"cannot write {out / 'scaling.md'}: {exc.strerror}") from None
    _say(f"wrote {out / 'scaling.md'} and {len(figs)} figures in {out / 'figures'} "
         f"({seconds:.0f} s)")

    bad = [(r.key, q, r.studies[q].fitted) for r in results for q in r.failures(TOLERANCE)]
    if args.json:
        obj = {r.key: r.orders() for r in results}
        if opt_results:
            obj["optimizers"] = {f"{r.spec}@{r.k0}": r.orders() for r in opt_results}
        print(json.dumps(obj, indent=2))
    else:
        for r in results:
            parts = []
            for q in OFFICIAL:
                st = r.studies[q]
                p = st.fitted
                ok = "ok" if st.within(TOLERANCE) else "OUTSIDE"
                parts.append(f"{q} {p:.3f} (expect {st.expected:g}, {ok})" if math.isfinite(p)
                             else f"{q} n/a ({NO_WINDOW})")
            print(f"{r.key:10s} " + "; ".join(parts))
        for r in opt_results:
            print(f"optimizer {r.spec}@{r.k0}: " + "; ".join(
                f"{q} {p:.3f}" if p is not None else f"{q} n/a" for q, p in r.orders().items()))
    none = [(r.key, q) for r in results for q in r.undetermined()]
    if none:
        _say(f"{NO_WINDOW}: " + ", ".join(f"{k} {q}" for k, q in none))
    if bad:
        _say("outside tolerance: " + ", ".join(f"{k} {q} ({p:.3f})" for k, q, p in bad))
        return 1
    return 3 if none else 0
