"""The paper's estimates for block-separable optimizers, matrix-free (beyond the paper).

With ``F`` the block step-size factors and ``phi`` the optimizer's direction
(:mod:`crosscurv.numeric.optimizers`; :mod:`crosscurv.theory.optimizers` for the symbolic side):

* one step from a common point and state (:func:`optimizer_delay_curvature`):
  ``L_S - L_JC = eta^2 C_S^phi + O(eta^3)``, ``C_S^phi = g^T F J_phi M_S F phi``
  (``crosscurv.theory.optimizers.one_step``); ``n_F`` HVPs (``M_S`` of one vector).
* the tangent step (:func:`tangent_step`): one step of the linearized
  difference between the ``S`` and JC runs, in the parameters ``z`` and the
  optimizer state ``zs``.  With the gradient difference
  ``dg = H_JC z - eta M_S F phi_S`` (``M_S`` at ``theta_S``, ``phi_S`` the ``S``
  run's direction at its own gradient):

  - ``sgd``: ``z' = z - eta F dg``  (the paper's ``(I - eta H) z + eta^2 M_S g_S`` for ``F = I``);
  - ``momentum``: ``zm' = beta zm + dg``, ``z' = z - eta F zm'`` (``zm`` the buffer difference);
  - ``adam``: ``zm' = b1 zm + (1 - b1) dg``, ``zv' = b2 zv + 2 (1 - b2) g_JC (*) dg``,
    ``z' = z - eta F (a_m (*) zm' + a_v (*) zv')`` with ``a_m = 1/(c1 D)``,
    ``a_v = -(m'/c1) / (2 c2 r D^2)`` (``d phi / d m'``, ``d phi / d v'`` at the JC
    run's new moments, ``r = sqrt(v'/c2)``, ``D = r + eps``).

  The recursive estimate (Theorem 2 generalized) is one tangent step from the
  *measured* differences ``(Delta theta^k, Delta s^k)``:
  ``g_JC^{k+1} . z' + 1/2 Delta theta^k . H_JC^k Delta theta^k``; the cumulative
  estimate (Theorem 3 generalized) iterates the tangent step from ``z = zs = 0``
  and reads ``g_JC^K . z_K + 1/2 z_K . H_JC^K z_K``; ``jc_only`` forces it with
  ``M_S`` and ``phi`` from the JC run.  For ``sgd`` and ``momentum`` these are
  the recursions derived and checked exactly in ``crosscurv.theory.optimizers.recursion``
  / ``crosscurv.theory.optimizers.cumulative``; for Adam they are the same linearization,
  checked only numerically (``tests/properties``).

Cost per iteration: one HVP for ``H_JC z`` (and one for ``H_JC Delta theta``), ``n_F`` for ``M_S F
phi_S``; never a dense Hessian.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from crosscurv.theory.patterns import DelayPattern, jacobi

from . import tree
from .curvature import masked_product
from .float64_sums import dot64
from .hvp import grad, hvp
from .optimizers import (STATE_BUFFERS, OptimizerSpec, OptimizerState, direction,
                         direction_jacobian_apply, optimizer_scheme_step, parse_optimizer)
from .steps import block_keys

__all__ = ["factor_tree", "optimizer_in_regime", "scaled_direction", "optimizer_delay_curvature",
           "optimizer_one_step_estimate", "optimizer_one_step_gap", "state_difference",
           "tangent_step", "TangentStep", "forcing", "forcing_norm", "optimizer_bound",
           "OptimizerRun", "run_optimizer_estimates"]


def factor_tree(task, factors: Sequence[float] | None, like: Mapping | None = None) -> dict:
    """``{param: f_i}`` as Python floats (1 for every parameter without factors)."""
    factors = [1.0] * task.n_blocks if factors is None else list(factors)
    out = {}
    for f, keys in zip(factors, block_keys(task)):
        for k in keys:
            out[k] = float(f)
    return out


def _scale(v: Mapping, f: Mapping) -> dict:
    return {k: (x if f[k] == 1.0 else x * f[k]) for k, x in v.items()}


def scaled_direction(spec: OptimizerSpec, state: OptimizerState, g: Mapping, f: Mapping) -> dict:
    """``F phi(g, s)``: the move of every block in units of ``-eta``
    (:func:`crosscurv.numeric.optimizers.direction`)."""
    return _scale(direction(spec, state, g), f)


# -- one step ---------------------------------------------------------------------
def optimizer_delay_curvature(task, params: Mapping, pattern: DelayPattern, spec: OptimizerSpec
                              | str,
                              state: OptimizerState | None = None, factors: Sequence[float]
                              | None = None,
                              g: Mapping | None = None, method: str = "auto") -> float:
    """``C_S^phi = g^T F J_phi M_S F phi(g, s)`` at ``params`` (float64 accumulation).

    Args:
        task, params, pattern: the problem, the common point, the pattern.
        spec, state, factors: the optimizer, the common state, the block factors.
        g: the gradient at ``params`` if known.
        method: HVP method.
    """
    spec = parse_optimizer(spec)
    state = OptimizerState() if state is None else state
    if g is None:
        _, g = grad(task.loss, params)
    f = factor_tree(task, factors)
    w = scaled_direction(spec, state, g, f)                   # F phi
    y = masked_product(task, params, pattern, w, method)      # M_S F phi
    u = _scale(direction_jacobian_apply(spec, state, g, y), f)  # F J_phi M_S F phi
    return dot64(g, u)


def optimizer_one_step_estimate(task, params, pattern, lr, spec, state=None, factors=None, g=None,
                                method: str = "auto") -> dict:
    """``{"eta2": lr^2 C_S^phi, "C_S": C_S^phi}`` (Python floats)."""
    c = optimizer_delay_curvature(task, params, pattern, spec, state, factors, g, method)
    return {"eta2": float(lr) ** 2 * c, "C_S": c}


def optimizer_one_step_gap(task, params, pattern, lr, spec, state=None, factors=None) -> float:
    """Measured ``L(S step) - L(JC step)`` from ``params`` and a common ``state``."""
    s_new, _, _ = optimizer_scheme_step(task, params, pattern, lr, spec, state, factors)
    j_new, _, _ = optimizer_scheme_step(task, params, jacobi(task.n_blocks), lr, spec, state,
                                        factors)
    with torch.no_grad():
        return float(task.loss(s_new).to(torch.float64) - task.loss(j_new).to(torch.float64))


# -- the tangent step ---------------------------------------------------------------
_STATE_NAMES = STATE_BUFFERS


def state_difference(spec: OptimizerSpec, s_state: OptimizerState, j_state: OptimizerState,
                     like: Mapping) -> dict:
    """``Delta s = s_S - s_JC`` per buffer (missing buffers are torch's initial zeros)."""
    out = {}
    for name in _STATE_NAMES[spec.name]:
        a, b = s_state.buffers.get(name, {}), j_state.buffers.get(name, {})
        out[name] = {k: (a[k] if k in a else torch.zeros_like(v)) - (b[k] if k in b
                                                                     else torch.zeros_like(v))
                     for k, v in like.items()}
    return out


def forcing(task, params: Mapping, pattern: DelayPattern, spec: OptimizerSpec,
            state: OptimizerState, g: Mapping, factors: Sequence[float] | None,
            method: str = "auto") -> dict:
    """``M_S F phi(g, s)`` at ``params`` (``n_F`` HVPs): the freshness forcing of the tangent step.
    """
    f = factor_tree(task, factors)
    return masked_product(task, params, pattern, scaled_direction(spec, state, g, f), method)


class TangentStep:
    """The coefficients of one tangent step at iteration ``k`` (module docstring), applied by
    :meth:`apply`: linear in ``(z, zs, dg)``, its coefficients fixed by the optimizer, ``lr``, ``f``
    and (Adam) the JC run's state and gradient; ``coefficients``: Adam's ``{"a_m", "a_v", "g"}``
    (trees), empty otherwise.
    """

    def __init__(self, spec: OptimizerSpec, lr, f: Mapping, jc_state: OptimizerState | None = None,
                 g_jc: Mapping | None = None, coefficients: Mapping | None = None):
        self.spec, self.lr, self.f = spec, lr, f
        self.coefficients = (dict(coefficients) if coefficients is not None
                             else spec.rule.tangent_coefficients(spec, jc_state, g_jc))

    def apply(self, z: Mapping, zs: Mapping, dg: Mapping) -> tuple[dict, dict]:
        """``(z', zs')`` from the differences ``z``, ``zs`` and the gradient difference ``dg = H_JC
        z -
        eta M_S F phi_S`` (the optimizer's ``tangent_apply``, e.g.
        :func:`crosscurv.numeric.optimizers.momentum.tangent_apply`)."""
        return self.spec.rule.tangent_apply(self.spec, self.lr, self.f, self.coefficients, z, zs,
                                            dg)


def tangent_step(spec: OptimizerSpec, lr, f: Mapping, z: Mapping, zs: Mapping, Hz: Mapping,
                 force: Mapping, jc_state: OptimizerState, g_jc: Mapping) -> tuple[dict, dict]:
    """One step of the linearized ``S - JC`` difference (module docstring): ``(z', zs')`` from the
    parameter difference ``z``, the state difference ``zs`` (:func:`state_difference`), ``Hz = H_JC
    z`` and ``force = M_S F phi_S`` (:func:`forcing`), ``dg = Hz - lr force``.
    """
    dg = {k: Hz[k] - lr * force[k] for k in z}
    return TangentStep(spec, lr, f, jc_state, g_jc).apply(z, zs, dg)


# -- the magnitude bound -------------------------------------------------------------
def forcing_norm(spec: OptimizerSpec, f: Mapping, force: Mapping) -> float:
    """The norm :func:`optimizer_bound` accumulates: ``||F M_S F phi_S||`` (sgd), ``||M_S F
    phi_S||`` (momentum, Adam)."""
    v = _scale(force, f) if spec.rule.BOUND_SCALES_FORCING else force
    return float(tree.norm(v))


def optimizer_in_regime(spec: OptimizerSpec, lr: float, f_max: float, lam_max: float) -> bool:
    """``lambda_max(H_JC^k) < edge``: the optimizer's step is stable along the top curvature (below
    its edge of stability; ``edge_curvature`` of the optimizer's module: ``2 / (eta f_max)`` for
    ``sgd``, ``2 (1 + beta) / (eta f_max)`` for heavy ball, not derived for Adam, which is never
    inside)."""
    edge = spec.rule.edge_curvature(spec, lr, f_max)
    return math.isfinite(lam_max) and math.isfinite(edge) and lam_max < edge


def optimizer_bound(spec: OptimizerSpec, norms: Sequence[float], lr: float, f_max: float, G: float,
                    L: float) -> float:
    """Theorem 3's magnitude bound ``G a_k + L/2 a_k^2`` carried to the optimizer's tangent
    recursion (float64).

    ``a_k`` majorizes ``||z_k||`` of the tangent recursion from ``z_0 = 0`` when ``||H_JC|| <= L``
    (``n_j`` = :func:`forcing_norm` at ``j``):

    * ``sgd`` (block factors ``F``, ``f_max = max f_i``): ``z' = (I - eta F H) z + eta^2 F M_S F
      g_S``, so ``a_{k+1} = (1 + eta f_max L) a_k + eta^2 n_k`` (the paper's ``b_k`` when ``F =
      I``);
    * ``momentum``: ``zm' = beta zm + H z - eta M_S F phi_S``, ``z' = z - eta F zm'``, so with ``c_k
      >= ||zm_k||``: ``c_{k+1} = beta c_k + L a_k + eta n_k``, ``a_{k+1} = a_k + eta f_max
      c_{k+1}``;
    * ``adam``: not bounded this way (its coefficients ``1/(c1 D)`` have no a-priori bound): NaN.
    """
    a = spec.rule.bound_majorant(spec, norms, lr, f_max, L)
    if math.isnan(a):  # adam: no bound (math.nan itself, as every missing value of a record)
        return math.nan
    return G * a + 0.5 * L * a * a


# -- a reference loop (tests and studies) ---------------------------------------------
class OptimizerRun(list):
    """Per-iteration records ``{k, gap, recursive, cumulative, jc_only, loss_jc, loss_s}`` plus the
    final states."""

    theta_jc: dict
    theta_s: dict


def run_optimizer_estimates(task, pattern: DelayPattern, lr, K: int, spec: OptimizerSpec
                            | str = "sgd",
                            factors: Sequence[float] | None = None,
                            method: str = "auto") -> OptimizerRun:
    """JC and ``S`` runs with the optimizer from one start and zero state, and the three estimates.

    A plain in-memory loop (no streaming, no resume): the reference the controlled protocol's
    optimizer support is checked against, and what the property tests run. ``gap`` is ``L(theta_S^k)
    - L(theta_JC^k)`` by plain subtraction (float64 accumulation).
    """
    spec = parse_optimizer(spec)
    f = factor_tree(task, factors)
    jc = jacobi(task.n_blocks)
    tj = {k: v.detach() for k, v in task.params.items()}
    ts = dict(tj)
    sj, ss = OptimizerState(), OptimizerState()
    z = tree.zeros_like(tj)
    y = tree.zeros_like(tj)
    zs = state_difference(spec, ss, sj, tj)
    ys = state_difference(spec, ss, sj, tj)
    _, gj = grad(task.loss, tj)
    out = OptimizerRun()
    for k in range(1, K + 1):
        _, gs = grad(task.loss, ts)
        delta = tree.sub(ts, tj)
        ds = state_difference(spec, ss, sj, tj)
        force_s = forcing(task, ts, pattern, spec, ss, gs, factors, method)
        force_j = forcing(task, tj, pattern, spec, sj, gj, factors, method)
        hd = hvp(task.loss, tj, delta, method)
        hz = hvp(task.loss, tj, z, method)
        hy = hvp(task.loss, tj, y, method)
        pred, _ = tangent_step(spec, lr, f, delta, ds, hd, force_s, sj, gj)
        quad = 0.5 * dot64(delta, hd)
        z, zs = tangent_step(spec, lr, f, z, zs, hz, force_s, sj, gj)
        y, ys = tangent_step(spec, lr, f, y, ys, hy, force_j, sj, gj)
        tj_new, sj, _ = optimizer_scheme_step(task, tj, jc, lr, spec, sj, factors)
        ts, ss, _ = optimizer_scheme_step(task, ts, pattern, lr, spec, ss, factors)
        tj = tj_new
        lj, gj = grad(task.loss, tj)
        with torch.no_grad():
            ls = task.loss(ts)
        hz_new = hvp(task.loss, tj, z, method)
        hy_new = hvp(task.loss, tj, y, method)
        out.append({
            "k": k,
            "loss_jc": float(lj),
            "loss_s": float(ls),
            "gap": float(ls.to(torch.float64) - lj.to(torch.float64)),
            "recursive": dot64(gj, pred) + quad,
            "cumulative": dot64(gj, z) + 0.5 * dot64(z, hz_new),
            "jc_only": dot64(gj, y) + 0.5 * dot64(y, hy_new),
        })
    out.theta_jc, out.theta_s = tj, ts
    return out
