"""crosscurv.theory.series: truncated power series arithmetic against SymPy's own expansion."""

from __future__ import annotations

import pytest
import sympy

from crosscurv.theory.series import EPS, ETA, SeriesSpace

a, b, c = sympy.symbols("a b c")


def _truncate_expr(expr, variables, degree):
    """Reference truncation of a polynomial expression by total degree in ``variables``."""
    poly = sympy.Poly(sympy.expand(expr), *variables)
    out = 0
    for monom, coeff in poly.terms():
        if sum(monom) <= degree:
            out += coeff * sympy.Mul(*[v**k for v, k in zip(variables, monom)])
    return sympy.expand(out)


def test_single_variable_product_matches_expand():
    sp = SeriesSpace((ETA,), 3)
    x = sp.constant(a) + sp.variable(0, b) + sp.monomial((2,), c)      # a + b eta + c eta^2
    y = sp.constant(1) - sp.variable(0, a)                             # 1 - a eta
    z = x * y * x
    ref = _truncate_expr((a + b * ETA + c * ETA**2) ** 2 * (1 - a * ETA), [ETA], 3)
    assert sympy.expand(z.as_expr() - ref) == 0
    assert z.coeff(0) == a**2
    assert sympy.expand(z.coeff(3) - ref.coeff(ETA, 3)) == 0
    assert z.min_degree() == 0 and max(sum(e) for e in z.terms) == 3


def test_two_variable_truncation_is_by_total_degree():
    sp = SeriesSpace((ETA, EPS), 4)
    eta, eps = sp.variable(0), sp.variable(1)
    s = (eta + eps * a + 1) * (eta * eps - eps * eps * b)
    s = s * s
    ref = _truncate_expr(((ETA + EPS * a + 1) * (ETA * EPS - EPS**2 * b)) ** 2, [ETA, EPS], 4)
    assert sympy.expand(s.as_expr() - ref) == 0
    assert all(sum(e) <= 4 for e in s.terms)
    assert s.coeff(2, 2) == 1  # (eta eps)^2
    assert s.coeff(0, 5) == 0  # truncated away (degree 5)


def test_zero_coefficients_are_not_stored_and_subtraction_cancels():
    sp = SeriesSpace((ETA,), 2)
    x = sp.constant(a) + sp.variable(0, b)
    assert (x - x).is_zero and (x - x).terms == {}
    assert (x - x).min_degree() is None
    assert (x * 0).is_zero
    assert x == sp.constant(a) + sp.variable(0, b)
    assert not (x == sp.constant(a))


def test_scalars_mix_with_series():
    sp = SeriesSpace((ETA,), 2)
    x = sp.variable(0, 1)
    y = 2 + x
    z = 3 * y - 1
    assert z.coeff(0) == 5 and z.coeff(1) == 3
    w = 1 - x
    assert w.coeff(0) == 1 and w.coeff(1) == -1


def test_truncate_and_map():
    sp = SeriesSpace((ETA,), 3)
    x = sp.constant(1) + sp.variable(0, a) + sp.monomial((3,), b)
    assert x.truncate(1).coeff(3) == 0 and x.truncate(1).coeff(1) == a
    assert x.map(lambda v: 2 * v).coeff(3) == 2 * b


def test_mixing_spaces_is_refused():
    s1 = SeriesSpace((ETA,), 2).variable(0)
    s2 = SeriesSpace((ETA,), 3).variable(0)
    with pytest.raises(ValueError):
        s1 + s2
    with pytest.raises(ValueError):
        SeriesSpace((ETA,), 2).monomial((1, 1))
