"""Observed orders of the optimizer generalizations (beyond the paper): ``crosscurv scaling``'s
optimizer studies.

For a block-separable optimizer (:mod:`crosscurv.numeric.optimizers`) on a small float64 problem:
``one_step`` (``(L_S - L_JC) - eta^2 C_S^phi`` from a warm point and state, ``C_S^phi = g^T F J_phi
M_S F phi``; expected order 3), ``recursion`` / ``cumulative`` / ``jc_only`` (``gap - estimate`` at
``K = K0 2^k``, ``eta = eta0 2^-k``; expected 3 / 2 / 2) and ``recursion_fixed_K`` (at ``K = 8``;
expected 3). Gaps: :func:`.loss_gap.loss_gap`; floors as in :mod:`.studies`. These orders are
findings, not part of the command's exit code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from crosscurv.numeric.optimizer_estimates import optimizer_delay_curvature
from crosscurv.numeric.optimizers import OptimizerState, optimizer_scheme_step, parse_optimizer
from crosscurv.theory.patterns import DelayPattern, jacobi, parse_pattern

from .loss_gap import loss_gap, rounding_scale
from .study import N_POINTS, eta_grid, make_study, roundoff_floor

__all__ = ["OPTIMIZER_ROWS", "FACTORS", "FIXED_K", "OptimizerResult", "optimizer_problem",
           "one_step_errors", "trajectory_errors", "optimizer_studies", "optimizer_suite"]

#: Block step-size factors of every row (the problem has 3 blocks).
FACTORS = (1.0, 4.0, 0.5)
#: ``(optimizer, K0)`` of ``crosscurv scaling``: heavy ball at ``beta = 0.5`` with ``K0 = 8``, where
#: the grid is asymptotic (``beta = 0.9`` needs ``K >> 10``: ``python -m
#: crosscurv.experiments.studies.optimizers.orders``).
OPTIMIZER_ROWS = (("sgd", 4), ("momentum:0.5", 8), ("adam", 4))
#: The fixed ``K`` of ``recursion_fixed_K``.
FIXED_K = 8
#: Quantities of an optimizer row, in report order.
QUANTITIES = ("one_step", "recursion", "recursion_fixed_K", "cumulative", "jc_only")


def optimizer_problem():
    """The tanh MLP of the property tests (3-4-4-2, 3 blocks, float64) and its pattern ``gs``."""
    from ..problems import tanh_mlp_problem

    problem = tanh_mlp_problem(0, (3, 4, 4, 2), n_blocks=3)
    return problem, parse_pattern("gs", problem.task.n_blocks)


def _block_lr(task, factors) -> dict:
    return {b: f for b, f in zip(task.block_names, factors)}


def one_step_errors(task, pattern: DelayPattern, spec, factors, etas, warm_steps: int = 2):
    """``[(error, floor)]``: ``(L_S - L_JC) - eta^2 C_S^phi`` from a warm common point and state."""
    p, st = dict(task.params), OptimizerState()
    for _ in range(warm_steps):
        p, st, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), etas[0], spec, st, factors)
    c = optimizer_delay_curvature(task, p, pattern, spec, st, factors)
    scale0 = rounding_scale(task, p)
    out = []
    for eta in etas:
        s, _, _ = optimizer_scheme_step(task, p, pattern, eta, spec, st, factors)
        j, _, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), eta, spec, st, factors)
        gap = loss_gap(task, s, j)
        out.append((gap - eta * eta * c, roundoff_floor(abs(gap) + scale0, task.dtype)))
    return out, c


def _final_states(task, pattern, spec, factors, eta, K):
    jc = jacobi(task.n_blocks)
    tj = {k: v.detach() for k, v in task.params.items()}
    ts, sj, ss = dict(tj), OptimizerState(), OptimizerState()
    for _ in range(K):
        tj, sj, _ = optimizer_scheme_step(task, tj, jc, eta, spec, sj, factors)
        ts, ss, _ = optimizer_scheme_step(task, ts, pattern, eta, spec, ss, factors)
    return tj, ts


def trajectory_errors(task, pattern: DelayPattern, spec, factors, etas, k0: int = 4, fixed_K: int
                      | None = None):
    """``{estimate: [(error, floor)]}`` of the protocol with the optimizer at ``k = K`` for every
    ``eta``.

    ``K = k0 2^j`` (fixed horizon) or ``fixed_K``.
    """
    from crosscurv.numeric.protocol import run_protocol

    spec = parse_optimizer(spec)
    scale0 = rounding_scale(task, task.params)
    out = {"recursive": [], "cumulative": [], "jc_only": []}
    for j, eta in enumerate(etas):
        K = fixed_K or k0 * 2**j
        res = run_protocol(task, pattern, eta, K, optimizer=spec, block_lr=_block_lr(task, factors),
                           hvp_method="reverse")
        if res.status != "complete":
            raise RuntimeError(f"{task.name}: protocol {res.status} at eta={eta:g}: {res.message}")
        tj, ts = _final_states(task, pattern, spec, factors, eta, K)
        gap = loss_gap(task, ts, tj)
        rec = res.records[-1]
        for key in out:
            grow = 1.0 if key == "recursive" else math.sqrt(K)
            out[key].append((gap - rec[key], roundoff_floor(abs(gap) + grow * scale0, task.dtype)))
    return out


@dataclass
class OptimizerResult:
    """The studies of one optimizer row: ``{quantity: Study}`` (:data:`QUANTITIES`)."""

    spec: str
    k0: int
    eta0: float
    studies: dict
    info: dict = field(default_factory=dict)
    seconds: float = 0.0

    def orders(self) -> dict:
        return {q: (s.fitted if math.isfinite(s.fitted) else None) for q, s in self.studies.items()}


def optimizer_studies(spec: str, k0: int, *, n: int = N_POINTS, factors: Sequence[float] = FACTORS,
                      progress: Callable[[str], None] | None = None) -> OptimizerResult:
    """All :data:`QUANTITIES` for one optimizer on :func:`optimizer_problem` (module docstring)."""
    import time

    t0 = time.perf_counter()
    say = progress or (lambda m: None)
    problem, pattern = optimizer_problem()
    task = problem.task
    eta0 = problem.eta0(1.0 / 32) / max(factors)
    etas = eta_grid(eta0, n)
    label = f"{spec} (F = {', '.join(f'{f:g}' for f in factors)})"
    info = {"pattern": pattern.describe(), "eta0": eta0, "k0": k0, "factors": list(factors)}
    say(f"optimizer {spec}: one step")
    one, c = one_step_errors(task, pattern, spec, list(factors), etas)
    studies = {"one_step": make_study(label, "one_step", etas, [e for e, _ in one], [f for _,
                                                                                     f in one],
                                      info=dict(info, C_S=c))}
    say(f"optimizer {spec}: trajectories, T = {eta0 * k0:.3g}")
    tr = trajectory_errors(task, pattern, spec, list(factors), etas, k0=k0)
    say(f"optimizer {spec}: trajectories, K = {FIXED_K}")
    fk = trajectory_errors(task, pattern, spec, list(factors), etas, fixed_K=FIXED_K)
    for q, key, src, fixed in (("recursion", "recursive", tr, {"T": eta0 * k0}),
                               ("recursion_fixed_K", "recursive", fk, {"K": FIXED_K}),
                               ("cumulative", "cumulative", tr, {"T": eta0 * k0}),
                               ("jc_only", "jc_only", tr, {"T": eta0 * k0})):
        studies[q] = make_study(label, q, etas, [e for e, _ in src[key]], [f for _, f in src[key]],
                                fixed=fixed, info=info)
    return OptimizerResult(spec, k0, eta0, studies, info, time.perf_counter() - t0)


def optimizer_suite(rows=OPTIMIZER_ROWS, *, quick: bool = False, progress=None) -> list:
    """:func:`optimizer_studies` for every ``(optimizer, K0)`` of ``rows`` (``quick``: 4 grid
    points).
    """
    n = 4 if quick else N_POINTS
    return [optimizer_studies(spec, k0, n=n, progress=progress) for spec, k0 in rows]


def parse_rows(text: str | None):
    """``--optimizers``: ``none``, or ``;``-separated ``SPEC[@K0]``
    (``sgd;momentum:0.9@32;adam:0.9,0.99,1e-8``)."""
    from crosscurv.theory.errors import InputError

    if text is None:
        return OPTIMIZER_ROWS
    if text.strip() == "none":
        return ()
    rows = []
    for part in (p for p in text.split(";") if p.strip()):
        spec, _, k0 = part.strip().partition("@")
        parse_optimizer(spec)
        try:
            k = int(k0) if k0 else 4
        except ValueError:
            raise InputError(f"--optimizers: K0 in {part.strip()!r} must be an integer") from None
        if k < 1:
            raise InputError(f"--optimizers: K0 in {part.strip()!r} must be >= 1")
        rows.append((spec.strip(), k))
    if not rows:
        raise InputError(f"--optimizers: no optimizer in {text!r} (use none or SPEC[@K0];...)")
    return tuple(rows)
