"""crosscurv.testing.strategies: the drawn patterns and problems are what their docstrings say."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crosscurv.numeric.steps import scheme_step
from crosscurv.testing import strategies as cst
from crosscurv.theory.patterns import DelayPattern, jacobi


@given(n=st.integers(1, 5), data=st.data())
def test_stage_patterns_use_every_earlier_stage_and_nothing_else(n, data):
    pattern = data.draw(cst.stage_patterns(n))
    assert isinstance(pattern, DelayPattern) and pattern.n_blocks == n
    stages = [
        [int(b) - 1 for b in part.split(",")] for part in pattern.name[len("stages:") :].split("|")
    ]
    assert sorted(b for s in stages for b in s) == list(range(n))
    where = {b: k for k, s in enumerate(stages) for b in s}
    assert pattern.pairs == {(i, j) for i in range(n) for j in range(n) if where[j] < where[i]}
    if len(stages) == 1:
        assert pattern.is_jacobi
    if len(stages) == n:
        assert pattern.is_full_gs()


@given(n=st.integers(2, 5), data=st.data())
def test_gs_orders_and_acyclic_patterns(n, data):
    assert data.draw(cst.gs_orders(n)).is_full_gs()
    assert data.draw(cst.acyclic_patterns(n)).pairs  # non-empty and acyclic (DelayPattern checks)


@given(spec=cst.block_quadratics(block_sizes=(2, 1, 3)))
def test_block_quadratics_have_the_given_blocks_and_a_constant_hessian(spec):
    task = spec.build().task
    assert [sum(task.params[n].numel() for n in names) for names in task.blocks.values()] == [
        2,
        1,
        3,
    ]
    # a quadratic loss: after a JC step theta - eta g it is quadratic in eta (third difference 0)
    jc = jacobi(task.n_blocks)
    losses = [float(task.loss(scheme_step(task, task.params, jc, 0.01 * k))) for k in range(4)]
    third = losses[3] - 3 * losses[2] + 3 * losses[1] - losses[0]
    assert abs(third) <= 1e-12 * max(abs(v) for v in losses), losses
