"""High-precision (mpmath) checks on quartic polynomials, below the float64 round-off floor.

A quartic polynomial with float64 coefficients is evaluated *exactly* in
``mpmath`` (50 digits): its steps, losses, gradients, Hessians and the
whole controlled protocol (:func:`experiments.scaling.protocol_mp`, an
independent dense implementation of the records).

* One step far below the float64 floor (``eta0 * lam = 2^-24``): the remainder
  ``r = (L_S - L_JC) - eta^2 C_S`` lies under the float64 floor at every grid
  point, yet exactly it has pairwise rates ``>= 2.9``, and ``r - c3 eta^3``
  (``c3`` from :func:`theory.one_step.gap_coefficients` in ``mpmath`` mode)
  has rates ``>= 3.9``: ``r/eta^3`` tends to ``c3`` at rate ``eta``.
* The float64 round-off floor of :mod:`experiments.scaling` bounds the actual
  float64 error of the one-step remainder on the float64 grid.
* The float64 protocol (:mod:`numeric.protocol`) agrees with the exact one:
  ``gap``, ``recursive``, ``cumulative`` and ``jc_only`` differ by less than
  the floors the scaling study uses.
"""

from __future__ import annotations

import mpmath
from hypothesis import given
from hypothesis import strategies as st

from experiments.problems import guard_cubic
from experiments.scaling import (
    FLOOR_ULPS,
    one_step_study,
    one_step_study_mp,
    protocol_mp,
    roundoff_floor,
)
from numeric import tree
from numeric.hvp import grad
from numeric.orders import observe_order
from numeric.protocol import run_protocol
from tests.properties.checks import assert_min_rate, describe
from tests.properties.strategies import GRID_POINTS, acyclic_patterns, examples, quartic_specs

DPS = 50


@examples(0.5)
@given(spec=quartic_specs(), data=st.data())
def test_one_step_exact_below_the_float64_floor(spec, data):
    problem = spec.build()
    pattern = data.draw(acyclic_patterns(problem.task.n_blocks), label="pattern")
    guard = guard_cubic(problem, [(pattern, 1)])
    problem = guard.problem
    study = one_step_study_mp(problem, pattern, eta0=problem.eta0(2.0**-24), n=GRID_POINTS, dps=DPS)
    context = dict(spec=spec, pattern=pattern.describe(), tilt=guard.sigma)
    # every point is invisible in float64 ...
    _, g = grad(problem.task.loss, problem.task.params)
    scale = abs(float(problem.task.loss(problem.task.params))) + float(tree.norm(problem.task.params) * tree.norm(g))
    f64_floor = roundoff_floor(scale)
    assert all(abs(pt["error"]) < f64_floor for pt in study.points), describe(study, **context)
    # ... but exactly it is third order,
    assert study.n_kept == GRID_POINTS, describe(study, **context)
    assert_min_rate(study, 2.9, **context)
    # and r / eta^3 -> c3 at rate eta: r - c3 eta^3 is fourth order
    etas = [pt["x"] for pt in study.points]
    after = observe_order(etas, study.info["remainder_after_c3"], expected=4)
    assert len(after.etas) == GRID_POINTS and after.min_rate >= 3.9, after.table() + describe(study, **context)


@examples(0.5)
@given(spec=quartic_specs(), data=st.data())
def test_float64_floor_bounds_the_one_step_roundoff(spec, data):
    problem = spec.build()
    pattern = data.draw(acyclic_patterns(problem.task.n_blocks), label="pattern")
    f64 = one_step_study(problem, pattern, n=GRID_POINTS)
    exact = one_step_study_mp(problem, pattern, eta0=f64.points[0]["x"], n=GRID_POINTS, dps=DPS)
    with mpmath.workdps(DPS):
        for p64, pmp, rmp in zip(f64.points, exact.points, exact.info["errors_mp"]):
            # the float64 C_S differs from the exact one by round-off too; both are in p64's error
            err = abs(mpmath.mpf(p64["error"]) - mpmath.mpf(rmp))
            assert err <= p64["floor"], (
                f"eta={p64['x']:.4g}: float64 error {float(err):.3g} above the floor {p64['floor']:.3g} "
                f"({FLOOR_ULPS} ulps)" + describe(f64, spec=spec, pattern=pattern.describe())
            )


@examples(0.3)
@given(spec=quartic_specs(max_blocks=4), data=st.data(), k=st.integers(0, 3))
def test_float64_protocol_matches_the_exact_protocol(spec, data, k):
    problem = spec.build()
    task = problem.task
    pattern = data.draw(acyclic_patterns(task.n_blocks), label="pattern")
    eta = problem.eta0(1.0 / 16) * 2.0**-k
    iters = 8 * 2**k
    exact = protocol_mp(problem, pattern, eta, iters, dps=30)
    f64 = run_protocol(task, pattern, eta, iters, hvp_method="reverse").records
    _, g = grad(task.loss, task.params)
    tg = float(tree.norm(task.params) * tree.norm(g))
    for rmp, r64 in zip(exact, f64):
        K = r64["k"]
        losses = abs(r64["loss_s"]) + abs(r64["loss_jc"])
        # the floors of experiments.scaling.trajectory_studies
        rec_floor = roundoff_floor(losses + tg)
        cum_floor = roundoff_floor(losses + K * tg)
        exact_gap = rmp["gap"]
        for key, floor in (("recursive", rec_floor), ("cumulative", cum_floor), ("jc_only", cum_floor)):
            err64 = r64["gap"] - r64[key]
            errmp = exact_gap - rmp[key]
            assert abs(err64 - float(errmp)) <= floor, (K, key, err64, float(errmp), floor)
        assert abs(r64["gap"] - float(exact_gap)) <= cum_floor, (K, r64["gap"], float(exact_gap), cum_floor)
