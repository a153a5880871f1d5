"""Theorem 3 on a quadratic: unrolled z_K against the exact Delta theta^K, K = 1..4."""

from __future__ import annotations

import pytest
import sympy

from tests.theory.cases import all_cases
from crosscurv.theory.block_model import BlockModel, ModelError
from crosscurv.theory.cumulative import check_cumulative, quadratic_model
from crosscurv.theory.patterns import chain, gauss_seidel, jacobi, partial

CASES = all_cases(all_gs_orders=True)
_MODELS: dict = {}


def model(n, dims=1):
    if (n, dims) not in _MODELS:
        _MODELS[(n, dims)] = quadratic_model(n, dims)
    return _MODELS[(n, dims)]


def _m2g(m, p):
    d = m.d
    H = sympy.Matrix(d, d, lambda a, b: m.H_symbols[tuple(sorted((a, b)))])
    mask = p.mask()
    M = sympy.Matrix(d, d, lambda a, b: H[a, b] if mask[m.block_of[a]][m.block_of[b]] else 0)
    g = sympy.Matrix(m.g_symbols)
    return M * M * g, g


@pytest.mark.parametrize("n, p", CASES)
def test_theorem3_remainders_are_order_eta3(n, p):
    m = model(n)
    chk = check_cumulative(m, p, K_max=4)
    assert [s.K for s in chk.steps] == [1, 2, 3, 4]
    assert chk.holds and chk.growth_holds
    m2g, g = _m2g(m, p)
    nilpotent2 = all(sympy.expand(x) == 0 for x in m2g)
    for s in chk.steps:
        # the eta^3 coefficient grows exactly linearly: -K M_S^2 g (independent matrix product)
        for a in range(m.d):
            assert sympy.expand(m.to_expr(s.trajectory_eta3[a]) + s.K * m2g[a]) == 0
        assert sympy.expand(m.to_expr(s.loss_eta3) + s.K * (g.T * m2g)[0, 0]) == 0
        if nilpotent2:
            # M_S^2 = 0 (JC, N = 2, short partial patterns): z_K is exact through the truncation
            assert s.trajectory_order is None and s.loss_order is None
        else:
            assert s.trajectory_order == 3 and s.loss_order == 3


@pytest.mark.parametrize("n, p", [(2, gauss_seidel(2)), (3, gauss_seidel(3)), (3, chain(3)), (3,
    partial(3, [(2, 1)]))],
                         ids=["N2-gs", "N3-gs", "N3-chain", "N3-partial"])
def test_theorem3_dims2(n, p):
    chk = check_cumulative(model(n, 2), p, K_max=3, degree=3)
    assert chk.holds and chk.growth_holds
    assert all(s.trajectory_order in (None, 3) for s in chk.steps)


def test_z_is_not_trivially_exact_for_gs3():
    chk = check_cumulative(model(3), gauss_seidel(3))
    assert all(s.trajectory_order == 3 for s in chk.steps)
    assert chk.steps[3].loss_eta3 == chk.steps[0].loss_eta3 * 4


def test_bad_requests():
    with pytest.raises(ModelError):
        check_cumulative(BlockModel(2, 1, 3), gauss_seidel(2))
    with pytest.raises(ModelError):
        check_cumulative(model(2), jacobi(2), degree=2)
