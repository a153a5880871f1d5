"""Properties: the optimizer generalizations' remainders (one step O(eta^3), recursion O(eta^3),
cumulative O(K eta^3)).

For each optimizer (per-block step sizes with ``sgd``, heavy ball, Adam) on the random problems of
:mod:`tests.properties.strategies`, with random block step-size factors ``f_i`` and a random acyclic
pattern:

* one step from a common point and a common *warm* state (two JC steps from the start, so momentum
  buffers and Adam moments are non-zero): ``r(eta) = (L_S - L_JC) - eta^2 g^T F J_phi M_S F phi``
  has least-squares order ``>= 2.8`` and every pairwise rate ``>= 2.6`` on ``eta0 2^-k``, ``k =
  0..5`` (points at or below the round-off floor dropped);
* along trajectories from the same start and zero state, ``K = K0 * 2^k``, ``eta = eta0 2^-k``
  (fixed horizon; :func:`crosscurv.numeric.optimizer_estimates.run_optimizer_estimates`): ``gap -
  recursive`` (generalized Theorem 2) has least-squares order ``>= 2.8``, ``gap - cumulative`` and
  ``gap - jc_only`` (generalized Theorem 3, ``O(K eta^3) = O(T eta^2)``) ``>= 1.8``.  ``K0 = 4`` for
  per-block SGD and ``K0 = 16 >= 8 / (1 - beta)`` for heavy ball (``beta`` drawn from ``{0.25,
  0.5}``), so that every run is long against the buffer's memory (at ``K0 = 8`` Hypothesis found
  ``jc_only`` still pre-asymptotic, fitted order 1.51 with pairwise rates climbing 0.61, 1.55, 1.80,
  1.91: README "Optimizers"); with ``K0 = 4`` the fitted cumulative order is still climbing (1.79
  for ``beta = 0.5``), at ``beta = 0.9`` the orders appear only at much smaller steps (README
  "Optimizers", ``python -m crosscurv.experiments.studies.optimizers.orders``). For Adam only the
  recursion is checked, at a fixed ``K = 8``: its bias corrections and moment averages are set in
  *steps*, not in ``eta k``, and at a fixed horizon the recursion's observed order creeps up to 3
  only slowly, while the cumulative error changes sign and shows no clean order on the studied grids
  -- the generalized Theorem 3 is *not* confirmed for Adam (a finding, README "Optimizers").

``eta0`` is the instance's ``eta0(1/32)`` (``eta0(1/64)`` for trajectories) divided by the largest
factor ``f_i``, by ``1/(1 - beta)`` for heavy ball (the buffer's gain), and for Adam by the largest
diagonal entry of ``J_phi`` after one JC step (at least 1): Adam's step map is ``eta F J_phi H``
with ``J_phi ~ 1/sqrt(v)``, so its curvature scale is ``lam max J_phi``, not ``lam``.

A remainder that lies under the float64 round-off floor at (nearly) every grid point has nothing to
show; such instances are skipped (``assume``), not passed.

Least-squares orders instead of the plain tests' minimum pairwise rate: the leading coefficients
here carry no cubic guard (:func:`crosscurv.experiments.problems.guard_cubic` knows only the plain
steps), so a single pair straddling a near-cancellation is tolerated while the fitted order over the
grid still has to be there.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from crosscurv.experiments.scaling import loss_gap, roundoff_floor, rounding_scale
from crosscurv.numeric.hvp import grad
from crosscurv.numeric.optimizer_estimates import optimizer_delay_curvature, run_optimizer_estimates
from crosscurv.numeric.optimizers import (OptimizerState, direction_jacobian_apply,
                                          optimizer_scheme_step, parse_optimizer)
from crosscurv.numeric.orders import observe_order
from tests.properties.strategies import GRID_POINTS, acyclic_patterns, examples, problem_specs
from crosscurv.theory.patterns import jacobi

FACTOR = 1.0 / 32
#: ``eta0 * lam`` of the trajectory grids: one halving deeper than the plain tests' 1/32, which
#: tilt their instances with a cubic guard that knows only plain steps (module docstring).
TRAJECTORY_FACTOR = 1.0 / 64
K0 = 4
FACTOR_CHOICES = (0.25, 0.5, 1.0, 2.0, 4.0)
#: K0 for heavy ball (module docstring).
K0_MOMENTUM = 16
#: Adam's recursion is checked at this fixed K (module docstring).
ADAM_RECURSION_K = 8


def _spec(kind: str, data) -> str:
    if kind == "momentum":
        return f"momentum:{data.draw(st.sampled_from([0.25, 0.5]), label='beta')}"
    return kind


def _eta0(problem, spec, factors, factor: float = FACTOR) -> float:
    eta0 = problem.eta0(factor) / max(factors)
    if spec.name == "momentum":
        eta0 *= 1.0 - spec.beta
    if spec.name == "adam":
        task = problem.task
        _, state, _ = optimizer_scheme_step(task, task.params, jacobi(task.n_blocks), eta0, spec,
                                            None, factors)
        _, g = grad(task.loss, task.params)
        J = direction_jacobian_apply(spec, state, g, {k: torch.ones_like(v) for k, v in g.items()})
        eta0 /= max(1.0, max(float(v.max()) for v in J.values()))
    return 2.0 ** math.floor(math.log2(eta0))


def _study(etas, errors, floors, expected):
    kept = [(e, r) for e, r, f in zip(etas, errors, floors) if math.isfinite(r) and abs(r) > f]
    study = observe_order([e for e, _ in kept], [r for _, r in kept], expected=expected)
    table = "\n".join(f"  eta={e:.4g} error={r:.4g} floor={f:.3g}" for e, r, f in zip(etas, errors,
                                                                                      floors))
    return study, f"\n{study.table()}\n{table}"


def _case(spec_obj, data):
    problem = spec_obj.build()
    n = problem.task.n_blocks
    pattern = data.draw(acyclic_patterns(n), label="pattern")
    factors = data.draw(st.lists(st.sampled_from(FACTOR_CHOICES), min_size=n, max_size=n),
                        label="factors")
    return problem, pattern, factors


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
@examples(0.5)
@given(spec=problem_specs(), data=st.data())
def test_one_step_remainder_is_third_order(kind, spec, data):
    problem, pattern, factors = _case(spec, data)
    task = problem.task
    opt = parse_optimizer(_spec(kind, data))
    eta0 = _eta0(problem, opt, factors)
    p, state = dict(task.params), OptimizerState()
    for _ in range(2):  # a warm, common state
        p, state, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), eta0, opt, state,
                                            factors)
    c = optimizer_delay_curvature(task, p, pattern, opt, state, factors, method="reverse")
    scale = rounding_scale(task, p)
    etas = [eta0 * 2.0**-k for k in range(GRID_POINTS)]
    errors, floors = [], []
    for eta in etas:
        s_new, _, _ = optimizer_scheme_step(task, p, pattern, eta, opt, state, factors)
        j_new, _, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), eta, opt, state,
                                            factors)
        gap = loss_gap(task, s_new, j_new)
        errors.append(gap - eta * eta * c)
        floors.append(roundoff_floor(abs(gap) + scale, task.dtype))
    study, msg = _study(etas, errors, floors, 3)
    ctx = f"{kind} {opt.describe()} factors={factors} pattern={pattern.describe()} spec={spec}"
    # a remainder entirely under the float64 floor (a vanishing leading coefficient; for Adam also a
    # large J_phi in a coordinate that hardly moves the loss, which shrinks the grid): nothing to
    # observe
    assume(len(study.etas) >= 3)
    assert len(study.etas) >= 3, f"only {len(study.etas)} points above the floor: {ctx}{msg}"
    assert study.slope >= 2.8 and study.min_rate >= 2.6, f"{ctx}{msg}"


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
@examples(0.3)
@given(spec=problem_specs(max_blocks=3), data=st.data())
def test_recursion_and_cumulative_remainders(kind, spec, data):
    problem, pattern, factors = _case(spec, data)
    task = problem.task
    opt = parse_optimizer(_spec(kind, data))
    eta0 = _eta0(problem, opt, factors, TRAJECTORY_FACTOR)
    if opt.name == "adam":
        # a finding, not a tolerance: Hypothesis found Adam's recursion pre-asymptotic at the
        # coarsest point (quartic seed 1, sizes (1, 3), factors 0.25, pattern 1<-2: pairwise rates
        # 0.96, 2.68, 2.91, 2.96, 2.99, error/eta^3 settling at -1.54e-3); its grid starts one
        # halving deeper (README, optimizer findings)
        eta0 /= 2.0
    scale = rounding_scale(task, task.params)
    etas = [eta0 * 2.0**-k for k in range(GRID_POINTS)]
    errs = {"recursive": [], "cumulative": [], "jc_only": []}
    floors = {"recursive": [], "cumulative": []}
    k0 = K0_MOMENTUM if opt.name == "momentum" else K0
    for j, eta in enumerate(etas):
        K = ADAM_RECURSION_K if opt.name == "adam" else k0 * 2**j
        run = run_optimizer_estimates(task, pattern, eta, K, opt, factors, method="reverse")
        gap = loss_gap(task, run.theta_s, run.theta_jc)
        for key in errs:
            errs[key].append(gap - run[-1][key])
        floors["recursive"].append(roundoff_floor(abs(gap) + scale, task.dtype))
        floors["cumulative"].append(roundoff_floor(abs(gap) + math.sqrt(K) * scale, task.dtype))
    ctx = f"{kind} {opt.describe()} factors={factors} pattern={pattern.describe()} spec={spec}"
    checks = [("recursive", 3, 2.8)]
    if opt.name != "adam":
        checks += [("cumulative", 2, 1.8), ("jc_only", 2, 1.8)]
    for key, expected, need in checks:
        fl = floors["recursive" if key == "recursive" else "cumulative"]
        study, msg = _study(etas, errs[key], fl, expected)
        assume(len(study.etas) >= 3)  # nothing to observe above the floor (see the one-step test)
        assert len(
            study.etas) >= 3, f"{key}: only {len(study.etas)} points above the floor: {ctx}{msg}"
        assert study.slope >= need, (
            f"{key}: least-squares order {study.slope:.3f} < {need}: {ctx}{msg}")


def test_heavy_ball_short_horizon_instance_found_by_hypothesis():
    """The instance that made heavy ball's grid longer (module docstring): at ``K0_MOMENTUM`` its
    ``jc_only`` remainder shows its second order; at ``K0 = 8`` it was still pre-asymptotic."""
    from tests.properties.strategies import ProblemSpec
    from crosscurv.theory.patterns import from_pairs

    problem = ProblemSpec(family="bilinear", seed=5, sizes=(3, 4, 2)).build()
    task, factors = problem.task, [0.25, 0.25]
    opt, pattern = parse_optimizer("momentum:0.25"), from_pairs(2, [(0, 1)])
    eta0 = _eta0(problem, opt, factors, TRAJECTORY_FACTOR)
    scale = rounding_scale(task, task.params)
    slopes = {}
    for k0 in (8, K0_MOMENTUM):
        etas = [eta0 * 2.0**-k for k in range(GRID_POINTS)]
        errs, floors = [], []
        for j, eta in enumerate(etas):
            run = run_optimizer_estimates(task, pattern, eta, k0 * 2**j, opt, factors,
                                          method="reverse")
            gap = loss_gap(task, run.theta_s, run.theta_jc)
            errs.append(gap - run[-1]["jc_only"])
            floors.append(roundoff_floor(abs(gap) + math.sqrt(k0 * 2**j) * scale, task.dtype))
        slopes[k0] = _study(etas, errs, floors, 2)[0].slope
    assert slopes[8] < 1.8 <= slopes[K0_MOMENTUM], slopes
