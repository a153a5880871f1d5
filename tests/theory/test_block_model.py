"""crosscurv.theory.block_model: generic symbols, symmetry, and the Taylor model's derivatives."""

from __future__ import annotations

import random

import pytest
import sympy

from crosscurv.theory.block_model import BlockModel, ModelError
from crosscurv.theory.errors import InputError
from crosscurv.theory.series import ETA, SeriesSpace


def test_symbol_counts_and_names():
    m = BlockModel(4, 1, taylor_order=4, vectors=("delta",))
    assert m.d == 4
    assert len(m.g_symbols) == 4 and len(m.H_symbols) == 10 and len(m.T_symbols) == 20 and len(
        m.Q_symbols) == 35
    assert len(m.symbols) == 4 + 10 + 20 + 35 + 4
    assert [str(s) for s in m.g_symbols] == ["g1", "g2", "g3", "g4"]
    assert str(m.H_symbols[(0, 1)]) == "H12" and sympy.latex(m.H_symbols[(0, 1)]) == "H_{12}"
    assert str(m.T_symbols[(0, 1, 2)]) == "T123"
    assert str(m.vector_symbols["delta"][0]) == "delta1"
    assert not any(isinstance(s, sympy.MatrixSymbol) for s in m.symbols)
    assert len(set(m.symbols)) == len(m.symbols)


def test_block_dims_two_and_mixed():
    m = BlockModel(2, 2)
    assert m.d == 4 and m.blocks == ((0, 1), (2, 3)) and m.block_of == (0, 0, 1, 1)
    assert str(m.g_symbols[1]) == "g_1b" and sympy.latex(m.H_symbols[(1, 2)]) == "H_{1b2a}"
    mixed = BlockModel(3, (1, 3, 2))
    assert mixed.d == 6 and mixed.blocks == ((0,), (1, 2, 3), (4, 5))
    assert len(set(mixed.symbols)) == len(mixed.symbols)


def test_hessian_and_tensors_are_symmetric():
    m = BlockModel(3, 1, taylor_order=4)
    for a in range(3):
        for b in range(3):
            assert m.H[a][b] == m.H[b][a]
    assert m.T(0, 1, 2) == m.T(2, 0, 1) == m.T(1, 2, 0)
    assert m.Q(0, 1, 1, 2) == m.Q(2, 1, 0, 1)
    assert m.T(0, 0, 1) != m.T(0, 1, 1)


@pytest.mark.parametrize("n, dims, order", [(2, 1, 3), (3, 1, 4), (2, 2, 4), (3, 1, 2)])
def test_gradient_hessian_loss_are_derivatives_of_the_taylor_model(n, dims, order):
    """Series from the ring machinery == SymPy ``diff`` of the explicit Taylor polynomial."""
    m = BlockModel(n, dims, taylor_order=order)
    rng = random.Random(7)
    sp = SeriesSpace((ETA,), 3, m.zero)
    r1 = [sympy.Rational(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(m.d)]
    r2 = [sympy.Rational(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(m.d)]
    state = [sp.variable(0, m.const(r1[a])) + sp.monomial((2,), m.const(r2[a])) for a in range(m.d)]
    xs = sympy.symbols(f"x0:{m.d}", real=True)
    sub = {xs[a]: r1[a] * ETA + r2[a] * ETA**2 for a in range(m.d)}

    def trunc(expr, k):
        return sympy.expand(sympy.expand(expr).coeff(ETA, k))

    L = m.loss_expr
    loss = m.loss(state)
    grad = m.gradient(state)
    hess = m.hessian(state, entries=[(0, m.d - 1), (1, 1)])
    for k in range(4):
        assert sympy.expand(m.to_expr(loss.coeff(k)) - trunc(L.xreplace(sub), k)) == 0
        for a in range(m.d):
            ref = sympy.diff(L, xs[a]).xreplace(sub)
            assert sympy.expand(m.to_expr(grad[a].coeff(k)) - trunc(ref, k)) == 0
        for (a, b), h in hess.items():
            ref = sympy.diff(L, xs[a], xs[b]).xreplace(sub)
            assert sympy.expand(m.to_expr(h.coeff(k)) - trunc(ref, k)) == 0


def test_from_expr_round_trip():
    m = BlockModel(2, 1)
    e = m.g_symbols[0] * m.H_symbols[(0, 1)] - sympy.Rational(1, 3) * m.T_symbols[(0, 0, 1)]
    assert sympy.expand(m.to_expr(m.from_expr(e)) - e) == 0


@pytest.mark.parametrize("args, needle", [
    ((1,), "at least 2 blocks"),
    ((0,), "at least 2 blocks"),
    ((2, 0), "positive integers"),
    ((2, (1,)), "positive integers"),
    ((2, 1, 5), "taylor_order"),
])
def test_bad_model_requests(args, needle):
    with pytest.raises(ModelError) as exc:
        BlockModel(*args)
    assert needle in str(exc.value)
    assert isinstance(exc.value, InputError)
