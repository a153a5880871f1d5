"""Truncated power series in the paper's small parameters (``eta``, and ``eps``).

    s = sum_{(a, b)} c_{ab} eta^a eps^b,      a + b <= max_degree,

stored as ``{(a, b): c_ab}`` with coefficients in a commutative ring (``theory`` uses canonical
sparse polynomials over QQ, so ``c == 0`` is an exact zero test). Monomials of total degree ``>
max_degree`` form an ideal, so every kept coefficient of a sum or product is exact. Importing this
module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import sympy

__all__ = ["ETA", "EPS", "SeriesSpace", "TruncatedSeries"]

#: step size ``eta`` of the paper
ETA = sympy.Symbol("eta", positive=True)
#: scale of the trajectory difference, ``Delta theta^k = eps * delta`` (Lemma 3)
EPS = sympy.Symbol("epsilon")


@dataclass(frozen=True)
class SeriesSpace:
    """Where a truncated series lives: its ``variables`` (``(ETA,)`` or ``(ETA, EPS)``),
    ``max_degree`` (monomials of higher total degree are dropped) and the ring's ``zero``.
    """

    variables: tuple
    max_degree: int
    zero: object = 0

    @property
    def nvars(self) -> int:
        return len(self.variables)

    def keeps(self, exps: tuple) -> bool:
        """``True`` iff the monomial ``exps`` survives truncation."""
        return sum(exps) <= self.max_degree

    def constant(self, c) -> "TruncatedSeries":
        """The series ``c`` (degree 0)."""
        return TruncatedSeries(self, {(0,) * self.nvars: c})

    def monomial(self, exps: Iterable[int], c=1) -> "TruncatedSeries":
        """The series ``c * prod v_k^{exps_k}``."""
        exps = tuple(int(e) for e in exps)
        if len(exps) != self.nvars:
            raise ValueError(f"monomial needs {self.nvars} exponents, got {exps}")
        return TruncatedSeries(self, {exps: c})

    def variable(self, index: int = 0, c=1) -> "TruncatedSeries":
        """The series ``c * variables[index]``."""
        exps = [0] * self.nvars
        exps[index] = 1
        return self.monomial(exps, c)

    def zero_series(self) -> "TruncatedSeries":
        return TruncatedSeries(self, {})


def _is_zero(c) -> bool:
    return c == 0


class TruncatedSeries:
    """A truncated multivariate power series with ring coefficients: ``+``, ``-`` and ``*`` with a
    series of the same :class:`SeriesSpace` or a coefficient; ``terms``: ``{exponents:
    coefficient}`` holding exactly the monomials present (no zero coefficient is stored).
    """

    __slots__ = ("space", "terms")

    def __init__(self, space: SeriesSpace, terms: Mapping[tuple, object]):
        self.space = space
        self.terms = {e: c for e, c in terms.items() if space.keeps(e) and not _is_zero(c)}

    # -- arithmetic --------------------------------------------------------
    def _coerce(self, other) -> "TruncatedSeries":
        if isinstance(other, TruncatedSeries):
            if other.space != self.space:
                raise ValueError("series from different spaces")
            return other
        return self.space.constant(other)

    def __add__(self, other):
        other = self._coerce(other)
        out = dict(self.terms)
        for e, c in other.terms.items():
            out[e] = out[e] + c if e in out else c
        return TruncatedSeries(self.space, out)

    __radd__ = __add__

    def __neg__(self):
        return TruncatedSeries(self.space, {e: -c for e, c in self.terms.items()})

    def __sub__(self, other):
        return self + (-self._coerce(other))

    def __rsub__(self, other):
        return self._coerce(other) - self

    def __mul__(self, other):
        if not isinstance(other, TruncatedSeries):
            if _is_zero(other):
                return TruncatedSeries(self.space, {})
            return TruncatedSeries(self.space, {e: c * other for e, c in self.terms.items()})
        other = self._coerce(other)
        top = self.space.max_degree
        out: dict = {}
        b_items = [(e, sum(e), c) for e, c in other.terms.items()]
        for ea, ca in self.terms.items():
            da = sum(ea)
            for eb, db, cb in b_items:
                if da + db > top:
                    continue
                e = tuple(x + y for x, y in zip(ea, eb))
                p = ca * cb
                out[e] = out[e] + p if e in out else p
        return TruncatedSeries(self.space, out)

    def __rmul__(self, other):
        return self * other

    # -- queries -----------------------------------------------------------
    def coeff(self, *exps: int):
        """Coefficient of ``prod v_k^{exps_k}`` (the ring's zero if absent)."""
        return self.terms.get(tuple(exps), self.space.zero)

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def monomials(self) -> list[tuple]:
        """Exponent tuples present, sorted by total degree then lexicographically."""
        return sorted(self.terms, key=lambda e: (sum(e), e))

    def min_degree(self) -> int | None:
        """Lowest total degree present, ``None`` for the zero series."""
        return min((sum(e) for e in self.terms), default=None)

    def truncate(self, degree: int) -> "TruncatedSeries":
        """Drop monomials of total degree ``> degree`` (same space)."""
        return TruncatedSeries(self.space, {e: c for e, c in self.terms.items() if sum(e)
                                            <= degree})

    def map(self, f: Callable) -> "TruncatedSeries":
        """Apply ``f`` to every coefficient."""
        return TruncatedSeries(self.space, {e: f(c) for e, c in self.terms.items()})

    def as_expr(self, to_expr: Callable | None = None) -> sympy.Expr:
        """The series as a SymPy expression ``sum c * eta^a * eps^b``, each coefficient through
        ``to_expr`` (default ``c.as_expr()``, else ``sympify(c)``).
        """
        if to_expr is None:
            to_expr = lambda c: c.as_expr() if hasattr(c, "as_expr") else sympy.sympify(c)  # noqa: E731
        out = sympy.S.Zero
        for e in self.monomials():
            mono = sympy.Mul(*[v**k for v, k in zip(self.space.variables, e)])
            out += to_expr(self.terms[e]) * mono
        return out

    def __eq__(self, other) -> bool:
        if not isinstance(other, TruncatedSeries):
            other = self.space.constant(other)
        return self.space == other.space and self.terms == other.terms

    __hash__ = None

    def __repr__(self) -> str:
        if not self.terms:
            return "TruncatedSeries(0)"
        names = [str(v) for v in self.space.variables]
        parts = []
        for e in self.monomials():
            mono = "*".join(f"{n}^{k}" if k > 1 else n for n, k in zip(names, e) if k) or "1"
            parts.append(f"({self.terms[e]})*{mono}")
        return "TruncatedSeries(" + " + ".join(parts) + f" + O(deg>{self.space.max_degree}))"
