"""Cumulative estimate for block-separable optimizers on a quadratic (Theorem 3 generalized).

On ``L(theta) = g^T theta + 1/2 theta^T H theta`` (``theta^0`` at the origin), both runs start from
the same parameters and the same optimizer state.

Stateless (``A = F P``; ``A = F`` for per-block step sizes):

    z_{k+1} = (I - eta A H) z_k + eta^2 A M_S A g_S^k,   z_0 = 0,
    Delta L^K = g_JC^{K T} z_K + 1/2 z_K^T H z_K + O(K eta^3),

and exactly ``[eta^3](Delta theta^K - z_K) = -K A (M_S A)^2 g`` (the fresh gradient is ``(I + eta
M_S A)^{-1} g_S``), ``[eta^3]`` of the loss remainder ``= -K g^T A (M_S A)^2 g``.

Heavy ball (common initial buffer ``m^0``; ``phi_S^k = beta m_S^k + g_S^k``):

    w_{k+1} = beta w_k + eta F H z_k - eta^2 F M_S F phi_S^k,   z_{k+1} = z_k - w_{k+1},
    z_0 = w_0 = 0,   Delta L^K = g_JC^{K T} z_K + 1/2 z_K^T H z_K + O(K eta^3),

(``w`` tracks ``Delta u = eta F (m_S - m_JC)``), and exactly

    [eta^3](Delta theta^K - z_K) = -sum_{j=0}^{K-1} s_{K-1-j}(beta) F (M_S F)^2 phi_j,
    s_n(beta) = 1 + beta + ... + beta^n,   phi_j = beta m_j + g,
    m_j = beta^j m^0 + s_{j-1}(beta) g    (the buffer at eta = 0),

with ``[eta^3]`` of the loss remainder ``g^T`` times it: each step's local error (in the buffer)
keeps acting through the momentum, summed with weights ``s_n(beta) <= 1/(1 - beta)``: still ``O(K
eta^3)``, larger by up to ``1/(1-beta)``. For ``beta = 0`` it is the stateless law with ``A = F``.

Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .._linalg import dot as _dot
from ..block_model import ModelError
from ..one_step import check_pattern, eta_space, masked_hessian_apply, one_step_update
from ..patterns import DelayPattern, parse_pattern
from .model import optimizer_model

__all__ = ["OptimizerCumulativeCheck", "check_optimizer_cumulative"]


@dataclass
class OptimizerCumulativeCheck:
    """The generalized Theorem 3 on a quadratic: per ``K = 1..K_max`` ``{"K", "trajectory_order",
    "loss_order", "growth"}`` (lowest power of ``eta`` present, ``None`` if zero through the
    truncation degree; ``growth``: the ``eta^3`` coefficients equal the module docstring's closed
    forms).
    """

    kind: str
    pattern: DelayPattern
    steps: list = field(default_factory=list)
    degree: int = 4

    @property
    def holds(self) -> bool:
        """Both remainders are ``O(eta^3)`` for every ``K``."""
        return all((s["trajectory_order"] is None or s["trajectory_order"] >= 3)
                   and (s["loss_order"] is None or s["loss_order"] >= 3) for s in self.steps)

    @property
    def growth_holds(self) -> bool:
        return all(s["growth"] for s in self.steps)


def _order(series_list):
    degs = [s.min_degree() for s in series_list if not s.is_zero]
    return min(degs) if degs else None


def check_optimizer_cumulative(kind: str, n_blocks: int = 3, dims: int = 1, pattern: DelayPattern
                               | str = "gs",
                               K_max: int = 4, degree: int = 4) -> OptimizerCumulativeCheck:
    """Unroll both runs and the cumulative state exactly (series in ``eta``) and compare."""
    if kind not in ("sgd", "preconditioner", "momentum"):
        raise ModelError("the cumulative estimate is derived for sgd, preconditioner and "
                         f"momentum, not {kind!r}")
    opt = optimizer_model(n_blocks, dims, kind, taylor_order=2)
    model = opt.model
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, n_blocks)
    pattern = check_pattern(model, pattern)
    space = eta_space(model, degree)
    d = model.d
    eta = space.variable(0)
    zero = [space.zero_series() for _ in range(d)]
    theta_s, theta_j, z, w = list(zero), list(zero), list(zero), list(zero)
    half = model.const(sympy.Rational(1, 2))
    f = [opt.factors[model.block_of[a]] for a in range(d)]
    H = model.H
    out = OptimizerCumulativeCheck(kind, pattern, degree=degree)
    if kind == "momentum":
        m_s = [space.constant(x) for x in opt.buffer]
        m_j = list(m_s)
        beta = opt.beta
        m0 = list(opt.buffer)
        phis0 = []                                      # phi_j at eta = 0
    for K in range(1, K_max + 1):
        g_s = model.gradient(theta_s, space=space)
        g_s = [g_s[a] for a in range(d)]
        hz = [_dot(H[a], z) for a in range(d)]
        if kind == "momentum":
            phi_s = [m_s[a] * beta + g_s[a] for a in range(d)]
            mphi = masked_hessian_apply(model, pattern, opt.scale(phi_s))
            w = [w[a] * beta + eta * (hz[a] * f[a]) - (eta * eta) * (mphi[a] * f[a]) for a in range(
                d)]
            z = [z[a] - w[a] for a in range(d)]
            step = one_step_update(model, pattern, space, base=theta_s, factors=opt.factors,
                                   direction=lambda i, fr: opt.direction(i, fr, buffer=m_s))
            m_s = [m_s[a] * beta + step.fresh_gradient[a] for a in range(d)]
            g_j = model.gradient(theta_j, space=space)
            m_j = [m_j[a] * beta + g_j[a] for a in range(d)]
            theta_j = [theta_j[a] - eta * (m_j[a] * f[a]) for a in range(d)]
        else:
            forcing = opt.effective(masked_hessian_apply(model, pattern, opt.effective(g_s)))
            ahz = opt.effective(hz)
            z = [z[a] - eta * ahz[a] + (eta * eta) * forcing[a] for a in range(d)]
            step = one_step_update(model, pattern, space, base=theta_s, factors=opt.factors,
                                   direction=opt.direction)
            g_j = model.gradient(theta_j, space=space)
            ag = opt.effective([g_j[a] for a in range(d)])
            theta_j = [theta_j[a] - eta * ag[a] for a in range(d)]
        theta_s = [theta_s[a] + step.displacement[a] for a in range(d)]
        r = [(theta_s[a] - theta_j[a]) - z[a] for a in range(d)]
        g_jn = model.gradient(theta_j, space=space)
        estimate = _dot([g_jn[a] for a in range(d)], z) + _dot(z, [_dot(H[a], z) for a in range(
            d)]) * half
        loss_rem = (model.loss(theta_s, space) - model.loss(theta_j, space)) - estimate
        r3 = [s.coeff(3) for s in r]
        # closed forms of the eta^3 coefficients
        if kind == "momentum":
            m_at = [sum((beta**t for t in range(K - 1)), model.zero) * model.g[a] + beta**(K - 1)
                    * m0[a] for a in range(d)]
            phis0.append([beta * m_at[a] + model.g[a] for a in range(d)])
            pred = [model.zero] * d
            for j, ph in enumerate(phis0):
                s = sum((beta**t for t in range(K - j)), model.zero)
                x = opt.scale(masked_hessian_apply(model, pattern, opt.scale(masked_hessian_apply(
                    model, pattern, opt.scale(ph)))))
                pred = [pred[a] - s * x[a] for a in range(d)]
        else:
            x = opt.effective(masked_hessian_apply(model, pattern, opt.effective(
                masked_hessian_apply(model, pattern, opt.effective(model.g)))))
            pred = [-x[a] * K for a in range(d)]
        loss_pred = _dot(model.g, pred) + model.zero
        out.steps.append({
            "K": K,
            "trajectory_order": _order(r),
            "loss_order": _order([loss_rem]),
            "trajectory_eta3": r3,
            "loss_eta3": loss_rem.coeff(3),
            "growth": all(r3[a] == pred[a] for a in range(d)) and loss_rem.coeff(3) == loss_pred,
        })
    return out
