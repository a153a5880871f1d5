"""Observed orders of convergence (pyadjoint's Taylor-test style).

With step sizes ``eta_k`` (decreasing) and errors ``r(eta_k)``, the pairwise rate is

    rate_k = log(|r(eta_k)| / |r(eta_{k+1})|) / log(eta_k / eta_{k+1}),

and the fitted order the least-squares slope of ``log|r|`` against ``log eta``.  Points whose
error lies below a round-off floor are dropped (and reported), never tolerated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["OrderStudy", "pairwise_rates", "fitted_order", "observe_order"]


def pairwise_rates(etas: Sequence[float], errors: Sequence[float]) -> list[float]:
    """Rates between neighbouring points (``len(etas) - 1`` values)."""
    out = []
    for (e0, r0), (e1, r1) in zip(zip(etas, errors), zip(etas[1:], errors[1:])):
        r0, r1 = abs(float(r0)), abs(float(r1))
        if r0 == 0.0 or r1 == 0.0:
            out.append(float("nan"))
        else:
            out.append(math.log(r0 / r1) / math.log(float(e0) / float(e1)))
    return out


def fitted_order(etas: Sequence[float], errors: Sequence[float]) -> float:
    """Least-squares slope of ``log|r|`` on ``log eta`` (nan with fewer than 2 usable points)."""
    pts = [(math.log(float(e)), math.log(abs(float(r)))) for e, r in zip(etas, errors) if float(r)
           != 0.0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    return sxy / sxx


@dataclass
class OrderStudy:
    """Errors on a step-size grid: the kept ``etas``, ``errors`` (largest ``eta`` first), their
    pairwise ``rates`` and ``slope``, the ``dropped`` ``(eta, error)`` pairs at or below ``floor``,
    and ``coefficients = error / eta^p`` for an expected order ``p``.
    """

    etas: list
    errors: list
    rates: list
    slope: float
    dropped: list = field(default_factory=list)
    floor: float = 0.0
    expected: float | None = None
    coefficients: list = field(default_factory=list)

    @property
    def min_rate(self) -> float:
        finite = [r for r in self.rates if math.isfinite(r)]
        return min(finite) if finite else float("nan")

    def rows(self) -> list[list]:
        """Table rows ``[eta, error, rate to next, error/eta^p]``."""
        rows = []
        for i, (e, r) in enumerate(zip(self.etas, self.errors)):
            rate = self.rates[i] if i < len(self.rates) else None
            coef = self.coefficients[i] if self.coefficients else None
            rows.append([e, r, rate, coef])
        return rows

    def table(self, fmt: str = "github") -> str:
        """The error table (tabulate), dropped points listed below it."""
        from tabulate import tabulate

        head = ["eta", "error", "rate", f"error/eta^{self.expected:g}" if self.expected
                else "error/eta^p"]
        text = tabulate(self.rows(), headers=head, tablefmt=fmt, floatfmt=".4g", missingval="")
        text += f"\nleast-squares order {self.slope:.4f}, min pairwise rate {self.min_rate:.4f}"
        if self.dropped:
            text += "\ndropped below floor %.3g: " % self.floor + ", ".join(
                f"eta={e:.3g} (|r|={abs(r):.3g})" for e, r in self.dropped
            )
        return text


def observe_order(
    etas: Sequence[float],
    errors: Sequence[float],
    *,
    floor: float = 0.0,
    expected: float | None = None,
) -> OrderStudy:
    """:class:`OrderStudy` of ``errors`` (magnitudes) on ``etas`` (decreasing), points with
    ``|error| <= floor`` dropped; ``expected`` fills ``coefficients``.
    """
    if len(etas) != len(errors):
        raise ValueError("etas and errors differ in length")
    kept, dropped = [], []
    for e, r in zip(etas, errors):
        r = float(r)
        (dropped if (not math.isfinite(r) or abs(r) <= floor) else kept).append((float(e), r))
    ke = [e for e, _ in kept]
    kr = [r for _, r in kept]
    coeffs = [r / e**expected for e, r in kept] if expected is not None else []
    return OrderStudy(ke, kr, pairwise_rates(ke, kr), fitted_order(ke, kr), dropped, floor,
                      expected, coeffs)
