"""Lemma 3 (trajectory recursion) and Theorem 2 (loss recursion), exactly, with Delta theta = eps
delta."""

from __future__ import annotations

import pytest
import sympy

from tests.theory.cases import all_cases
from crosscurv.theory.block_model import ModelError
from crosscurv.theory.patterns import chain, gauss_seidel, jacobi, partial
from crosscurv.theory.recursion import (check_recursions, lemma3_allowed, recursion_model,
                                        theorem2_allowed)

CASES = all_cases(all_gs_orders=True)
_MODELS: dict = {}


def model(n, dims=1):
    if (n, dims) not in _MODELS:
        _MODELS[(n, dims)] = recursion_model(n, dims)
    return _MODELS[(n, dims)]


def test_allowed_monomials():
    assert lemma3_allowed(1, 2) and lemma3_allowed(3, 0) and lemma3_allowed(2, 2)
    assert not any(lemma3_allowed(a, b) for a, b in [(0, 3), (1, 1), (2, 1), (2, 0), (1, 0)])
    assert theorem2_allowed(0, 3) and theorem2_allowed(2, 1)
    assert not any(theorem2_allowed(a, b) for a, b in [(0, 2), (1, 1), (2, 0)])


def _independent_leading(m, p, rec):
    """Leading coefficients against formulas written here with plain SymPy sums."""
    d = m.d
    delta = m.vector_symbols["delta"]
    T = lambda a, b, c: m.T_symbols[tuple(sorted((a, b, c)))]  # noqa: E731
    H = lambda a, b: m.H_symbols[tuple(sorted((a, b)))]  # noqa: E731
    g = m.g_symbols
    mask = p.mask()
    fresh = lambda a, b: mask[m.block_of[a]][m.block_of[b]]  # noqa: E731
    Mg = [sum(H(a, b) * g[b] for b in range(d) if fresh(a, b)) for a in range(d)]
    MMg = [sum(H(a, b) * Mg[b] for b in range(d) if fresh(a, b)) for a in range(d)]
    t = [sympy.Rational(1, 2) * sum(T(a, b, c) * g[b] * g[c] for b in range(d) for c in range(d)
                                    if fresh(a, b) and fresh(a, c)) for a in range(d)]
    for a in range(d):
        r = rec.trajectory_remainder[a]
        tdd = sum(T(a, b, c) * delta[b] * delta[c] for b in range(d) for c in range(d))
        assert sympy.expand(m.to_expr(r.coeff(1, 2)) + tdd / 2) == 0          # -1/2 T[delta, delta]
        assert sympy.expand(m.to_expr(r.coeff(3, 0)) + MMg[a] + t[a]) == 0   # -(M_S^2 g + t)
    R = rec.loss_remainder
    tddd = sum(T(a, b, c) * delta[a] * delta[b] * delta[c] for a in range(d) for b in range(d)
               for c in range(d))
    # cubic Taylor term of L(eps delta)
    assert sympy.expand(m.to_expr(R.coeff(0, 3)) - tddd / 6) == 0
    gMMg_gt = sum(g[a] * (MMg[a] + t[a]) for a in range(d))
    assert sympy.expand(m.to_expr(R.coeff(3, 0)) + gMMg_gt) == 0              # -g^T (M_S^2 g + t)


@pytest.mark.parametrize("n, p", CASES)
def test_lemma3_and_theorem2(n, p):
    m = model(n)
    rec = check_recursions(m, p)
    assert rec.lemma3, rec.lemma3_offending
    assert rec.theorem2, rec.theorem2_offending
    # nothing forbidden, and the remainders are not trivially zero
    assert all(lemma3_allowed(*e) for s in rec.trajectory_remainder for e in s.terms)
    assert all(theorem2_allowed(*e) for e in rec.loss_remainder.terms)
    assert (1, 2) in rec.trajectory_leading
    assert min(sum(e) for e in rec.loss_remainder.terms) == 3
    assert all(rec.closed_forms.values())
    # independent SymPy check on one GS order per N (all orders: ring check above)
    if not p.name.startswith("gs:"):
        _independent_leading(m, p, rec)


@pytest.mark.parametrize("n, p", [(2, gauss_seidel(2)), (2, jacobi(2)), (3, chain(3)), (3, partial(
    3, [(2, 0)]))],
                         ids=["N2-gs", "N2-jc", "N3-chain", "N3-partial"])
def test_lemma3_and_theorem2_dims2(n, p):
    m = model(n, 2)
    rec = check_recursions(m, p)
    assert rec.lemma3 and rec.theorem2
    _independent_leading(m, p, rec)


def test_eta3_trajectory_term_is_present_for_gs():
    rec = check_recursions(model(3), gauss_seidel(3))
    assert (3, 0) in rec.trajectory_leading and (1, 2) in rec.trajectory_leading
    assert not all(c == 0 for c in rec.trajectory_leading[(3, 0)])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_freshness_at_theta_jc_breaks_lemma3_structure(n):
    """Negative control: M_S g evaluated at theta_JC leaves an eta^2 eps monomial (forbidden)."""
    rec = check_recursions(model(n), gauss_seidel(n), freshness_at="JC")
    assert not rec.lemma3 and (2, 1) in rec.lemma3_offending
    assert rec.theorem2  # still total degree >= 3
    # JC has no forcing, so nothing changes there
    assert check_recursions(model(n), jacobi(n), freshness_at="JC").lemma3


def test_recursion_needs_the_quartic_model():
    from crosscurv.theory.block_model import BlockModel

    with pytest.raises(ModelError):
        check_recursions(BlockModel(2, 1, 3), gauss_seidel(2))
    with pytest.raises(ModelError):
        check_recursions(model(2), gauss_seidel(2), freshness_at="xx")
