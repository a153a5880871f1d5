"""Generalized Theorem 1 for block-separable optimizers (crosscurv.theory.optimizers.one_step),
checked exactly."""

from __future__ import annotations

import pytest
import sympy

from crosscurv.theory._linalg import dot
from crosscurv.theory.one_step import masked_hessian_apply
from crosscurv.theory.optimizers.one_step import (check_adam_one_step, check_optimizer_one_step,
                                                  optimizer_delay_curvature, optimizer_gap_series)
from crosscurv.theory.optimizers import (OPTIMIZER_KINDS, adam_direction, adam_jacobian,
                                         optimizer_model)
from crosscurv.theory.patterns import parse_pattern


@pytest.mark.parametrize("kind", OPTIMIZER_KINDS)
@pytest.mark.parametrize("dims,pattern", [(1, "gs"), (1, "2<-1,3<-1"), (1, "chain:3,1,2"), (2,
                                                                                            "gs")])
def test_gap_is_eta2_times_generalized_delay_curvature(kind, dims, pattern):
    c = check_optimizer_one_step(kind, 3, dims, pattern)
    assert c.low_orders_vanish, c.gap
    assert c.eta2_closed_form, (c.gap.coeff(2), c.C_S)
    assert c.eta2_instance
    assert c.reduces_to_paper
    assert c.holds


def test_jc_against_itself_has_no_gap():
    opt = optimizer_model(3, 1, "generic")
    assert optimizer_gap_series(opt, parse_pattern("jc", 3)).is_zero


def _transpose_variant(opt, pattern):
    """``g^T F J^T M_S F phi``: J on the wrong side (should NOT match)."""
    m = opt.model
    w = masked_hessian_apply(m, pattern, opt.scale(opt.phi()))
    jt = [sum((opt.jacobian(b, a) * w[b] for b in m.blocks[m.block_of[a]]), m.zero) for a in range(
        m.d)]
    return dot(m.g, opt.scale(jt)) + m.zero


def _single_factor_variant(opt, pattern):
    """``g^T J M_S F phi``: the block's own factor forgotten (should NOT match)."""
    m = opt.model
    w = masked_hessian_apply(m, pattern, opt.scale(opt.phi()))
    return dot(m.g, opt.jacobian_apply(w)) + m.zero


@pytest.mark.parametrize("kind", ["generic", "preconditioner"])
def test_the_check_tells_the_side_of_the_jacobian(kind):
    opt = optimizer_model(2, 2, kind)
    pattern = parse_pattern("gs", 2)
    gap2 = optimizer_gap_series(opt, pattern).coeff(2)
    assert gap2 == optimizer_delay_curvature(opt, pattern)
    assert gap2 != _transpose_variant(opt, pattern)


def test_per_block_factors_enter_twice():
    opt = optimizer_model(3, 1, "sgd")
    pattern = parse_pattern("gs", 3)
    gap2 = optimizer_gap_series(opt, pattern).coeff(2)
    assert gap2 != _single_factor_variant(opt, pattern)
    m = opt.model
    f = [m.to_expr(x) for x in opt.factors]
    g = m.g_symbols
    H = lambda a, b: m.H_symbols[tuple(sorted((a, b)))]  # noqa: E731
    expected = sum(f[i] * f[j] * g[i] * H(i, j) * g[j] for i, j in pattern.pairs)
    assert sympy.expand(m.to_expr(gap2) - expected) == 0


def test_momentum_instance_uses_the_buffer():
    opt = optimizer_model(2, 1, "momentum", step_factors=False)
    pattern = parse_pattern("2<-1", 2)
    m = opt.model
    gap2 = m.to_expr(optimizer_gap_series(opt, pattern).coeff(2))
    g1, g2 = m.g_symbols
    beta = m.extra_symbols["beta"]
    m1, _ = m.vector_symbols["m"]
    H12 = m.H_symbols[(0, 1)]
    # g^T M_S (g + beta m) for S = {(2,1)}: g2 H21 (g1 + beta m1)
    assert sympy.expand(gap2 - g2 * H12 * (g1 + beta * m1)) == 0


def test_adam_jacobian_is_the_derivative():
    gam, m, v, b1, b2, eps, c1, c2 = sympy.symbols("gamma m v b1 b2 eps c1 c2", positive=True)
    phi = adam_direction(gam, m, v, b1, b2, eps, c1, c2)
    assert sympy.simplify(sympy.diff(phi, gam) - adam_jacobian(gam, m, v, b1, b2, eps, c1, c2)) == 0


@pytest.mark.parametrize("n,pattern", [(2, "gs"), (3, "3<-1")])
def test_adam_gap_is_eta2_times_its_delay_curvature(n, pattern):
    c = check_adam_one_step(n, pattern)
    assert c.eta1 == 0
    assert c.jacobian_matches
    assert c.holds, sympy.simplify(c.eta2 - c.C_S)


def test_adam_check_rejects_a_wrong_side():
    """The Adam check is not vacuous: the eta^2 coefficient differs from J_j g_i H_ij phi_j."""
    c = check_adam_one_step(2, "2<-1")
    b1, b2 = sympy.symbols("beta1 beta2", positive=True)
    eps, c1, c2 = sympy.symbols("epsilon_adam c1 c2", positive=True)
    m1, m2 = sympy.symbols("m1:3", real=True)
    v1, v2 = sympy.symbols("v1:3", positive=True)
    f1, f2 = sympy.symbols("f1:3", positive=True)
    g1, g2, H12 = sympy.symbols("g1 g2 H12", real=True)
    wrong = f1 * f2 * adam_jacobian(g1, m1, v1, b1, b2, eps, c1, c2) * g2 * H12 * adam_direction(
        g1, m1, v1, b1, b2, eps, c1, c2)
    vals = {b1: sympy.Rational(9, 10), b2: sympy.Rational(99, 100), eps: sympy.Rational(1, 10**3),
            c1: sympy.Rational(1, 2),
            c2: sympy.Rational(1, 3), m1: 1, m2: -2, v1: 2, v2: 3, f1: 1, f2: 4, g1: sympy.Rational(
            1, 2), g2: 3, H12: 5}
    assert sympy.N((c.eta2 - c.C_S).subs(vals)) == 0
    assert abs(sympy.N((c.eta2 - wrong).subs(vals))) > 1e-6
