"""Observed orders of the optimizer generalizations on two fixed small problems
(docs/optimizers.md).

    python -m crosscurv.experiments.studies.optimizers.orders [--quick] [--only SPEC,...]

The studies of :mod:`crosscurv.experiments.scaling.optimizers` for more rows (per-block SGD, heavy
ball 0.5 and 0.9 at short and long horizons, Adam) on ``tanh_mlp_problem(0, (3, 4, 4, 2),
n_blocks=3)``, plus Adam's first step from zero moments and on the bilinear model. Prints Markdown.
"""

from __future__ import annotations

from typing import Sequence

import torch

from crosscurv.numeric.hvp import grad
from crosscurv.numeric.optimizer_estimates import optimizer_delay_curvature
from crosscurv.numeric.optimizers import OptimizerState, parse_optimizer
from crosscurv.theory.patterns import parse_pattern

from crosscurv.experiments.problems import bilinear_problem
from crosscurv.experiments.scaling.optimizers import (FACTORS, FIXED_K, one_step_errors,
                                                      optimizer_problem, optimizer_studies)
from crosscurv.experiments.scaling.study import eta_grid, make_study

#: (optimizer, K0 of the fixed-horizon grid)
OPTIMIZERS = (("sgd", 4), ("momentum:0.5", 4), ("momentum:0.5", 8), ("momentum:0.9", 4), (
    "momentum:0.9", 32),
              ("adam", 4))


def _p(study) -> str:
    return f"{study.fitted:.2f}"


def print_orders(n: int = 6, only: Sequence[str] | None = None) -> None:
    """Print the observed orders of every optimizer row of :data:`OPTIMIZERS` (``only``: those rows)
    on ``n`` grid points, then Adam's first step from zero moments and Adam's one step on a bilinear
    problem."""
    print(f"| optimizer | eta0 | K0 | one_step (3) | recursion, T fixed (3) | recursion, K = "
          f"{FIXED_K} (3) | cumulative (2) | jc_only (2) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [r for r in OPTIMIZERS if only is None or r[0] in only]
    for text, k0 in rows:
        r = optimizer_studies(text, k0, n=n)
        s = r.studies
        print(f"| `{text}` | {r.eta0:.3g} | {k0} | {_p(s['one_step'])} | {_p(s['recursion'])} | "
              f"{_p(s['recursion_fixed_K'])} | {_p(s['cumulative'])} | {_p(s['jc_only'])} |")
    print()
    problem, pattern = optimizer_problem()
    task = problem.task
    # Adam's first step from zero moments
    spec = parse_optimizer("adam")
    c_adam = optimizer_delay_curvature(task, task.params, pattern, spec, OptimizerState(), list(
        FACTORS))
    c_sgd = optimizer_delay_curvature(task, task.params, pattern, "sgd", OptimizerState(), list(
        FACTORS))
    print(f"Adam's first step from zero moments: C_S^Adam = {c_adam:.3g} against C_S^F = "
          f"{c_sgd:.3g} for per-block SGD "
          "(J_phi = eps/(|g| + eps)^2 there: phi = sign(g) to first order)")
    print()
    # a problem whose smallest gradient coordinate is small against the largest
    bil = bilinear_problem(0, 3, 3, 1)
    _, g = grad(bil.task.loss, bil.task.params)
    a = torch.cat([v.reshape(-1).abs() for v in g.values()])
    etas = eta_grid(bil.eta0(1.0 / 32), n)
    errs, _ = one_step_errors(bil.task, parse_pattern("2<-1", 2), spec, [1.0, 1.0], etas)
    st = make_study("bilinear", "one_step", etas, [e for e, _ in errs], [f for _, f in errs])
    print(f"Adam one step on bilinear(0, 3, 3, 1) (min |g_a| / max |g_a| = "
          f"{float(a.min() / a.max()):.2g}): observed order {st.fitted:.2f}, pairwise rates "
          f"{', '.join(f'{x:.2f}' for x in st.order.rates)}")


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import optimizer_orders

    raise SystemExit(optimizer_orders())
