"""Observed orders of the optimizer generalizations on two fixed small problems (the README's figures).

    python -m experiments.optimizer_orders [--quick]

Problems: the tanh MLP of the property tests (``tanh_mlp_problem(0, (3, 4, 4, 2), n_blocks=3)``,
pattern ``gs``, block factors ``1, 4, 0.5``) in float64.  For each optimizer:

* ``one_step``: ``(L_S - L_JC) - eta^2 g^T F J_phi M_S F phi`` from a warm common
  state (two JC steps), ``eta = eta0 2^-k``; expected order 3;
* ``recursion`` / ``cumulative`` / ``jc_only``: ``gap - estimate`` at ``k = K``
  with ``K = 4 2^k``, ``eta = eta0 2^-k`` (fixed horizon), expected 3 / 2 / 2;
* ``recursion_fixed_K``: ``gap - recursive`` at ``K = 8`` for every ``eta``, expected 3.

Plus Adam's first step from zero moments (``J_phi ~ eps / g^2``: ``C_S^Adam``
against the plain ``C_S``) and Adam's one step on the LoRA-like bilinear model
whose smallest gradient coordinate is 0.0066 of its largest.  Prints Markdown.
"""

from __future__ import annotations

import argparse
import math

import torch

from numeric.hvp import grad
from numeric.optimizer_estimates import optimizer_delay_curvature, run_optimizer_estimates
from numeric.optimizers import OptimizerState, optimizer_scheme_step, parse_optimizer
from numeric.orders import observe_order
from theory.patterns import jacobi, parse_pattern

from .problems import bilinear_problem, tanh_mlp_problem
from .scaling import loss_gap

#: (optimizer, K0 of the fixed-horizon grid)
OPTIMIZERS = (("sgd", 4), ("momentum:0.5", 4), ("momentum:0.5", 8), ("momentum:0.9", 4), ("momentum:0.9", 32), ("adam", 4))
FACTORS = [1.0, 4.0, 0.5]


def _orders(etas, errors, expected):
    s = observe_order(etas, errors, floor=1e-15, expected=expected)
    return s.slope, s.rates


def one_step_errors(task, pattern, spec, factors, etas):
    p, st = dict(task.params), OptimizerState()
    for _ in range(2):
        p, st, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), etas[0], spec, st, factors)
    c = optimizer_delay_curvature(task, p, pattern, spec, st, factors)
    out = []
    for eta in etas:
        s, _, _ = optimizer_scheme_step(task, p, pattern, eta, spec, st, factors)
        j, _, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), eta, spec, st, factors)
        out.append(loss_gap(task, s, j) - eta * eta * c)
    return out


def trajectory_errors(task, pattern, spec, factors, etas, k0=4, fixed_K=None):
    errs = {"recursive": [], "cumulative": [], "jc_only": []}
    for j, eta in enumerate(etas):
        K = fixed_K or k0 * 2**j
        run = run_optimizer_estimates(task, pattern, eta, K, spec, factors, method="reverse")
        gap = loss_gap(task, run.theta_s, run.theta_jc)
        for key in errs:
            errs[key].append(gap - run[-1][key])
    return errs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 grid points instead of 6")
    ap.add_argument("--only", default=None, help="comma-separated optimizer rows to run (default all)")
    args = ap.parse_args(argv)
    n = 4 if args.quick else 6
    problem = tanh_mlp_problem(0, (3, 4, 4, 2), n_blocks=3)
    task = problem.task
    pattern = parse_pattern("gs", task.n_blocks)
    print("| optimizer | eta0 | K0 | one_step (3) | recursion, T fixed (3) | recursion, K = 8 (3) | cumulative (2) | jc_only (2) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [r for r in OPTIMIZERS if args.only is None or r[0] in args.only.split(",")]
    for text, k0 in rows:
        spec = parse_optimizer(text)
        eta0 = problem.eta0(1.0 / 32) / max(FACTORS)
        etas = [eta0 * 2.0**-k for k in range(n)]
        o1, _ = _orders(etas, one_step_errors(task, pattern, spec, FACTORS, etas), 3)
        tr = trajectory_errors(task, pattern, spec, FACTORS, etas, k0=k0)
        fk = trajectory_errors(task, pattern, spec, FACTORS, etas, fixed_K=8)
        cells = [f"{_orders(etas, tr['recursive'], 3)[0]:.2f}", f"{_orders(etas, fk['recursive'], 3)[0]:.2f}",
                 f"{_orders(etas, tr['cumulative'], 2)[0]:.2f}", f"{_orders(etas, tr['jc_only'], 2)[0]:.2f}"]
        print(f"| `{text}` | {eta0:.3g} | {k0} | {o1:.2f} | " + " | ".join(cells) + " |")
    print()
    # Adam's first step from zero moments
    spec = parse_optimizer("adam")
    c_adam = optimizer_delay_curvature(task, task.params, pattern, spec, OptimizerState(), FACTORS)
    c_sgd = optimizer_delay_curvature(task, task.params, pattern, "sgd", OptimizerState(), FACTORS)
    print(f"Adam's first step from zero moments: C_S^Adam = {c_adam:.3g} against C_S^F = {c_sgd:.3g} for per-block SGD "
          "(J_phi = eps/(|g| + eps)^2 there: phi = sign(g) to first order)")
    # a problem whose smallest gradient coordinate is small against the largest
    bil = bilinear_problem(0, 3, 3, 1)
    _, g = grad(bil.task.loss, bil.task.params)
    a = torch.cat([v.reshape(-1).abs() for v in g.values()])
    etas = [bil.eta0(1.0 / 32) * 2.0**-k for k in range(n)]
    pat2 = parse_pattern("2<-1", 2)
    errs = one_step_errors(bil.task, pat2, spec, [1.0, 1.0], etas)
    slope, rates = _orders(etas, errs, 3)
    print(f"Adam one step on bilinear(0, 3, 3, 1) (min |g_a| / max |g_a| = {float(a.min() / a.max()):.2g}): "
          f"observed order {slope:.2f}, pairwise rates {', '.join(f'{r:.2f}' for r in rates)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
