"""Lemma 1, Theorem 1, Corollary 1, update-order invariance and the eta^3 gap, exactly.

The brute-force series (exact scheme step through the Taylor model) is compared with closed forms
written here *independently* with explicit SymPy matrices (``M_S`` built from the mask), so the
check does not reuse the code under test.
"""

from __future__ import annotations

import itertools

import pytest
import sympy

from tests.theory.cases import all_cases
from crosscurv.theory.block_model import BlockModel
from crosscurv.theory.one_step import (cross_curvature, delay_curvature, eta3_gap_closed_form,
                                       lemma1_coefficients, loss_coefficients_closed_form,
                                       loss_series, one_step_update)
from crosscurv.theory.patterns import PatternError, gauss_seidel, jacobi, partial

CASES = all_cases(all_gs_orders=True)
CASES_D2 = [pytest.param(n, p, id=f"D2-N{n}-{p.name}") for n in (2, 3)
            for p in (gauss_seidel(n), gauss_seidel(n, list(reversed(range(n)))), partial(n, [(1,
            0)]), jacobi(n))]

_MODELS: dict = {}


def model(n, dims=1) -> BlockModel:
    key = (n, dims)
    if key not in _MODELS:
        _MODELS[key] = BlockModel(n, dims, taylor_order=3)
    return _MODELS[key]


class Reference:
    """Explicit SymPy matrices for one model and pattern (independent closed forms)."""

    def __init__(self, m: BlockModel, p):
        d = m.d
        self.m = m
        self.g = sympy.Matrix(m.g_symbols)
        self.H = sympy.Matrix(d, d, lambda a, b: m.H_symbols[tuple(sorted((a, b)))])
        mask = p.mask()
        self.M = sympy.Matrix(d, d, lambda a, b: self.H[a, b] if mask[m.block_of[a]][m.block_of[b]]
                              else 0)
        self.D = sympy.Matrix(d, d, lambda a, b: self.H[a, b] if m.block_of[a] == m.block_of[b]
                              else 0)
        T = lambda a, b, c: m.T_symbols[tuple(sorted((a, b, c)))]  # noqa: E731
        self.T = T
        # P_i g for the block of each coordinate
        self.Pg = {i: [self.g[b] if mask[i][m.block_of[b]] else 0 for b in range(d)] for i in range(
            m.n_blocks)}
        self.t = sympy.Matrix([
            sympy.Rational(1, 2) * sum(T(a, b, c) * self.Pg[m.block_of[a]][b] * self.Pg[m.block_of[
            a]][c]
                                       for b in range(d) for c in range(d))
            for a in range(d)])

    def scalar(self, e):
        return sympy.expand(e[0, 0] if isinstance(e, sympy.MatrixBase) else e)

    def c_s(self):
        return self.scalar(self.g.T * self.M * self.g)

    def c3(self):
        d, m = self.m.d, self.m
        cubic = sum(self.T(a, b, c) * self.g[a] * self.Pg[m.block_of[a]][b] * self.Pg[m.block_of[
            a]][c]
                    for a in range(d) for b in range(d) for c in range(d))
        return self.scalar(-(self.g.T * (self.M + self.H) * self.M * self.g)[0, 0] - sympy.Rational(
            1, 2) * cubic)


def _eq(x, y) -> bool:
    return sympy.expand(sympy.sympify(x) - sympy.sympify(y)) == 0


def _check_lemma1(m, p):
    ref = Reference(m, p)
    step = one_step_update(m, p)
    mg = ref.M * ref.g
    nxt = ref.M * mg + ref.t
    for a in range(m.d):
        g_tilde = step.fresh_gradient[a]
        assert _eq(m.to_expr(g_tilde.coeff(0)), ref.g[a])
        assert _eq(m.to_expr(g_tilde.coeff(1)), -mg[a])            # Lemma 1
        assert _eq(m.to_expr(g_tilde.coeff(2)), nxt[a])            # next term: M_S^2 g + t
        assert _eq(m.to_expr(step.displacement[a].coeff(1)), -ref.g[a])
    closed = lemma1_coefficients(m, p)
    assert all(step.fresh_gradient[a].coeff(k) == closed[k][a] for a in range(m.d) for k in range(
        3))


def _check_theorem1(m, p):
    ref = Reference(m, p)
    n = m.n_blocks
    L_s = loss_series(m, p)
    L_jc = loss_series(m, jacobi(n))
    gg = ref.scalar(ref.g.T * ref.g)
    gHg = ref.scalar(ref.g.T * ref.H * ref.g)
    assert L_s.coeff(0) == 0 and L_jc.coeff(0) == 0
    assert _eq(m.to_expr(L_jc.coeff(1)), -gg) and _eq(m.to_expr(L_s.coeff(1)), -gg)
    assert _eq(m.to_expr(L_jc.coeff(2)), gHg / 2)
    assert _eq(m.to_expr(L_s.coeff(2)), gHg / 2 + ref.c_s())
    gap = L_s - L_jc
    assert gap.coeff(0) == 0 and gap.coeff(1) == 0
    # L_S - L_JC = eta^2 C_S + O(eta^3)
    assert sympy.expand(m.to_expr(gap.coeff(2)) - ref.c_s()) == 0
    assert gap.coeff(2) == delay_curvature(m, p)
    # C_S = sum over pairs of g_i^T H_ij g_j
    pair_sum = sum(m.g_symbols[a] * ref.H[a, b] * m.g_symbols[b]
                   for i, j in p.pairs for a in m.blocks[i] for b in m.blocks[j])
    assert _eq(ref.c_s(), pair_sum)
    # beyond the paper: the eta^3 coefficient, against the user's derivation
    assert sympy.expand(m.to_expr(gap.coeff(3)) - ref.c3()) == 0
    assert gap.coeff(3) == eta3_gap_closed_form(m, p)
    lc = loss_coefficients_closed_form(m, p)
    assert all(L_s.coeff(k) == lc[k] for k in (1, 2, 3))


@pytest.mark.parametrize("n, p", CASES)
def test_lemma1_and_next_term(n, p):
    _check_lemma1(model(n), p)


@pytest.mark.parametrize("n, p", CASES_D2)
def test_lemma1_and_next_term_dims2(n, p):
    _check_lemma1(model(n, 2), p)


@pytest.mark.parametrize("n, p", CASES)
def test_theorem1_and_eta3_gap(n, p):
    _check_theorem1(model(n), p)


@pytest.mark.parametrize("n, p", CASES_D2)
def test_theorem1_and_eta3_gap_dims2(n, p):
    _check_theorem1(model(n, 2), p)


@pytest.mark.parametrize("n, dims", [(2, 1), (3, 1), (4, 1), (2, 2), (3, 2)])
def test_corollary1_and_order_invariance_all_orders(n, dims):
    """C_GS = C_cross / 2 and identical L^{k+1} through eta^2 for every GS order."""
    m = model(n, dims)
    ref = Reference(m, jacobi(n))
    c_cross = ref.scalar(ref.g.T * (ref.H - ref.D) * ref.g)
    assert _eq(m.to_expr(cross_curvature(m)), c_cross)
    L_jc = loss_series(m, jacobi(n))
    first = None
    c3s = {}
    for order in itertools.permutations(range(n)):
        p = gauss_seidel(n, order)
        L = loss_series(m, p)
        assert _eq(m.to_expr((L - L_jc).coeff(2)), c_cross / 2)
        first = first or L
        for k in (0, 1, 2):
            assert L.coeff(k) == first.coeff(k)
        c3s[order] = (L - L_jc).coeff(3)
        assert c3s[order] == eta3_gap_closed_form(m, p)
    # the orders really differ at eta^3 (the one-step statement is sharp)
    assert len({m.to_expr(v) for v in c3s.values()}) > 1


def test_gs_orders_eta3_difference_n2_by_hand():
    """N = 2 scalar blocks: orders (1,2) and (2,1) differ at eta^3 by a hand-derived polynomial."""
    m = model(2)
    g1, g2 = m.g_symbols
    H11, H12, H22 = m.H_symbols[(0, 0)], m.H_symbols[(0, 1)], m.H_symbols[(1, 1)]
    T112, T122 = m.T_symbols[(0, 0, 1)], m.T_symbols[(0, 1, 1)]
    diff = (loss_series(m, gauss_seidel(2, [0, 1])) - loss_series(m, gauss_seidel(2, [1,
                                                                                      0]))).coeff(3)
    # c3(1,2) = -H12^2 g1^2 - H12 H22 g1 g2 - T112 g1^2 g2 / 2 and symmetrically for (2,1)
    c3_12 = -H12**2 * g1**2 - H12 * H22 * g1 * g2 - T112 * g1**2 * g2 / 2
    c3_21 = -H12**2 * g2**2 - H12 * H11 * g1 * g2 - T122 * g1 * g2**2 / 2
    assert _eq(m.to_expr(diff), c3_12 - c3_21)


def _topological_orders(n, p):
    return [o for o in itertools.permutations(range(n)) if all(o.index(j) < o.index(i) for i,
                                                               j in p.pairs)]


@pytest.mark.parametrize("n, p", [c for c in CASES if c.values[0] == 4 and len(_topological_orders(
    *c.values)) >= 2])
def test_any_topological_order_gives_the_same_step(n, p):
    """The exact step does not depend on which valid update order processes the blocks."""
    m = model(n)
    ref = one_step_update(m, p)
    orders = _topological_orders(n, p)
    for o in orders[1:]:
        other = one_step_update(m, p, order=o)
        assert all(other.displacement[a] == ref.displacement[a] for a in range(m.d))


def test_order_violating_the_pattern_is_rejected():
    m = model(3)
    with pytest.raises(PatternError, match="3<-2"):
        one_step_update(m, gauss_seidel(3), order=(0, 2, 1))
    with pytest.raises(PatternError, match="blocks, the model"):
        one_step_update(m, gauss_seidel(2))
