"""Error-scaling studies: observed orders of the paper's remainders (Taylor tests).

Every study evaluates an error on the step-size grid ``eta_k = eta0 * 2^-k``
(``k = 0..n-1``, ``n = 6`` by default), drops the points whose error lies at or
below the round-off floor (:func:`roundoff_floor`; they are listed, never
used), and reports the pairwise rates ``log2(e(eta_k) / e(eta_{k+1}))`` and
the least-squares order (:func:`numeric.orders.observe_order`).  ``eta0`` is
derived from the instance's curvature scale ``lam``
(:func:`experiments.problems.curvature_scale`): the largest power of two
with ``eta0 * lam <= factor``.

Studies (paper: Theorem 1, Theorem 2, Theorem 3, Corollary 1's update-order
argument):

* :func:`one_step_study`: ``r(eta) = (L_S^{k+1} - L_JC^{k+1}) - eta^2 C_S`` from a
  common point; theory: ``r = c3 eta^3 + O(eta^4)`` with ``c3`` from
  :func:`theory.one_step.gap_coefficients`; expected order 3.
* :func:`trajectory_studies`: JC and ``S`` trajectories to a fixed horizon
  ``T = eta K`` (``K = K0 2^k``, :func:`numeric.protocol.run_protocol`), at
  ``k = K``: the recursion remainder ``gap - recursive`` (Theorem 2, local,
  ``O(eta^3)``, expected 3), the cumulative error ``gap - cumulative``
  (Theorem 3, ``O(K eta^3) = O(T eta^2)``, expected 2) and the same for
  ``jc_only``; plus the cumulative error against ``K`` at the smallest ``eta``.
* :func:`order_invariance_study`: ``L_GS(order 1) - L_GS(order 2)`` from a
  common point; both orders have ``C_S = C_cross / 2``, so the difference is
  ``O(eta^3)`` with coefficient ``c3(order 1) - c3(order 2)``; expected 3.
* :func:`one_step_study_mp`: the one-step study for a quartic polynomial in
  ``mpmath`` at ``dps`` digits (exact steps), far below the float64 floor;
  :func:`protocol_mp` is the whole controlled protocol in ``mpmath`` (an
  independent reference for :mod:`numeric.protocol`).

Every loss difference is computed without cancellation (:func:`loss_gap`:
Gauss-Legendre quadrature of ``grad L . (a - b)`` along the segment), so its
round-off is relative to the gap instead of to ``|L|``; the floors are
``FLOOR_ULPS * eps * (|gap| + ||theta (*) g||)`` (with ``sqrt(K)`` on the second
term for errors that accumulate the trajectories' rounding).

:func:`scaling_suite` runs everything behind ``crosscurv scaling`` and
:func:`render_markdown` writes ``scaling.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from numeric.hvp import grad
from numeric.orders import OrderStudy, observe_order
from numeric.steps import scheme_step
from theory.patterns import DelayPattern, gauss_seidel, jacobi

from .problems import DENSE_SCALE_MAX, Problem, dense_derivatives

__all__ = [
    "FLOOR_ULPS",
    "N_POINTS",
    "TOLERANCE",
    "EXPECTED",
    "Study",
    "eta_grid",
    "roundoff_floor",
    "predicted_coefficients",
    "one_step_study",
    "trajectory_studies",
    "order_invariance_study",
    "one_step_study_mp",
    "protocol_mp",
    "loss_gap",
    "rounding_scale",
    "GAP_NODES",
    "OFFICIAL",
    "PROBLEMS",
    "ProblemResult",
    "scaling_suite",
    "render_markdown",
]

#: Round-off floor in units of the dtype's machine epsilon times the error's scale.
FLOOR_ULPS = 16
#: Grid points ``eta0 * 2^-k``, ``k = 0..N_POINTS-1``.
N_POINTS = 6
#: ``|p - expected| <= TOLERANCE`` for the fitted (least-squares) order ``p``.
TOLERANCE = 0.15
#: Expected order in ``eta`` of each studied error (``cumulative_vs_K``: order in ``K``).
EXPECTED = {
    "one_step": 3.0,
    "recursion": 3.0,
    "cumulative": 2.0,
    "jc_only": 2.0,
    "order_invariance": 3.0,
    "cumulative_vs_K": 1.0,
}

#: What each error is, for tables and figures.
DESCRIPTIONS = {
    "one_step": "one-step remainder (L_S - L_JC) - eta^2 C_S (Theorem 1)",
    "recursion": "recursion remainder gap - recursive at k = K, eta K = T (Theorem 2)",
    "cumulative": "cumulative error gap - cumulative at k = K, eta K = T (Theorem 3)",
    "jc_only": "JC-only cumulative error gap - jc_only at k = K, eta K = T",
    "order_invariance": "GS order difference L_GS(order 1) - L_GS(order 2) (Corollary 1)",
    "cumulative_vs_K": "cumulative error gap - cumulative against K at fixed eta (Theorem 3)",
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
        order: :class:`numeric.orders.OrderStudy` over the kept points.
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

        ``q(x) = error / x^p = c + c' x + ...``; ``2 q(x/2) - q(x)`` removes the
        ``c' x`` term (the grid halves ``x``).  ``None`` with fewer than 2 points.
        """
        e, r = self.order.etas, self.order.errors
        if len(e) < 2 or abs(e[-2] / e[-1] - 2.0) > 1e-12:
            return None
        q1, q2 = r[-2] / e[-2] ** self.expected, r[-1] / e[-1] ** self.expected
        return 2.0 * q2 - q1

    def within(self, tolerance: float | None = None) -> bool:
        """``|fitted - expected| <= tolerance`` (default :data:`TOLERANCE`; ``False`` when the order is undefined)."""
        tolerance = TOLERANCE if tolerance is None else tolerance
        p = self.fitted
        return math.isfinite(p) and abs(p - self.expected) <= tolerance

    # -- output ----------------------------------------------------------------
    def table(self, fmt: str = "github") -> str:
        """All points (dropped ones marked), rates, ``error/x^p``; then the order and coefficients."""
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
        head = [self.variable, "error", "floor", "rate", f"error/{self.variable}^{self.expected:g}", ""]
        text = tabulate(rows, headers=head, tablefmt=fmt, floatfmt=".4g", missingval="")
        lines = [text, ""]
        lines.append(
            f"least-squares order {self.fitted:.3f} (expected {self.expected:g}), "
            f"min pairwise rate {self.min_rate:.3f}, {len(kept)}/{len(self.points)} points above the floor"
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
                parts.append(f"relative difference {abs(ext - self.predicted) / abs(self.predicted):.2g}")
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


def _make_study(problem: str, quantity: str, xs, errors, floors, *, variable="eta", predicted=None,
                fixed=None, info=None) -> Study:
    points = [
        {"x": float(x), "error": float(e), "floor": float(f), "kept": bool(math.isfinite(e) and abs(e) > f)}
        for x, e, f in zip(xs, errors, floors)
    ]
    kx = [pt["x"] for pt in points if pt["kept"]]
    ke = [pt["error"] for pt in points if pt["kept"]]
    order = observe_order(kx, ke, expected=EXPECTED[quantity])
    order.dropped = [(pt["x"], pt["error"]) for pt in points if not pt["kept"]]
    order.floor = max((pt["floor"] for pt in points), default=0.0)
    return Study(problem, quantity, EXPECTED[quantity], variable, points, order, predicted,
                 dict(fixed or {}), dict(info or {}))


# ---------------------------------------------------------------------------
# theory's coefficients for a problem
# ---------------------------------------------------------------------------
def predicted_coefficients(problem: Problem, pattern: DelayPattern, params=None) -> dict:
    """``{2: C_S, 3: c3}`` of the one-step gap at ``params`` (default ``theta^0``).

    Small problems (at most :data:`experiments.problems.DENSE_SCALE_MAX`
    parameters): :func:`theory.one_step.gap_coefficients` on dense float64
    ``g, H, T``.  Larger ones: the same closed form evaluated matrix-free
    (:func:`numeric.one_step.one_step_coefficients`: HVPs and nested ``jvp``).
    """
    task = problem.task
    if task.num_params() <= DENSE_SCALE_MAX:
        from theory.one_step import gap_coefficients

        g, H, T = dense_derivatives(task, params)
        return gap_coefficients(pattern, task.block_sizes(), g, H, T, mode="float")
    from numeric.one_step import one_step_coefficients

    return one_step_coefficients(task, task.params if params is None else params, pattern)


#: Gauss-Legendre nodes of :func:`loss_gap` (exact when ``grad L`` is a polynomial of degree <= 7 along the segment).
GAP_NODES = 4


def loss_gap(task, theta_a, theta_b, nodes: int = GAP_NODES) -> float:
    """``L(theta_a) - L(theta_b)`` without the cancellation of subtracting two losses.

    ``L(a) - L(b) = int_0^1 grad L(b + t (a - b)) . (a - b) dt`` by ``nodes``-point
    Gauss-Legendre quadrature (float64 accumulation).  ``a - b`` is formed
    exactly when the two points are close (Sterbenz), so the result carries a
    round-off *relative to the gap*, not to ``|L|``: subtracting two losses of
    size ``|L|`` loses ``eps |L|`` (about ``5e-16`` for a cross-entropy near
    ``ln 10``), more than the ``O(eta^3)`` remainders at small ``eta``.  Exact for
    a quartic polynomial (``grad L`` is cubic along the segment); for a smooth
    loss the quadrature error is ``O((lam |a - b|)^(2 nodes))``.  Costs
    ``nodes`` gradients.
    """
    import numpy as np

    delta = {k: theta_a[k].detach() - theta_b[k].detach() for k in theta_b}
    xs, ws = np.polynomial.legendre.leggauss(nodes)
    total = 0.0
    for x, w in zip(xs, ws):
        t = 0.5 * (float(x) + 1.0)
        point = {k: theta_b[k].detach() + t * delta[k] for k in theta_b}
        _, g = grad(task.loss, point)
        total += 0.5 * float(w) * float(sum((g[k].to(torch.float64) * delta[k].to(torch.float64)).sum() for k in g))
    return total


def rounding_scale(task, params) -> float:
    """``||theta (*) g||`` (elementwise product): the loss change from rounding every coordinate of ``theta``.

    Rounding ``theta_i`` to float moves it by at most ``eps |theta_i| / 2`` with
    no preferred sign, so the loss moves by about ``eps ||theta (*) g||``.
    """
    _, g = grad(task.loss, params)
    return float(torch.sqrt(sum(((params[k].to(torch.float64) * g[k].to(torch.float64)) ** 2).sum() for k in g)))


def _states(task, pattern: DelayPattern, eta: float, iters: int, keep: Sequence[int] = ()) -> dict:
    """``{k: (theta_JC^k, theta_S^k)}`` for ``k in keep`` and ``k = iters`` (exact steps, as the protocol takes them)."""
    jc = jacobi(task.n_blocks)
    tj = {k: v.detach() for k, v in task.params.items()}
    ts = dict(tj)
    out = {}
    want = set(keep) | {iters}
    for k in range(1, iters + 1):
        tj = scheme_step(task, tj, jc, eta)
        ts = scheme_step(task, ts, pattern, eta)
        if k in want:
            out[k] = (tj, ts)
    return out


# ---------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------
def one_step_study(problem: Problem, pattern: DelayPattern, *, n: int = N_POINTS, factor: float = 1.0 / 16,
                   eta0: float | None = None, label: str | None = None, coefficients: dict | None = None) -> Study:
    """Theorem 1's remainder ``r(eta) = (L_S - L_JC) - eta^2 C_S`` on the grid (module docstring).

    ``C_S`` and the predicted ``c3`` come from :func:`predicted_coefficients`
    (or ``coefficients``).  The gap is :func:`loss_gap` between the two float64
    steps; floor: :func:`roundoff_floor` of ``|gap| + ||theta^0 (*) g^0||``
    (:func:`rounding_scale`: the rounding of the stepped parameters).
    """
    task = problem.task
    p0 = task.params
    coef = coefficients if coefficients is not None else predicted_coefficients(problem, pattern)
    eta0 = problem.eta0(factor) if eta0 is None else eta0
    etas = eta_grid(eta0, n)
    scale0 = rounding_scale(task, p0)
    jc = jacobi(task.n_blocks)
    errors, floors = [], []
    for eta in etas:
        gap = loss_gap(task, scheme_step(task, p0, pattern, eta), scheme_step(task, p0, jc, eta))
        errors.append(gap - eta * eta * coef[2])
        floors.append(roundoff_floor(abs(gap) + scale0, task.dtype))
    return _make_study(label or task.name, "one_step", etas, errors, floors, predicted=coef[3],
                       info={"pattern": pattern.describe(), "C_S": coef[2], "eta0": eta0, "factor": factor})


# ---------------------------------------------------------------------------
# trajectories
# ---------------------------------------------------------------------------
def trajectory_studies(problem: Problem, pattern: DelayPattern, *, n: int = N_POINTS, factor: float = 1.0 / 8,
                       k0: int = 4, eta0: float | None = None, hvp_method: str = "auto", label: str | None = None,
                       progress: Callable[[str], None] | None = None) -> dict:
    """Theorems 2 and 3 at a fixed horizon ``T = eta0 k0`` (module docstring).

    For each ``eta_k = eta0 2^-k`` the controlled protocol runs ``K = k0 2^k``
    iterations (:func:`numeric.protocol.run_protocol`, in memory) and the
    estimates are read at ``k = K``; the gap ``L(theta_S^K) - L(theta_JC^K)`` is
    recomputed without cancellation by :func:`loss_gap` from the same float64
    iterates (retraced by :func:`_states`, the protocol's exact steps).
    Floors (:func:`roundoff_floor`): for the recursion remainder
    ``|gap| + ||theta^0 (*) g^0||`` (the recursive estimate uses the *measured*
    ``Delta theta^{K-1}``, so only the rounding of the last step is
    unexplained); for the cumulative and JC-only errors
    ``|gap| + sqrt(K) ||theta^0 (*) g^0||`` (their states ignore the measured
    trajectories, whose independent per-step roundings accumulate like a
    random walk).  ``tests/properties`` checks the floors against exact
    ``mpmath`` trajectories of quartic polynomials.

    Returns:
        ``{"recursion", "cumulative", "jc_only", "cumulative_vs_K"}`` ->
        :class:`Study`; the last one holds the error at ``k = 1, 2, 4, ..., K``
        of the smallest-``eta`` run, against ``K``.
    """
    from numeric.protocol import run_protocol

    task = problem.task
    eta0 = problem.eta0(factor) if eta0 is None else eta0
    etas = eta_grid(eta0, n)
    horizon = eta0 * k0
    scale0 = rounding_scale(task, task.params)
    errs = {"recursion": [], "cumulative": [], "jc_only": []}
    floors = {"recursion": [], "cumulative": []}
    last = None
    for j, eta in enumerate(etas):
        K = k0 * 2**j
        if progress is not None:
            progress(f"trajectories eta={eta:.4g} K={K} ({j + 1}/{n})")
        res = run_protocol(task, pattern, eta, K, hvp_method=hvp_method)
        if res.status != "complete":
            raise RuntimeError(f"{task.name}: protocol {res.status} at eta={eta:g}: {res.message}")
        keep = [2**i for i in range(int(math.log2(K)) + 1)] if j == n - 1 else []
        states = _states(task, pattern, eta, K, keep)
        gaps = {k: loss_gap(task, ts, tj) for k, (tj, ts) in states.items()}
        rec = res.records[-1]
        gap = gaps[K]
        errs["recursion"].append(gap - rec["recursive"])
        errs["cumulative"].append(gap - rec["cumulative"])
        errs["jc_only"].append(gap - rec["jc_only"])
        floors["recursion"].append(roundoff_floor(abs(gap) + scale0, task.dtype))
        floors["cumulative"].append(roundoff_floor(abs(gap) + math.sqrt(K) * scale0, task.dtype))
        last = (res.records, gaps)
    name = label or task.name
    info = {"pattern": pattern.describe(), "eta0": eta0, "k0": k0, "T": horizon, "factor": factor}
    out = {
        q: _make_study(name, q, etas, errs[q], floors["recursion" if q == "recursion" else "cumulative"],
                       fixed={"T": horizon}, info=info)
        for q in ("recursion", "cumulative", "jc_only")
    }
    records, gaps = last
    ks = sorted(k for k in gaps)
    recs = {r["k"]: r for r in records}
    kerr = [gaps[k] - recs[k]["cumulative"] for k in ks]
    kfl = [roundoff_floor(abs(gaps[k]) + math.sqrt(k) * scale0, task.dtype) for k in ks]
    vs_k = _make_study(name, "cumulative_vs_K", ks, kerr, kfl, variable="K", fixed={"eta": etas[-1]}, info=info)
    out["cumulative_vs_K"] = vs_k
    return out


# ---------------------------------------------------------------------------
# GS order invariance
# ---------------------------------------------------------------------------
def order_invariance_study(problem: Problem, order1: Sequence[int], order2: Sequence[int], *, n: int = N_POINTS,
                           factor: float = 1.0 / 16, eta0: float | None = None, label: str | None = None) -> Study:
    """``L_GS(order1) - L_GS(order2)`` after one step from ``theta^0`` (module docstring).

    ``info`` holds both ``C_S`` values and ``C_cross / 2`` (Corollary 1: all
    equal); the predicted ``eta^3`` coefficient is ``c3(order1) - c3(order2)``.
    """
    from numeric.curvature import cross_curvature_table

    task = problem.task
    p0 = task.params
    gs1, gs2 = gauss_seidel(task.n_blocks, order1), gauss_seidel(task.n_blocks, order2)
    c1, c2 = predicted_coefficients(problem, gs1), predicted_coefficients(problem, gs2)
    table = cross_curvature_table(task, p0)
    eta0 = problem.eta0(factor) if eta0 is None else eta0
    etas = eta_grid(eta0, n)
    scale0 = rounding_scale(task, p0)
    errors, floors = [], []
    for eta in etas:
        gap = loss_gap(task, scheme_step(task, p0, gs1, eta), scheme_step(task, p0, gs2, eta))
        errors.append(gap)
        floors.append(roundoff_floor(abs(gap) + scale0, task.dtype))
    info = {
        "order1": [b + 1 for b in gs1.order()],
        "order2": [b + 1 for b in gs2.order()],
        "C_S_order1": c1[2],
        "C_S_order2": c2[2],
        "C_S_order1_numeric": table.C_S(gs1),
        "C_S_order2_numeric": table.C_S(gs2),
        "C_cross_half": table.C_cross / 2,
        "eta0": eta0,
        "factor": factor,
    }
    return _make_study(label or task.name, "order_invariance", etas, errors, floors, predicted=c1[3] - c2[3], info=info)


# ---------------------------------------------------------------------------
# the exact (mpmath) one-step study for polynomials
# ---------------------------------------------------------------------------
def one_step_study_mp(problem: Problem, pattern: DelayPattern, *, eta0: float, n: int = N_POINTS, dps: int = 50,
                      label: str | None = None) -> Study:
    """:func:`one_step_study` for a quartic polynomial, in ``mpmath`` at ``dps`` digits.

    Steps, losses, ``C_S`` and ``c3`` (:func:`theory.one_step.gap_coefficients`,
    ``mode="mpmath"``) are all computed at ``dps`` digits from the
    polynomial's float64 coefficients (exact in ``mpmath``), so ``eta0`` can lie
    far below the float64 floor.  Floor: ``2^(8 - prec) (|L_S| + |L_JC|)``.
    Errors in ``Study.points`` are rounded to float for the tables; the exact
    values are in ``info["errors_mp"]`` (strings) and the coefficients in
    ``info["C_S_mp"]``, ``info["c3_mp"]``.
    """
    import mpmath

    from theory.one_step import gap_coefficients

    poly = problem.poly
    if poly is None:
        raise ValueError(f"{problem.family} has no exact mpmath path (quartic polynomials only)")
    with mpmath.workdps(dps):
        g, H, T = poly.derivatives_mp()
        coef = gap_coefficients(pattern, poly.block_dims, g, H, T, mode="mpmath")
        jc = jacobi(poly.n_blocks)
        etas = eta_grid(eta0, n)
        errors, floors, exact = [], [], []
        for eta in etas:
            e = mpmath.mpf(eta)
            ls = poly.loss_mp(poly.scheme_step_mp(pattern, e))
            lj = poly.loss_mp(poly.scheme_step_mp(jc, e))
            r = (ls - lj) - e * e * coef[2]
            exact.append(r)
            errors.append(float(r))
            floors.append(float(mpmath.ldexp(abs(ls) + abs(lj), 8 - mpmath.mp.prec)))
        info = {
            "pattern": pattern.describe(),
            "dps": dps,
            "eta0": eta0,
            "errors_mp": [mpmath.nstr(r, dps) for r in exact],
            "C_S_mp": mpmath.nstr(coef[2], dps),
            "c3_mp": mpmath.nstr(coef[3], dps),
            "remainder_after_c3": [float(r - mpmath.mpf(x) ** 3 * coef[3]) for r, x in zip(exact, etas)],
        }
        c3 = float(coef[3])
    return _make_study(label or f"{problem.task.name} (mpmath {dps} digits)", "one_step", etas, errors, floors,
                       predicted=c3, info=info)


def protocol_mp(problem: Problem, pattern: DelayPattern, eta: float, iters: int, *, dps: int = 40) -> list:
    """The controlled protocol for a quartic polynomial, exactly, in ``mpmath`` (a reference).

    An independent implementation of the records of :func:`numeric.protocol.run_protocol`
    (paper, Section 4.2; docs/design.md) with dense ``mpmath`` Hessians: for
    ``k = 1..iters``, ``gap = L(theta_S^k) - L(theta_JC^k)``,

    * ``recursive^k = g_JC^k . [(I - eta H_JC^{k-1}) Delta^{k-1} + eta^2 M_S^{k-1} g_S^{k-1}]
      + 1/2 Delta^{k-1} . H_JC^{k-1} Delta^{k-1}`` (Theorem 2, measured ``Delta``);
    * ``cumulative^k = g_JC^k . z_k + 1/2 z_k . H_JC^k z_k`` with
      ``z_{j+1} = (I - eta H_JC^j) z_j + eta^2 M_S(theta_S^j) g_S^j``, ``z_0 = 0`` (Theorem 3);
    * ``jc_only^k``: the same with ``y`` forced by ``M_S(theta_JC^j) g_JC^j``.

    Returns:
        ``[{"k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only"}, ...]``
        with ``mpmath.mpf`` values (exact to about ``dps`` digits).
    """
    import mpmath

    poly = problem.poly
    if poly is None:
        raise ValueError(f"{problem.family} has no exact mpmath path (quartic polynomials only)")
    out = []
    with mpmath.workdps(dps):
        d = poly.d
        sl = poly.slices()
        owner = [0] * d
        for b, s_ in enumerate(sl):
            for a in range(s_.start, s_.stop):
                owner[a] = b
        mask = [[(owner[a], owner[c]) in pattern.pairs for c in range(d)] for a in range(d)]
        e = mpmath.mpf(eta)

        def matvec(H, v, masked=False):
            if masked:
                return [mpmath.fsum(H[a][c] * v[c] for c in range(d) if mask[a][c]) for a in range(d)]
            return [mpmath.fsum(H[a][c] * v[c] for c in range(d)) for a in range(d)]

        def dot(u, v):
            return mpmath.fsum(x * y for x, y in zip(u, v))

        xj = poly.x0_mp()
        xs = list(xj)
        z = [mpmath.mpf(0)] * d
        y = [mpmath.mpf(0)] * d
        pending = None  # (w, q): recursive^{k} = g_JC^k . w + q
        jc = jacobi(poly.n_blocks)
        for k in range(iters + 1):
            gj = poly.grad_mp(xj)
            Hj = poly.hessian_mp(xj)
            delta = [a - b for a, b in zip(xs, xj)]
            Hd, Hz, Hy = matvec(Hj, delta), matvec(Hj, z), matvec(Hj, y)
            if k >= 1:
                lj, ls = poly.loss_mp(xj), poly.loss_mp(xs)
                out.append({
                    "k": k,
                    "loss_jc": lj,
                    "loss_s": ls,
                    "gap": ls - lj,
                    "recursive": dot(gj, pending[0]) + pending[1],
                    "cumulative": dot(gj, z) + dot(z, Hz) / 2,
                    "jc_only": dot(gj, y) + dot(y, Hy) / 2,
                })
            if k == iters:
                break
            gs = poly.grad_mp(xs)
            u = matvec(poly.hessian_mp(xs), gs, masked=True)
            mj = matvec(Hj, gj, masked=True)
            pending = ([a - e * b + e * e * c for a, b, c in zip(delta, Hd, u)], dot(delta, Hd) / 2)
            z = [a - e * b + e * e * c for a, b, c in zip(z, Hz, u)]
            y = [a - e * b + e * e * c for a, b, c in zip(y, Hy, mj)]
            xs = poly.scheme_step_mp(pattern, e, xs)
            xj = poly.scheme_step_mp(jc, e, xj)
    return out


# ---------------------------------------------------------------------------
# the study behind ``crosscurv scaling``
# ---------------------------------------------------------------------------
#: The orders ``crosscurv scaling`` checks (and prints as JSON), with their expected values.
OFFICIAL = ("one_step", "recursion", "cumulative", "order_invariance")


@dataclass
class ProblemResult:
    """All studies of one problem of :func:`scaling_suite`.

    Attributes:
        key: ``"quartic"``, ``"mnist_mlp"`` or ``"bilinear"``.
        title: one line describing the problem.
        studies: ``{quantity: Study}`` (the :data:`OFFICIAL` ones, ``jc_only``,
            ``cumulative_vs_K`` and, for the MLP, ``one_step_apriori``).
        notes: sentences for the report (grid choices, tilts, findings).
        seconds: wall time of the problem's studies.
    """

    key: str
    title: str
    studies: dict
    notes: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    seconds: float = 0.0

    def orders(self) -> dict:
        """``{quantity: fitted order or None}`` for the :data:`OFFICIAL` quantities."""
        out = {}
        for q in OFFICIAL:
            p = self.studies[q].fitted
            out[q] = p if math.isfinite(p) else None
        return out

    def failures(self, tolerance: float | None = None) -> list[str]:
        """Official quantities whose fitted order is outside ``expected +- tolerance`` (or undefined)."""
        return [q for q in OFFICIAL if not self.studies[q].within(tolerance)]


def _note_guard(notes: list, what: str, guard, absolute: float = 1e-3) -> None:
    if guard.sigma:
        notes.append(
            f"{what}: the eta^3 coefficient failed the non-degeneracy guard (|coef| >= {guard.kappa} x the sum of "
            f"its terms' magnitudes and >= {absolute:g} lam^2 sum_i ||E_i g|| ||P_i g||), so the cubic tilt "
            f"sigma/6 (u.(theta - theta0))^3 with sigma = {guard.sigma:.4g} was added (g and H at theta0, hence "
            f"C_S, unchanged); coefficient now {guard.coefficient:.4g}"
            + ("." if guard.achieved else " (the capped tilt could not fully meet the guard).")
        )
    else:
        notes.append(f"{what}: eta^3 coefficient {guard.coefficient:.4g} passes the non-degeneracy guard; no tilt.")


def _quartic_result(quick: bool, say) -> ProblemResult:
    from theory.patterns import chain

    from .problems import guard_cubic, quartic_problem

    problem = quartic_problem(7, (2, 2, 2, 2))
    pattern = chain(4)
    notes = [
        "Random quartic polynomial (seed 7), 4 blocks of 2 coordinates, delay pattern chain "
        f"S = {pattern.describe()} (a partial pattern: each block uses only its predecessor's fresh value).",
        f"Curvature scale lam = {problem.scale:.4g} (||H|| + ||g|| ||D^3L[g^]|| + ||g|| ||D^4L[g^,g^]||^1/2).",
    ]
    studies = {}
    say("quartic: one-step")
    g1 = guard_cubic(problem, [(pattern, 1)])
    _note_guard(notes, "One-step", g1)
    studies["one_step"] = one_step_study(g1.problem, pattern, label="quartic")
    say("quartic: trajectories")
    g2 = guard_cubic(problem, [(pattern, 1)], local=True, absolute=1e-2)
    _note_guard(notes, "Trajectories (local coefficient l0 = c3 + g^T H M_S g)", g2, 1e-2)
    k0 = 4 if quick else 8
    studies.update(trajectory_studies(g2.problem, pattern, factor=1.0 / 16, k0=k0, hvp_method="reverse",
                                      label="quartic", progress=lambda m: say("quartic: " + m)))
    say("quartic: GS order invariance")
    o1, o2 = (0, 1, 2, 3), (3, 1, 0, 2)
    g3 = guard_cubic(problem, [(gauss_seidel(4, o1), 1), (gauss_seidel(4, o2), -1)])
    _note_guard(notes, "Order invariance", g3)
    studies["order_invariance"] = order_invariance_study(g3.problem, o1, o2, label="quartic")
    return ProblemResult("quartic", "random quartic polynomial, 4 blocks x 2 coordinates, chain pattern", studies,
                         notes, dict(problem.info))


def _bilinear_result(quick: bool, say) -> ProblemResult:
    from .problems import bilinear_problem

    problem = bilinear_problem(3, d_out=8, d_in=12, rank=4, n_examples=32)
    gs = gauss_seidel(2)
    notes = [
        "LoRA-like bilinear model 1/(2n) ||(W0 + (alpha/r) B A) X - Y||_F^2 with d_out = 8, d_in = 12, r = 4, "
        "alpha = 2, n = 32 seeded Gaussian examples (seed 3); blocks B then A; GS updates B first (S = {2<-1}). "
        "B starts small but non-zero: with LoRA's B = 0, g_A = 0 and every c_ij vanishes at the first step.",
        f"Curvature scale lam = {problem.scale:.4g}. No tilt: the model is used as it is.",
    ]
    studies = {}
    say("bilinear: one-step")
    studies["one_step"] = one_step_study(problem, gs, label="bilinear")
    say("bilinear: trajectories")
    studies.update(trajectory_studies(problem, gs, factor=1.0 / 16, k0=4 if quick else 8, hvp_method="reverse",
                                      label="bilinear", progress=lambda m: say("bilinear: " + m)))
    say("bilinear: GS order invariance")
    studies["order_invariance"] = order_invariance_study(problem, (0, 1), (1, 0), label="bilinear")
    return ProblemResult("bilinear", "LoRA-like bilinear model (B, A), 8 x 12, rank 4", studies, notes,
                         dict(problem.info))


def _mlp_result(quick: bool, say) -> ProblemResult:
    from .problems import mnist_mlp_problem, relu_kink_radius

    examples = 16 if quick else 64
    say(f"mnist_mlp: building the 8-layer MLP on {examples} MNIST digits (float64) and its curvature scale")
    problem = mnist_mlp_problem(0, examples=examples, scale_iters=8)
    task = problem.task
    gs = gauss_seidel(task.n_blocks)
    _, g = grad(task.loss, task.params)
    probe = 2.0**-14
    step_dir = {k: (v - task.params[k]) / probe for k, v in scheme_step(task, task.params, gs, probe).items()}
    radius = min(relu_kink_radius(problem, {k: -v for k, v in g.items()}), relu_kink_radius(problem, step_dir))
    eta_free = 2.0 ** math.floor(math.log2(radius))
    eta_prior = problem.eta0(1.0 / 16)
    notes = [
        f"The paper's 8-layer ReLU MLP 784-512-384-256-192-128-64-32-10 (Xavier-normal weights, zero biases, seed 0) "
        f"on {problem.info['examples']} real MNIST digits ({problem.info['data_source']}), softmax cross-entropy, "
        f"float64; one block per layer; GS from input to output. The number of examples is reduced from the "
        f"study's 256 to keep the scaling run within its time budget.",
        f"Curvature scale lam = {problem.scale:.4g}, so the a-priori grid starts at eta0 = {eta_prior:g} "
        f"(eta0 lam <= 1/16).",
        f"ReLU kinks: the loss is smooth only while no hidden pre-activation on any example changes sign. To first "
        f"order the first sign change along the JC and GS steps happens at eta = {radius:.3g} (min |z| / |z_dot| "
        f"over the {examples} x 1,568 hidden pre-activations; `experiments.problems.relu_kink_radius`). Theorems "
        f"1-3 assume a C^3 loss (Assumption 1), which the network is only inside that radius, so the official grids "
        f"start at the largest power of two below it, eta0 = {eta_free:g}; the trajectories run to T = eta0 "
        f"(K = 1, 2, ..., 32), which keeps the whole trajectory inside the radius.",
        f"Finding: on the a-priori grid (eta0 = {eta_prior:g}, {eta_prior / radius:.0f}x the kink radius) the "
        "one-step remainder is dominated by kink crossings: its pairwise rates are erratic and far from 3 and "
        "error/eta^3 is off by orders of magnitude (table 'one-step remainder on the a-priori grid'); the "
        "theory's O(eta^3) law with the predicted c3 holds only below the kink radius. The same holds for every "
        "quantity here: the paper's expansions describe a ReLU network only for steps that flip no unit.",
        "No tilt: the model is used as it is. Inside the kink radius the remainders are 1e-14 and smaller; a "
        "plain difference of two losses near ln 10 resolves only about 5e-16, so the gaps are computed without "
        "cancellation (`loss_gap`), and the points still below the floor are dropped (listed in each table).",
    ]
    studies = {}
    say("mnist_mlp: theory's coefficients (HVPs, nested jvp)")
    coef = predicted_coefficients(problem, gs)
    say("mnist_mlp: one-step (kink-free grid and a-priori grid)")
    studies["one_step"] = one_step_study(problem, gs, eta0=eta_free, label="mnist_mlp", coefficients=coef)
    ap = one_step_study(problem, gs, eta0=eta_prior, label="mnist_mlp", coefficients=coef)
    studies["one_step_apriori"] = ap
    say("mnist_mlp: trajectories (T = eta0, K = 1..32)")
    studies.update(trajectory_studies(problem, gs, eta0=eta_free, k0=1, label="mnist_mlp",
                                      progress=lambda m: say("mnist_mlp: " + m)))
    say("mnist_mlp: GS order invariance (input->output vs output->input)")
    order = tuple(range(task.n_blocks))
    studies["order_invariance"] = order_invariance_study(problem, order, tuple(reversed(order)), eta0=eta_free,
                                                         label="mnist_mlp")
    rec, cum = studies["recursion"], studies["cumulative"]
    notes.append(
        f"Inside the kink radius the trajectories are necessarily short (T = eta0 = {eta_free:g}) and their "
        f"errors tiny: only {rec.n_kept}/6 (recursion) and {cum.n_kept}/6 (cumulative) grid points lie above the "
        "round-off floor, so those fitted orders rest on that many points (the dropped points, listed in the "
        "tables, keep following the expected slope until they reach the round-off level; see the figures)."
    )
    info = dict(problem.info, kink_radius=radius, eta0_kink_free=eta_free, eta0_a_priori=eta_prior,
                pattern_name="full GS 1,2,...,8 (input to output)")
    return ProblemResult("mnist_mlp", f"8-layer ReLU MLP on {examples} MNIST digits, float64, GS over 8 layers",
                         studies, notes, info)


#: ``crosscurv scaling`` problems, in report order.
PROBLEMS = {"quartic": _quartic_result, "mnist_mlp": _mlp_result, "bilinear": _bilinear_result}


def scaling_suite(quick: bool = False, progress: Callable[[str], None] | None = None,
                  problems: Sequence[str] | None = None) -> list:
    """Run the studies of ``crosscurv scaling`` on (a) a random quartic, (b) the MNIST MLP, (c) the bilinear model.

    Args:
        quick: fewer MNIST examples and shorter horizons.
        progress: called with one line per stage.
        problems: keys of :data:`PROBLEMS` to run (default all), run in report order.

    Returns:
        ``[ProblemResult, ...]``.
    """
    import time

    say = progress or (lambda m: None)
    chosen = list(PROBLEMS) if problems is None else [k for k in PROBLEMS if k in set(problems)]
    out = []
    for build in (PROBLEMS[k] for k in chosen):
        t0 = time.perf_counter()
        res = build(quick, say)
        res.seconds = time.perf_counter() - t0
        say(f"{res.key}: done in {res.seconds:.1f} s; orders " + ", ".join(
            f"{q} {p:.3f}" if p is not None else f"{q} n/a" for q, p in res.orders().items()))
        out.append(res)
    return out


_TITLES = {
    "one_step": "One-step remainder (Theorem 1)",
    "one_step_apriori": "One-step remainder on the a-priori grid (ReLU kinks crossed)",
    "recursion": "Recursion remainder at fixed T (Theorem 2)",
    "cumulative": "Cumulative error at fixed T (Theorem 3)",
    "jc_only": "JC-only cumulative error at fixed T",
    "cumulative_vs_K": "Cumulative error against K at the smallest eta (Theorem 3)",
    "order_invariance": "GS order difference (Corollary 1)",
}
_SECTIONS = ("one_step", "one_step_apriori", "recursion", "cumulative", "jc_only", "cumulative_vs_K", "order_invariance")


def _fmt_order(study: Study, official: bool) -> str:
    p = study.fitted
    kept = f" ({study.n_kept}/{len(study.points)} pts)"
    if not math.isfinite(p):
        return "n/a" + kept + (" **outside**" if official else "")
    mark = ""
    if official:
        mark = " ok" if study.within() else " **outside**"
    return f"{p:.3f}{mark}{kept}"


def render_markdown(results: Sequence, *, quick: bool, seconds: float, figures: Sequence[str] = ()) -> str:
    """``scaling.md``: method, summary of fitted orders, then every table with its notes."""
    import platform
    import time as _time

    lines = [
        "# Error-scaling study",
        "",
        f"Generated by `crosscurv scaling{' --quick' if quick else ''}` on "
        f"{_time.strftime('%Y-%m-%d %H:%M %Z')} ({platform.platform()}, {platform.processor() or 'cpu'}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads); run time {seconds:.0f} s."
        + (" Quick mode: fewer MNIST examples and shorter horizons." if quick else ""),
        "",
        "## What is measured",
        "",
        "Every error is evaluated on the grid `eta0 * 2^-k`, `k = 0..5`. Points whose error is at or below the "
        f"round-off floor (`{FLOOR_ULPS} eps x scale`, see below) are dropped and listed, never used. For the points "
        "kept the tables give the pairwise rates `log2(e(eta)/e(eta/2))`, the least-squares order (the *fitted "
        "order*) and `error/eta^p`; where theory gives the leading coefficient it is compared with the measured "
        "`error/eta^p` at the smallest `eta` and with its Richardson extrapolation `2 q(eta/2) - q(eta)`.",
        "",
        "* **one-step**: `r(eta) = (L_S - L_JC) - eta^2 C_S` after one step from a common point; theory "
        "(Theorem 1 and `theory.one_step`): `r = c3 eta^3 + O(eta^4)`, "
        "`c3 = -g^T (M_S + H) M_S g - 1/2 sum_i T[E_i g, P_i g, P_i g]`. Expected order 3.",
        "* **recursion**: `gap - recursive` at `k = K` with `eta K = T` fixed (`K = K0 2^k`): Theorem 2's local "
        "remainder, expected order 3.",
        "* **cumulative** / **JC-only**: `gap - cumulative` (Theorem 3) and `gap - jc_only` at `k = K`, `eta K = T`: "
        "`O(K eta^3) = O(T eta^2)`, expected order 2. Also the cumulative error against `K` at the smallest `eta` "
        "(grows about linearly while `K eta` is small).",
        "* **order invariance**: `L_GS(order 1) - L_GS(order 2)` after one step: both orders have "
        "`C_S = C_cross/2`, so the difference is `O(eta^3)` with coefficient `c3(order 1) - c3(order 2)`. "
        "Expected order 3.",
        "",
        "Gaps are computed without cancellation: `L(a) - L(b) = int_0^1 grad L(b + t(a-b)).(a-b) dt` by 4-point "
        "Gauss-Legendre quadrature (`experiments.scaling.loss_gap`), so their round-off is relative to the gap, "
        "not to `|L|`. Floors: `16 eps (|gap| + ||theta0 (*) g0||)` (the second term: rounding every coordinate of "
        "the stepped parameters), with `sqrt(K) ||theta0 (*) g0||` for the cumulative errors whose states ignore the "
        "measured trajectories; `tests/properties` checks these floors against exact `mpmath` computations on "
        "quartic polynomials. `eta0` is the largest power of two with `eta0 lam <= factor` for the problem's "
        "curvature scale `lam = ||H|| + ||g|| ||D^3L[g^]|| + ||g|| ||D^4L[g^,g^]||^1/2` unless a note says otherwise.",
        "",
        f"Tolerance (exit code 1 when violated): `|p - 3| <= {TOLERANCE}` for one-step, recursion and order "
        f"invariance, `|p - 2| <= {TOLERANCE}` for cumulative, `p` the fitted order.",
        "",
        "## Summary of fitted orders",
        "",
        "| problem | one-step (3) | recursion (3) | cumulative (2) | order invariance (3) | JC-only (2) | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        s = res.studies
        lines.append(
            f"| {res.key} | {_fmt_order(s['one_step'], True)} | {_fmt_order(s['recursion'], True)} | "
            f"{_fmt_order(s['cumulative'], True)} | {_fmt_order(s['order_invariance'], True)} | "
            f"{_fmt_order(s['jc_only'], False)} | {res.seconds:.0f} s |"
        )
    bad = [(r.key, q) for r in results for q in r.failures()]
    lines += [
        "",
        ("All orders are within tolerance." if not bad else
         "Outside tolerance: " + ", ".join(f"{k} {q}" for k, q in bad) + " (see the notes of that problem)."),
        "",
    ]
    if figures:
        lines += ["Figures: " + ", ".join(f"[{_basename(f)}]({f})" for f in figures), ""]
    for res in results:
        lines += [f"## {res.key}: {res.title}", ""]
        lines += [f"* {n}" for n in res.notes]
        lines.append("")
        for q in _SECTIONS:
            st = res.studies.get(q)
            if st is None:
                continue
            fixed = ", ".join(f"{k} = {v:.4g}" for k, v in st.fixed.items())
            head = f"### {res.key}: {_TITLES[q]}"
            lines += [head, ""]
            extra = []
            if fixed:
                extra.append(f"fixed {fixed}")
            for key in ("pattern", "order1", "order2", "k0", "factor", "eta0"):
                if key in st.info:
                    val = st.info[key]
                    if key == "pattern" and len(str(val)) > 60:
                        val = res.info.get("pattern_name", str(val)[:57] + "...}")
                    extra.append(f"{key} {val:g}" if isinstance(val, float) else f"{key} {val}")
            if "C_S_order1" in st.info:
                extra.append(
                    f"C_S(order 1) = {st.info['C_S_order1']:.10g}, C_S(order 2) = {st.info['C_S_order2']:.10g}, "
                    f"C_cross/2 = {st.info['C_cross_half']:.10g}"
                )
            if "C_S" in st.info:
                extra.append(f"C_S = {st.info['C_S']:.10g}")
            if extra:
                lines += ["_" + "; ".join(str(e) for e in extra) + "_", ""]
            lines += [st.table(), ""]
    return "\n".join(lines) + "\n"


def _basename(path: str) -> str:
    return str(path).rsplit("/", 1)[-1]
