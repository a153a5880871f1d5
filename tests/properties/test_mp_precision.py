"""High-precision (mpmath) checks on quartic polynomials, below the float64 round-off floor.

A quartic polynomial with float64 coefficients is evaluated *exactly* in ``mpmath`` (50 digits): its
steps, losses, gradients, Hessians and the whole controlled protocol
(:func:`crosscurv.experiments.scaling.protocol_mp`, an independent dense implementation of the
records).

* One step far below the float64 floor (``eta0 * lam = 2^-24``): the remainder
  ``r = (L_S - L_JC) - eta^2 C_S`` lies under the float64 floor at every grid
  point, yet exactly it has pairwise rates ``>= 2.9``, and ``r - c3 eta^3``
  (``c3`` from :func:`crosscurv.theory.one_step.gap_coefficients` in ``mpmath`` mode)
  has rates ``>= 3.9``: ``r/eta^3`` tends to ``c3`` at rate ``eta``.
* The float64 round-off floor of :mod:`crosscurv.experiments.scaling` bounds the actual
  float64 error of the one-step remainder on the float64 grid.
* The float64 trajectory errors of the scaling study (``gap - recursive``,
  ``gap - cumulative``, ``gap - jc_only`` from :mod:`crosscurv.numeric.protocol` and the
  cancellation-free gap) agree with the exact protocol to within the floors
  the study uses.
"""

from __future__ import annotations

import mpmath
from hypothesis import given
from hypothesis import strategies as st

from crosscurv.experiments.problems import guard_cubic
from crosscurv.experiments.scaling import (FLOOR_ULPS, one_step_study, one_step_study_mp,
                                           protocol_mp, roundoff_floor, rounding_scale,
                                           trajectory_studies)
from crosscurv.numeric.orders import observe_order
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
    context = dict(spec=spec, pattern=pattern.describe(), tilt=guard.sigma, guarded=guard.achieved)
    # every point is invisible in float64 (below the floor of the float64 study) ...
    f64_floor = roundoff_floor(rounding_scale(problem.task, problem.task.params))
    assert all(abs(pt["error"]) < f64_floor for pt in study.points), describe(study, **context)
    # ... but exactly it is third order,
    assert study.n_kept == GRID_POINTS, describe(study, **context)
    assert_min_rate(study, 2.9, **context)
    # and r / eta^3 -> c3 at rate eta: r - c3 eta^3 is fourth order
    etas = [pt["x"] for pt in study.points]
    after = observe_order(etas, study.info["remainder_after_c3"], expected=4)
    assert len(after.etas) == GRID_POINTS and after.min_rate >= 3.9, after.table() + describe(
        study, **context)


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
                f"eta={p64['x']:.4g}: float64 error {float(err):.3g} above the floor "
                f"{p64['floor']:.3g} "
                f"({FLOOR_ULPS} ulps)" + describe(f64, spec=spec, pattern=pattern.describe())
            )


@examples(0.3)
@given(spec=quartic_specs(max_blocks=4), data=st.data())
def test_float64_trajectory_errors_match_the_exact_protocol_within_the_floors(spec, data):
    problem = spec.build()
    task = problem.task
    pattern = data.draw(acyclic_patterns(task.n_blocks), label="pattern")
    studies = trajectory_studies(problem, pattern, n=3, factor=1.0 / 16, k0=4, hvp_method="reverse")
    for j, eta in enumerate(pt["x"] for pt in studies["recursion"].points):
        K = 4 * 2**j
        exact = protocol_mp(problem, pattern, eta, K, dps=30)[-1]
        for key, name in (("recursion", "recursive"), ("cumulative", "cumulative"), ("jc_only",
                                                                                     "jc_only")):
            pt = studies[key].points[j]
            err_mp = exact["gap"] - exact[name]
            assert abs(pt["error"] - float(err_mp)) <= pt["floor"], (
                f"{key} at eta={eta:g}, K={K}: float64 {pt['error']:.6g}, exact "
                f"{float(err_mp):.6g}, floor {pt['floor']:.3g}" + describe(studies[key], spec=spec,
                pattern=pattern.describe())
            )
