"""The float64 error-scaling studies (paper: Theorem 1, Theorem 2, Theorem 3, Corollary 1).

* :func:`one_step_study`: ``r(eta) = (L_S - L_JC) - eta^2 C_S = c3 eta^3 + O(eta^4)`` from a
  common point (:func:`predicted_coefficients`); expected order 3.
* :func:`trajectory_studies`: at a fixed horizon ``T = eta K``, ``gap - recursive`` (Theorem 2,
  expected 3), ``gap - cumulative`` and ``gap - jc_only`` (Theorem 3, ``O(T eta^2)``, expected 2).
* :func:`order_invariance_study`: ``L_GS(order 1) - L_GS(order 2)``, ``O(eta^3)`` with
  coefficient ``c3(order 1) - c3(order 2)`` (Corollary 1); expected 3.

Loss differences: :func:`.loss_gap.loss_gap`; floors ``FLOOR_ULPS * eps * (|gap| + ||theta (*)
g||)`` (``sqrt(K)`` on the second term where the trajectories' rounding accumulates).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence


from crosscurv.numeric.steps import scheme_step
from crosscurv.theory.patterns import DelayPattern, gauss_seidel, jacobi

from ..problems import Problem
from ..problems.curvature_scale import DENSE_SCALE_MAX, dense_derivatives

from .loss_gap import loss_gap, rounding_scale
from .study import N_POINTS, Study, eta_grid, make_study, roundoff_floor


def predicted_coefficients(problem: Problem, pattern: DelayPattern, params=None) -> dict:
    """``{2: C_S, 3: c3}`` of the one-step gap at ``params`` (default ``theta^0``).

    Small problems (at most :data:`crosscurv.experiments.problems.DENSE_SCALE_MAX` parameters):
    :func:`crosscurv.theory.one_step.gap_coefficients` on dense float64 ``g, H, T``. Larger ones:
    the same closed form evaluated matrix-free
    (:func:`crosscurv.numeric.one_step.one_step_coefficients`: HVPs and nested ``jvp``).
    """
    task = problem.task
    if task.num_params() <= DENSE_SCALE_MAX:
        from crosscurv.theory.one_step import gap_coefficients

        g, H, T = dense_derivatives(task, params)
        return gap_coefficients(pattern, task.block_sizes(), g, H, T, mode="float")
    from crosscurv.numeric.one_step import one_step_coefficients

    return one_step_coefficients(task, task.params if params is None else params, pattern)


def _states(task, pattern: DelayPattern, eta: float, iters: int, keep: Sequence[int] = ()) -> dict:
    """``{k: (theta_JC^k, theta_S^k)}`` for ``k in keep`` and ``k = iters`` (exact steps, as the
    protocol takes them)."""
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


def one_step_study(problem: Problem, pattern: DelayPattern, *, n: int = N_POINTS,
                   factor: float = 1.0 / 16,
                   eta0: float | None = None, label: str | None = None, coefficients: dict
                   | None = None) -> Study:
    """Theorem 1's remainder ``r(eta) = (L_S - L_JC) - eta^2 C_S`` on the grid (module docstring).

    ``C_S`` and ``c3``: :func:`predicted_coefficients` (or ``coefficients``); the gap:
    :func:`loss_gap` of the two float64 steps; floor: :func:`roundoff_floor` of
    ``|gap| + ||theta^0 (*) g^0||``.
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
    return make_study(label or task.name, "one_step", etas, errors, floors, predicted=coef[3],
                      info={"pattern": pattern.describe(), "C_S": coef[2], "eta0": eta0,
                             "factor": factor})


def trajectory_studies(problem: Problem, pattern: DelayPattern, *, n: int = N_POINTS,
                       factor: float = 1.0 / 8,
                       k0: int = 4, eta0: float | None = None, hvp_method: str = "auto", label: str
                       | None = None,
                       progress: Callable[[str], None] | None = None) -> dict:
    """Theorems 2 and 3 at a fixed horizon ``T = eta0 k0`` (module docstring).

    For each ``eta_k = eta0 2^-k`` the protocol runs ``K = k0 2^k`` iterations in memory and the
    estimates are read at ``k = K``; the gap is recomputed by :func:`loss_gap` from the same float64
    iterates (:func:`_states`). Floors (:func:`roundoff_floor`): ``|gap| + ||theta^0 (*) g^0||`` for
    the recursion remainder, ``|gap| + sqrt(K) ||theta^0 (*) g^0||`` for the cumulative and JC-only
    errors (their per-step roundings accumulate like a random walk).

    Returns:
        ``{"recursion", "cumulative", "jc_only", "cumulative_vs_K"}`` -> :class:`Study`; the last
        holds the error at ``k = 1, 2, 4, ..., K`` of the smallest-``eta`` run, against ``K``.
    """
    from crosscurv.numeric.protocol import run_protocol

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
        q: make_study(name, q, etas, errs[q], floors["recursion" if q == "recursion"
                                                     else "cumulative"],
                      fixed={"T": horizon}, info=info)
        for q in ("recursion", "cumulative", "jc_only")
    }
    records, gaps = last
    ks = sorted(k for k in gaps)
    recs = {r["k"]: r for r in records}
    kerr = [gaps[k] - recs[k]["cumulative"] for k in ks]
    kfl = [roundoff_floor(abs(gaps[k]) + math.sqrt(k) * scale0, task.dtype) for k in ks]
    vs_k = make_study(name, "cumulative_vs_K", ks, kerr, kfl, variable="K", fixed={"eta": etas[
        -1]}, info=info)
    out["cumulative_vs_K"] = vs_k
    return out


def order_invariance_study(problem: Problem, order1: Sequence[int], order2: Sequence[int], *,
                           n: int = N_POINTS,
                           factor: float = 1.0 / 16, eta0: float | None = None, label: str
                           | None = None) -> Study:
    """``L_GS(order1) - L_GS(order2)`` after one step from ``theta^0`` (module docstring).

    ``info`` holds both ``C_S`` values and ``C_cross / 2`` (Corollary 1: all equal); the predicted
    ``eta^3`` coefficient is ``c3(order1) - c3(order2)``.
    """
    from crosscurv.numeric.curvature import cross_curvature_table

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
    return make_study(label or task.name, "order_invariance", etas, errors, floors, predicted=c1[3]
                      - c2[3], info=info)
