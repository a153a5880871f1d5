"""Property: the local remainder of Theorem 2 along a trajectory is O(eta^3).

JC and a random acyclic pattern ``S`` run from the same point with constant step ``eta`` for ``K = 4
* 2^k`` iterations, ``eta = eta0 * 2^-k``, ``k = 0..5`` (so ``T = eta K`` is fixed;
:func:`crosscurv.experiments.scaling.trajectory_studies`, which runs
:func:`crosscurv.numeric.protocol.run_protocol`). At ``k = K``,

    R(eta) = Delta L^K - [g_JC^K . (I - eta H_JC^{K-1}) Delta theta^{K-1}
                          + 1/2 Delta theta^{K-1} . H_JC^{K-1} Delta theta^{K-1}
                          + eta^2 g_JC^K . M_S g_S^{K-1}]

(``gap - recursive`` of the records) must have every pairwise rate ``>= 2.9`` over the points above
the round-off floor.

Grid and guard. ``eta0 * lam = 1/32`` and ``T * lam = 1/8`` for the instance's curvature scale
``lam``. Over such a short horizon the remainder's leading coefficient is close to its value at ``k
= 1``, ``l0 = -g^T M_S^2 g - 1/2 sum_i T[E_i g, P_i g, P_i g]`` (at ``k = 1``, ``Delta theta^0 = 0``
and ``R = l0 eta^3 + O(eta^4)``); instances whose ``l0`` nearly cancels or is small get a cubic tilt
first (:func:`crosscurv.experiments.problems.guard_cubic` with ``local=True``).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crosscurv.experiments.problems import guard_cubic
from crosscurv.experiments.scaling import trajectory_studies
from tests.properties.checks import assert_min_rate
from tests.properties.strategies import GRID_POINTS, acyclic_patterns, examples, problem_specs

#: ``eta0 * lam`` of the trajectory grid and the iterations ``K0`` at ``eta0`` (``T = eta0 K0``).
FACTOR = 1.0 / 32
K0 = 4
#: The guard's absolute threshold on ``l0`` (``|l0| >= LOCAL_ABSOLUTE lam^2 sum_i ||E_i g|| ||P_i
#: g||``): larger than the one-step guard's 1e-3 because along a trajectory the error's next order
#: also collects the JC-only forcing mismatch ``eta^2 (M_S g_S - M_S g_JC)``, which ``l0`` must
#: dominate.
LOCAL_ABSOLUTE = 1e-2


def trajectory_case(spec, data):
    """The guarded instance, its pattern and the trajectory studies (shared with test_cumulative).
    """
    problem = spec.build()
    pattern = data.draw(acyclic_patterns(problem.task.n_blocks), label="pattern")
    guard = guard_cubic(problem, [(pattern, 1)], local=True, absolute=LOCAL_ABSOLUTE)
    studies = trajectory_studies(guard.problem, pattern, n=GRID_POINTS, factor=FACTOR, k0=K0,
                                 hvp_method="reverse")
    context = dict(spec=spec, pattern=pattern.describe(), tilt=guard.sigma, guarded=guard.achieved)
    return studies, context


@examples()
@given(spec=problem_specs(), data=st.data())
def test_recursion_remainder_is_third_order(spec, data):
    studies, context = trajectory_case(spec, data)
    assert_min_rate(studies["recursion"], 2.9, **context)
