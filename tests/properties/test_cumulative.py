"""Property: Theorem 3's cumulative estimate is off by O(K eta^3) = O(T eta^2) at a fixed horizon.

With ``eta K = T`` fixed (``K = 4 * 2^k``, ``eta = eta0 * 2^-k``, ``k = 0..5``; the runs of
:func:`tests.properties.test_recursion.trajectory_case`), the errors at ``k = K``

* ``gap - cumulative`` (Theorem 3: ``z`` propagated from the common start
  with ``M_S`` and ``g_S`` along the ``S`` trajectory), and
* ``gap - jc_only`` (the same recursion fed from the JC trajectory alone),

scale as ``K eta^3 = T eta^2``: their observed order in ``eta`` (least-squares slope over the points
above the round-off floor) is at least 1.9.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.properties.checks import MIN_KEPT, describe
from tests.properties.strategies import examples, problem_specs
from tests.properties.test_recursion import trajectory_case


@examples()
@given(spec=problem_specs(), data=st.data())
def test_cumulative_and_jc_only_errors_are_second_order_at_fixed_horizon(spec, data):
    studies, context = trajectory_case(spec, data)
    for key in ("cumulative", "jc_only"):
        study = studies[key]
        msg = describe(study, **context)
        assert study.n_kept >= MIN_KEPT, f"only {study.n_kept} points above the floor" + msg
        assert study.fitted >= 1.9, f"{key}: observed order {study.fitted:.3f} < 1.9" + msg
