"""Property: the one-step remainder of Theorem 1 is O(eta^3), with theory's eta^3 coefficient.

From a common point, for any acyclic pattern ``S``,

    r(eta) = (L_S^{k+1} - L_JC^{k+1}) - eta^2 C_S = c3 eta^3 + O(eta^4),

with ``c3 = -g^T (M_S + H) M_S g - 1/2 sum_i T[E_i g, P_i g, P_i g]``
(:func:`crosscurv.theory.one_step.gap_coefficients`). On the grid ``eta0 * 2^-k``, ``k = 0..5``
(``eta0 * lam <= 1/16`` for the instance's curvature scale ``lam``), after dropping the points at or
below the round-off floor:

* every pairwise rate ``log2(r(eta)/r(eta/2)) >= 2.9``;
* ``r(eta)/eta^3`` tends to the symbolic ``c3`` (``r/eta^3 - c3 = O(eta)``,
  :func:`tests.properties.checks.assert_tends_to_prediction`).

Instances whose ``c3`` nearly cancels get a cubic tilt first
(:func:`crosscurv.experiments.problems.guard_cubic`), so the rate is not spoilt by a vanishing
leading coefficient. ``C_S`` is the numeric one (:mod:`crosscurv.numeric.curvature`) and must equal
theory's.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from crosscurv.experiments.problems import guard_cubic
from crosscurv.experiments.scaling import one_step_study, predicted_coefficients
from crosscurv.numeric.curvature import cross_curvature_table
from tests.properties.checks import assert_min_rate, assert_tends_to_prediction
from tests.properties.strategies import GRID_POINTS, acyclic_patterns, examples, problem_specs

#: ``eta0 * lam`` of the one-step grid.
FACTOR = 1.0 / 16


@examples(1.5)
@given(spec=problem_specs(), data=st.data())
def test_one_step_remainder_is_third_order_with_theory_coefficient(spec, data):
    problem = spec.build()
    pattern = data.draw(acyclic_patterns(problem.task.n_blocks), label="pattern")
    guard = guard_cubic(problem, [(pattern, 1)])
    problem = guard.problem
    coef = predicted_coefficients(problem, pattern)
    c_s = cross_curvature_table(problem.task).C_S(pattern)
    assert math.isclose(c_s, coef[2], rel_tol=1e-10, abs_tol=1e-14), (c_s, coef[2])
    study = one_step_study(problem, pattern, n=GRID_POINTS, factor=FACTOR, coefficients={2: c_s,
        3: coef[3]})
    context = dict(spec=spec, pattern=pattern.describe(), tilt=guard.sigma, guarded=guard.achieved)
    assert_min_rate(study, 2.9, **context)
    assert_tends_to_prediction(study, **context)
