"""The result type of an error-scaling study: errors on a step-size grid and their observed order.

Every study evaluates an error on the step-size grid ``eta_k = eta0 * 2^-k`` (``k = 0..n-1``, ``n =
6`` by default, :func:`eta_grid`), drops the points whose error lies at or below the round-off floor
(:func:`roundoff_floor`; they are listed, never used), and reports the pairwise rates
``log2(e(eta_k) / e(eta_{k+1}))`` and the least-squares order
(:func:`crosscurv.numeric.orders.observe_order`) in a :class:`Study` (:func:`make_study`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from crosscurv.numeric.orders import OrderStudy, observe_order


#: Round-off floor in units of the dtype's machine epsilon times the error's scale.
FLOOR_ULPS = 16


#: Grid points ``eta0 * 2^-k``, ``k = 0..N_POINTS-1``.
N_POINTS = 6


#: ``|p - expected| <= TOLERANCE`` for the fitted (least-squares) order ``p``.
TOLERANCE = 0.15


#: The outcome of a study whose order is undefined: fewer than two grid points lie above the
#: round-off floor (and, on a ReLU network, below its kink radius), so no order can be fitted. A
#: finding, neither a pass nor a failure (``crosscurv scaling`` exits 3 when it is the only one).
NO_WINDOW = "no point in the asymptotic window"


#: Expected order in ``eta`` of each studied error (``cumulative_vs_K``: order in ``K``).
EXPECTED = {
    "one_step": 3.0,
    "recursion": 3.0,
    "recursion_fixed_K": 3.0,
    "cumulative": 2.0,
    "jc_only": 2.0,
    "order_invariance": 3.0,
    "cumulative_vs_K": 1.0,
}


def eta_grid(eta0: float, n: int = N_POINTS) -> list[float]:
    """``[eta0 * 2^-k for k = 0..n-1]`` (exact in binary floating point)."""
    return [float(eta0) * 2.0**-k for k in range(n)]


def roundoff_floor(scale: float, dtype=torch.float64, ulps: float = FLOOR_ULPS) -> float:
    """``ulps * eps(dtype) * scale``: errors at or below it are round-off, not signal.

    ``scale`` bounds the magnitudes that round-off acts on: for a difference
    of losses ``|L_1| + |L_2| + ||theta|| ||g||`` (each loss is rounded at its
    own size; a rounding of ``theta`` of relative size ``eps`` moves ``L`` by up
    to ``eps ||theta|| ||g||``).  ``tests/properties`` checks the floor against
    the exact (``mpmath``) errors of quartic polynomials.
    """
    return float(ulps) * float(torch.finfo(dtype).eps) * float(scale)


@dataclass
class Study:
    """One error on one grid: the points, the observed order and the leading coefficient.

    Attributes:
        problem: problem label.
        quantity: key of :data:`EXPECTED` (``"one_step"``, ...).
        expected: theoretical order ``p``.
        variable: ``"eta"`` or ``"K"``.
        points: ``[{"x": eta or K, "error": e, "floor": f, "kept": bool}, ...]``.
        order: :class:`crosscurv.numeric.orders.OrderStudy` over the kept points.
        predicted: leading coefficient from theory (``error ~ predicted * x^p``),
            ``None`` where theory gives none.
        fixed: what is held fixed (``{"T": ...}``, ``{"eta": ...}``).
        info: anything else worth printing (pattern, orders, ``C_S`` values...).
    """

    problem: str
    quantity: str
    expected: float
    variable: str
    points: list
    order: OrderStudy
    predicted: float | None = None
    fixed: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    # -- derived numbers -------------------------------------------------------
    @property
    def fitted(self) -> float:
        """Least-squares order over the kept points (``nan`` with fewer than 2)."""
        return self.order.slope

    @property
    def min_rate(self) -> float:
        return self.order.min_rate

    @property
    def n_kept(self) -> int:
        return len(self.order.etas)

    @property
    def measured(self) -> float | None:
        """``error / x^p`` at the smallest kept ``x`` (``None`` if nothing is kept)."""
        if not self.order.etas:
            return None
        return self.order.errors[-1] / self.order.etas[-1] ** self.expected

    @property
    def extrapolated(self) -> float | None:
        """Richardson estimate of the leading coefficient from the two smallest kept points.

        ``q(x) = error / x^p = c + c' x + ...``; ``2 q(x/2) - q(x)`` removes the ``c' x`` term (the
        grid halves ``x``). ``None`` with fewer than 2 points.
        """
        e, r = self.order.etas, self.order.errors
        if len(e) < 2 or abs(e[-2] / e[-1] - 2.0) > 1e-12:
            return None
        q1, q2 = r[-2] / e[-2] ** self.expected, r[-1] / e[-1] ** self.expected
        return 2.0 * q2 - q1

    @property
    def determined(self) -> bool:
        """Whether an order was fitted (at least two points above the floor)."""
        return math.isfinite(self.fitted)

    def within(self, tolerance: float | None = None) -> bool:
        """``|fitted - expected| <= tolerance`` (default :data:`TOLERANCE`; ``False`` when the order
        is undefined)."""
        tolerance = TOLERANCE if tolerance is None else tolerance
        p = self.fitted
        return math.isfinite(p) and abs(p - self.expected) <= tolerance

    def outcome(self, tolerance: float | None = None) -> str:
        """``"ok"`` (fitted order within ``tolerance``), ``"outside"`` (fitted and outside) or
        :data:`NO_WINDOW` (no order: fewer than two points above the floor)."""
        if not self.determined:
            return NO_WINDOW
        return "ok" if self.within(tolerance) else "outside"

    # -- output ----------------------------------------------------------------
    def table(self, fmt: str = "github") -> str:
        """All points (dropped ones marked), rates, ``error/x^p``; then the order and coefficients.
        """
        from tabulate import tabulate

        kept = [pt for pt in self.points if pt["kept"]]
        rates = self.order.rates
        rows, j = [], 0
        for pt in self.points:
            x, e = pt["x"], pt["error"]
            if pt["kept"]:
                rate = rates[j] if j < len(rates) else None
                j += 1
                coef = e / x**self.expected
                rows.append([x, e, pt["floor"], rate, coef, ""])
            else:
                rows.append([x, e, pt["floor"], None, None, "dropped (below floor)"])
        head = [self.variable, "error", "floor", "rate", f"error/{self.variable}^{self.expected:g}",
                ""]
        text = tabulate(rows, headers=head, tablefmt=fmt, floatfmt=".4g", missingval="")
        lines = [text, ""]
        lines.append(
            f"least-squares order {self.fitted:.3f} (expected {self.expected:g}), min pairwise "
            f"rate {self.min_rate:.3f}, {len(kept)}/{len(self.points)} points above the floor"
        )
        if self.predicted is not None:
            meas = self.measured
            ext = self.extrapolated
            parts = [f"leading coefficient: predicted {self.predicted:.6g}"]
            if meas is not None:
                parts.append(f"measured {meas:.6g} at the smallest {self.variable}")
            if ext is not None:
                parts.append(f"Richardson-extrapolated {ext:.6g}")
            if ext is not None and self.predicted != 0:
                parts.append("relative difference "
                             f"{abs(ext - self.predicted) / abs(self.predicted):.2g}")
            lines.append(", ".join(parts))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "problem": self.problem,
            "quantity": self.quantity,
            "expected": self.expected,
            "variable": self.variable,
            "fitted": self.fitted,
            "min_rate": self.min_rate,
            "rates": list(self.order.rates),
            "points": [dict(pt) for pt in self.points],
            "predicted": self.predicted,
            "measured": self.measured,
            "extrapolated": self.extrapolated,
            "fixed": dict(self.fixed),
            "info": dict(self.info),
        }


def make_study(problem: str, quantity: str, xs, errors, floors, *, variable="eta", predicted=None,
               fixed=None, info=None) -> Study:
    """A :class:`Study` of ``errors`` at ``xs`` with their round-off ``floors``.

    Points with ``|error| <= floor`` (or a non-finite error) are kept in the
    study but dropped from the fit; the order is fitted against
    :data:`EXPECTED` of ``quantity``.
    """
    points = [
        {"x": float(x), "error": float(e), "floor": float(f), "kept": bool(math.isfinite(e) and abs(
        e) > f)}
        for x, e, f in zip(xs, errors, floors)
    ]
    kx = [pt["x"] for pt in points if pt["kept"]]
    ke = [pt["error"] for pt in points if pt["kept"]]
    order = observe_order(kx, ke, expected=EXPECTED[quantity])
    order.dropped = [(pt["x"], pt["error"]) for pt in points if not pt["kept"]]
    order.floor = max((pt["floor"] for pt in points), default=0.0)
    return Study(problem, quantity, EXPECTED[quantity], variable, points, order, predicted,
                 dict(fixed or {}), dict(info or {}))
