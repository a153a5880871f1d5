"""gap_coefficients / loss_coefficients and lambdified expressions against exact values.

Exact values come from random rationals (SymPy); float64 and mpmath results must agree with them. A
Taylor test on an actual cubic loss (the scheme step run numerically, no series machinery) confirms
``eta^2 C_S + eta^3 c_3`` is the gap up to ``O(eta^4)``.
"""

from __future__ import annotations

import itertools
import math
import random

import mpmath
import numpy as np
import pytest
import sympy

from crosscurv.theory.block_model import BlockModel
from crosscurv.theory.lambdified import exact_value, numeric_function
from crosscurv.theory.one_step import (CoefficientInputError, eta3_gap_closed_form,
                                       gap_coefficients, loss_coefficients, loss_series)
from crosscurv.theory.patterns import PatternError, chain, from_pairs, gauss_seidel, jacobi, partial

DIMS = [(1, 1), (1, 1, 1), (1, 2, 1), (2, 2), (1, 1, 1, 1)]


def _patterns(n):
    ps = [jacobi(n), gauss_seidel(n), gauss_seidel(n, list(reversed(range(n)))), chain(n), partial(
        n, [(1, 0)])]
    if n == 4:
        ps.append(from_pairs(4, [(2, 0), (3, 1), (0, 1)]))
    return ps


def random_rational_data(d, seed):
    """Exactly symmetric g (d,), H (d,d), T (d,d,d) of small random rationals (object arrays)."""
    rng = random.Random(seed)
    q = lambda: sympy.Rational(rng.randint(-9, 9), rng.randint(1, 7))  # noqa: E731
    g = np.array([q() for _ in range(d)], dtype=object)
    H = np.empty((d, d), dtype=object)
    for a, b in itertools.combinations_with_replacement(range(d), 2):
        H[a, b] = H[b, a] = q()
    T = np.empty((d, d, d), dtype=object)
    for idx in itertools.combinations_with_replacement(range(d), 3):
        v = q()
        for perm in set(itertools.permutations(idx)):
            T[perm] = v
    return g, H, T


def _float(arr):
    return np.vectorize(float, otypes=[float])(arr).astype(np.float64)


def _mpf(arr):
    return np.vectorize(lambda v: mpmath.mpf(v.p) / v.q, otypes=[object])(arr)


@pytest.mark.parametrize("dims", DIMS, ids=lambda x: "x".join(map(str, x)))
def test_modes_agree_with_exact_values(dims):
    n, d = len(dims), sum(dims)
    m = BlockModel(n, dims, taylor_order=3)
    for k, p in enumerate(_patterns(n)):
        g, H, T = random_rational_data(d, seed=100 * n + k)
        exact = gap_coefficients(p, dims, g, H, T, mode="sympy")
        exact_l = loss_coefficients(p, dims, g, H, T, mode="sympy")
        assert all(isinstance(v, sympy.Rational) for v in list(exact.values()) + list(
            exact_l.values()))
        # exact closed form == symbolic brute-force series evaluated at the same rationals
        gap = loss_series(m, p) - loss_series(m, jacobi(n))
        L = loss_series(m, p)
        assert exact[2] == exact_value(m.to_expr(gap.coeff(2)), m, g=g, H=H, T=T)
        assert exact[3] == exact_value(m.to_expr(gap.coeff(3)), m, g=g, H=H, T=T)
        for j in (1, 2, 3):
            assert exact_l[j] == exact_value(m.to_expr(L.coeff(j)), m, g=g, H=H, T=T)
        # float64
        fl = gap_coefficients(p, dims, _float(g), _float(H), _float(T))
        fl_l = loss_coefficients(p, dims, _float(g), _float(H), _float(T))
        for key in exact:
            assert isinstance(fl[key], float)
            assert math.isclose(fl[key], float(exact[key]), rel_tol=1e-12, abs_tol=1e-12)
        for key in exact_l:
            assert math.isclose(fl_l[key], float(exact_l[key]), rel_tol=1e-12, abs_tol=1e-12)
        # mpmath at 40 digits, from mpmath matrices and nested lists
        with mpmath.workdps(40):
            gm = mpmath.matrix([mpmath.mpf(v.p) / v.q for v in g])
            Hm = mpmath.matrix([[mpmath.mpf(v.p) / v.q for v in row] for row in H])
            Tm = _mpf(T).tolist()
            mp = gap_coefficients(p, dims, gm, Hm, Tm, mode="mpmath")
            mp_l = loss_coefficients(p, dims, gm, Hm, Tm, mode="mpmath")
            for key in exact:
                assert isinstance(mp[key], mpmath.mpf)
                assert abs(mp[key] - mpmath.mpf(exact[key].p) / exact[key].q) <= mpmath.mpf(
                    10) ** -35 * (1 + abs(mp[key]))
            for key in exact_l:
                assert abs(mp_l[key] - mpmath.mpf(exact_l[key].p) / exact_l[key].q) <= mpmath.mpf(
                    10) ** -35 * (1 + abs(mp_l[key]))


@pytest.mark.parametrize("dims", [(1, 1, 1), (1, 2, 1), (1, 1, 1, 1)], ids=lambda x: "x".join(map(
    str, x)))
def test_lambdified_expressions_equal_exact_values(dims):
    n, d = len(dims), sum(dims)
    m = BlockModel(n, dims, taylor_order=3)
    p = gauss_seidel(n)
    g, H, T = random_rational_data(d, seed=7)
    exprs = {k: m.to_expr(c) for k, c in (loss_series(m, p) - loss_series(m, jacobi(
        n))).terms.items()}
    series_expr = (loss_series(m, p)).as_expr()
    for e in list(exprs.values()) + [series_expr]:
        exact = exact_value(e, m, g=g, H=H, T=T, eta=sympy.Rational(1, 10))
        f_np = numeric_function(e, m, "numpy")
        val = f_np(g=_float(g), H=_float(H), T=_float(T), eta=0.1)
        assert math.isclose(float(val), float(exact), rel_tol=1e-12, abs_tol=1e-13)
        with mpmath.workdps(40):
            f_mp = numeric_function(e, m, "mpmath")
            v = f_mp(g=_mpf(g), H=_mpf(H), T=_mpf(T), eta=mpmath.mpf(1) / 10)
            assert abs(v - mpmath.mpf(exact.p) / exact.q) <= mpmath.mpf(10) ** -35 * (1 + abs(v))
    # vector-valued expressions (Lemma 1's correction) lambdify too
    from crosscurv.theory.one_step import lemma1_coefficients

    vec = [m.to_expr(x) for x in lemma1_coefficients(m, p)[2]]
    f = numeric_function(vec, m)
    got = f(g=_float(g), H=_float(H), T=_float(T))
    want = [float(exact_value(e, m, g=g, H=H, T=T)) for e in vec]
    assert np.allclose(got, want, rtol=1e-12, atol=1e-13)


def test_symbolic_mode_returns_the_generic_expression():
    out = gap_coefficients("gs", (1, 1), None, None, None, mode="sympy")
    g1, g2, H12, H22, T112 = sympy.symbols("g1 g2 H12 H22 T112", real=True)
    assert sympy.expand(out[2] - H12 * g1 * g2) == 0
    assert sympy.expand(out[3] - (-H12**2 * g1**2 - H12 * H22 * g1 * g2 - T112 * g1**2 * g2
                                  / 2)) == 0
    m = BlockModel(3, (1, 2, 1), 3)
    out = gap_coefficients(gauss_seidel(3), (1, 2, 1), None, None, None, mode="sympy")
    assert sympy.expand(out[3] - m.to_expr(eta3_gap_closed_form(m, gauss_seidel(3)))) == 0
    lc = loss_coefficients("jc", (1, 1), None, None, None, mode="sympy")
    assert sympy.expand(lc[1] + g1**2 + g2**2) == 0


def _cubic_step_gap(pattern, dims, g, H, T, eta):
    """L_S^{k+1} - L_JC^{k+1} on the cubic loss g.x + x.Hx/2 + T[x,x,x]/6, computed by running the
    steps."""
    d = len(g)
    starts = np.cumsum((0,) + tuple(dims))
    blocks = [list(range(starts[b], starts[b + 1])) for b in range(len(dims))]

    def grad(x):
        return g + H.dot(x) + np.tensordot(T, x, axes=([2], [0])).dot(x) / 2

    def loss(x):
        return g.dot(x) + x.dot(H.dot(x)) / 2 + np.tensordot(T, x, axes=([2], [0])).dot(x).dot(
            x) / 6

    def step(p):
        disp = np.array([mpmath.mpf(0)] * d, dtype=object)
        for i in p.order():
            state = np.array([mpmath.mpf(0)] * d, dtype=object)
            for j in p.fresh(i):
                state[blocks[j]] = disp[blocks[j]]
            gi = grad(state)
            disp[blocks[i]] = -eta * gi[blocks[i]]
        return disp

    return loss(step(pattern)) - loss(step(jacobi(len(dims))))


@pytest.mark.parametrize("pattern, dims", [(gauss_seidel(3), (1, 2, 1)), (chain(4), (1, 1, 1, 1)),
                                           (partial(3, [(2, 0), (2, 1)]), (1, 1, 2))],
                         ids=["gs-1x2x1", "chain-4", "partial-1x1x2"])
def test_taylor_test_on_a_cubic_loss(pattern, dims):
    """gap(eta) - eta^2 C_S - eta^3 c_3 = O(eta^4): pairwise rates log2(r(eta)/r(eta/2)) -> 4."""
    g, H, T = random_rational_data(sum(dims), seed=3)
    with mpmath.workdps(60):
        gm, Hm, Tm = _mpf(g), _mpf(H), _mpf(T)
        c = gap_coefficients(pattern, dims, gm, Hm, Tm, mode="mpmath")
        etas = [mpmath.mpf(2) ** -k / 8 for k in range(10)]
        rem = [abs(_cubic_step_gap(pattern, dims, gm, Hm, Tm, e) - e**2 * c[2] - e**3 * c[3])
               for e in etas]
        rates = [float(mpmath.log(rem[k] / rem[k + 1], 2)) for k in range(len(rem) - 1)]
        # without the eta^3 term the rate would be 3
        rem2 = [abs(_cubic_step_gap(pattern, dims, gm, Hm, Tm, e) - e**2 * c[2]) for e in etas]
        rates2 = [float(mpmath.log(rem2[k] / rem2[k + 1], 2)) for k in range(len(rem2) - 1)]
    assert min(rates[-3:]) > 3.8, rates
    assert abs(rates2[-1] - 3) < 0.1, rates2


@pytest.mark.parametrize("call, exc, needle", [
    (lambda: gap_coefficients("gs", (1, 1), np.zeros(3), np.zeros((2, 2)), np.zeros((2, 2, 2))),
     CoefficientInputError, "shape"),
    (lambda: gap_coefficients("gs", (1, 1), np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2))),
     CoefficientInputError, "3 dimension"),
    (lambda: gap_coefficients("gs", (1, 1), np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2, 2)),
                              mode="quad"), CoefficientInputError, "mode"),
    (lambda: gap_coefficients(gauss_seidel(3), (1, 1), np.zeros(2), np.zeros((2, 2)), np.zeros((2,
    2, 2))), PatternError, "over 3 blocks"),
    (lambda: gap_coefficients("1<-1", (1, 1), np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2, 2))),
     PatternError, "self pairs"),
    (lambda: loss_coefficients("gs", (0, 1), np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1, 1))),
     CoefficientInputError, "positive"),
])
def test_bad_inputs_are_one_line_errors(call, exc, needle):
    with pytest.raises(exc) as info:
        call()
    assert needle in str(info.value) and "\n" not in str(info.value)
