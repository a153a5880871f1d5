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
  ``mpmath`` at ``dps`` digits (exact steps), far below the float64 floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from numeric import tree
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

    def within(self, tolerance: float = TOLERANCE) -> bool:
        """``|fitted - expected| <= tolerance`` (``False`` when the order is undefined)."""
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


def _loss(task, params) -> float:
    with torch.no_grad():
        return float(task.loss(params))


def _theta_g(task, params) -> tuple[float, float]:
    _, g = grad(task.loss, params)
    return float(tree.norm(params)), float(tree.norm(g))


# ---------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------
def one_step_study(problem: Problem, pattern: DelayPattern, *, n: int = N_POINTS, factor: float = 1.0 / 16,
                   eta0: float | None = None, label: str | None = None, coefficients: dict | None = None) -> Study:
    """Theorem 1's remainder ``r(eta) = (L_S - L_JC) - eta^2 C_S`` on the grid (module docstring).

    ``C_S`` and the predicted ``c3`` come from :func:`predicted_coefficients`
    (or ``coefficients``).  Floor: :func:`roundoff_floor` of
    ``|L_S| + |L_JC| + ||theta^0|| ||g^0||``.
    """
    task = problem.task
    p0 = task.params
    coef = coefficients if coefficients is not None else predicted_coefficients(problem, pattern)
    eta0 = problem.eta0(factor) if eta0 is None else eta0
    etas = eta_grid(eta0, n)
    tn, gn = _theta_g(task, p0)
    jc = jacobi(task.n_blocks)
    errors, floors = [], []
    for eta in etas:
        ls = _loss(task, scheme_step(task, p0, pattern, eta))
        lj = _loss(task, scheme_step(task, p0, jc, eta))
        errors.append((ls - lj) - eta * eta * coef[2])
        floors.append(roundoff_floor(abs(ls) + abs(lj) + tn * gn, task.dtype))
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
    errors are read at ``k = K``.  Floors (:func:`roundoff_floor`): for the
    recursion remainder ``|L_S^K| + |L_JC^K| + ||theta^0|| ||g^0||`` (the
    recursive estimate uses the *measured* ``Delta theta^{K-1}``, so only the
    rounding of the last step is unexplained); for the cumulative and JC-only
    errors ``|L_S^K| + |L_JC^K| + K ||theta^0|| ||g^0||`` (their states ignore
    the measured trajectories, whose rounding accumulates over ``K`` steps).

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
    tn, gn = _theta_g(task, task.params)
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
        rec = res.records[-1]
        errs["recursion"].append(rec["gap"] - rec["recursive"])
        errs["cumulative"].append(rec["gap"] - rec["cumulative"])
        errs["jc_only"].append(rec["gap"] - rec["jc_only"])
        losses = abs(rec["loss_s"]) + abs(rec["loss_jc"])
        floors["recursion"].append(roundoff_floor(losses + tn * gn, task.dtype))
        floors["cumulative"].append(roundoff_floor(losses + K * tn * gn, task.dtype))
        last = res.records
    name = label or task.name
    info = {"pattern": pattern.describe(), "eta0": eta0, "k0": k0, "T": horizon, "factor": factor}
    out = {
        q: _make_study(name, q, etas, errs[q], floors["recursion" if q == "recursion" else "cumulative"],
                       fixed={"T": horizon}, info=info)
        for q in ("recursion", "cumulative", "jc_only")
    }
    ks = [2**i for i in range(int(math.log2(len(last))) + 1)]
    recs = {r["k"]: r for r in last}
    kerr = [recs[k]["gap"] - recs[k]["cumulative"] for k in ks]
    kfl = [roundoff_floor(abs(recs[k]["loss_s"]) + abs(recs[k]["loss_jc"]) + k * tn * gn, task.dtype) for k in ks]
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
    tn, gn = _theta_g(task, p0)
    errors, floors = [], []
    for eta in etas:
        l1 = _loss(task, scheme_step(task, p0, gs1, eta))
        l2 = _loss(task, scheme_step(task, p0, gs2, eta))
        errors.append(l1 - l2)
        floors.append(roundoff_floor(abs(l1) + abs(l2) + tn * gn, task.dtype))
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
    (paper, Section 4.2; DESIGN.md) with dense ``mpmath`` Hessians: for
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
