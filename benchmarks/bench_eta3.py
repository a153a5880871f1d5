"""Time to derive the eta^3 coefficient of L_S - L_JC for N = 4 scalar blocks (budget: 10 s).

Measures, from a cold start of each computation (fresh block model every
repeat, so no cached symbols):

1. ``eta3 (gs)``: build the cubic block model, run the exact GS step and the JC
   step as series in ``eta`` to ``eta^3``, take ``[eta^3](L_S - L_JC)`` and
   turn it into a SymPy expression;
2. ``eta3 (all 24 GS orders)``: the same for every block order;
3. ``derive (full)``: :func:`crosscurv.theory.derive` with every check of the paper.

Run: ``.venv/bin/python benchmarks/bench_eta3.py [--repeats R] [--blocks N]``.
Prints one line per measurement (median and min over the repeats) and exits
1 if the ``eta3 (gs)`` median or first (cold) run exceeds the 10 s budget.  Not a test.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crosscurv.theory.block_model import BlockModel  # noqa: E402
from crosscurv.theory.derivation import derive  # noqa: E402
from crosscurv.theory.one_step import loss_series  # noqa: E402
from crosscurv.theory.patterns import gauss_seidel, jacobi  # noqa: E402

BUDGET_S = 10.0


def eta3_coefficient(n: int, orders=None):
    m = BlockModel(n, 1, taylor_order=3)
    L_jc = loss_series(m, jacobi(n))
    out = []
    for o in orders or [None]:
        gap = loss_series(m, gauss_seidel(n, o)) - L_jc
        out.append(m.to_expr(gap.coeff(3)))
    return out


def _time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), result, ts[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=4)
    a = ap.parse_args(argv)
    n = a.blocks
    print(f"bench_eta3: N={n} scalar blocks, {a.repeats} repeats, Python {platform.python_version()}, "
          f"{platform.machine()}")
    med, best, res, first = _time(lambda: eta3_coefficient(n), a.repeats)
    print(f"eta3 (gs)                 median {med:8.4f} s  min {best:8.4f} s  first (cold) {first:8.4f} s  "
          f"({len(res[0].as_ordered_terms())} terms)  budget {BUDGET_S:.0f} s")
    orders = list(itertools.permutations(range(n)))
    med_all, best_all, _, _ = _time(lambda: eta3_coefficient(n, orders), max(1, a.repeats // 2))
    print(f"eta3 (all {len(orders)} GS orders)  median {med_all:8.4f} s  min {best_all:8.4f} s")
    med_d, best_d, r, _ = _time(lambda: derive(n, 1, "gs"), max(1, a.repeats // 2))
    print(f"derive (full)             median {med_d:8.4f} s  min {best_d:8.4f} s  all identities hold: {r.ok}")
    return 0 if max(med, first) <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
