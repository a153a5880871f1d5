"""Trajectory and loss recursions for block-separable optimizers (Lemma 3, Theorem 2 generalized).

Expansion point ``theta_JC^k`` (the model's origin), ``Delta theta^k = eps delta``; ``F`` the block
step-size factors. Stateless optimizers (``A = F P``, ``P`` a fixed block-diagonal preconditioner;
``A = I`` is the paper's case):

    Delta theta^{k+1} = (I - eta A H_JC^k) Delta theta^k + eta^2 A M_S A g_S^k
                        + O(eta ||Delta theta||^2 + eta^3),
    Delta L^{k+1} = g_JC^{k+1 T} (I - eta A H_JC^k) Delta theta^k
                    + 1/2 Delta theta^{kT} H_JC^k Delta theta^k
                    + eta^2 g_JC^{k+1 T} A M_S A g_S^k + O(eta^3).

Heavy ball (``m' = beta m + g~``, ``theta' = theta - eta F m'``), with ``Delta m^k = eps mu`` and
``phi_S^k = beta m_S^k + g_S^k``:

    Delta m^{k+1} = beta Delta m^k + H_JC^k Delta theta^k - eta M_S F phi_S^k
                    + [monomials eps^b, b >= 2, or eta^a, a >= 2],
    Delta theta^{k+1} = (I - eta F H_JC^k) Delta theta^k - eta beta F Delta m^k
                        + eta^2 F M_S F phi_S^k + O(eta ||Delta theta||^2 + eta^3),
    Delta L^{k+1} = g_JC^{k+1 T} [(I - eta F H_JC^k) Delta theta^k - eta beta F Delta m^k]
                    + 1/2 Delta theta^{kT} H_JC^k Delta theta^k
                    + eta^2 g_JC^{k+1 T} F M_S F phi_S^k + O(eta^3).

Checked exactly as in :mod:`crosscurv.theory.recursion` (quartic model, total degree 4). Adam is not
covered (its direction is not polynomial in ``v``). Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .._linalg import dot as _dot
from ..block_model import ModelError
from ..one_step import check_pattern, masked_hessian_apply, one_step_update
from ..patterns import DelayPattern, parse_pattern
from ..recursion import (RECURSION_DEGREE, _leading, lemma3_allowed, recursion_space,
                         theorem2_allowed)
from ..series import TruncatedSeries
from .model import OptimizerModel, optimizer_model

__all__ = ["OptimizerRecursionCheck", "buffer_allowed", "check_optimizer_recursions",
           "optimizer_recursion_model"]


def buffer_allowed(a: int, b: int) -> bool:
    """Momentum-buffer remainder: a monomial ``eta^a eps^b`` is allowed iff ``b >= 2`` or ``a >=
    2``.
    """
    return b >= 2 or a >= 2


def optimizer_recursion_model(kind: str, n_blocks: int, dims=1) -> OptimizerModel:
    """Quartic Taylor model with ``delta`` (and ``mu`` for momentum) and the optimizer's symbols."""
    vectors = ("delta", "mu") if kind == "momentum" else ("delta",)
    if kind not in ("sgd", "preconditioner", "momentum"):
        raise ModelError("the recursions are derived for sgd, preconditioner and momentum, not "
                         f"{kind!r}")
    return optimizer_model(n_blocks, dims, kind, taylor_order=4, vectors=vectors)


@dataclass
class OptimizerRecursionCheck:
    """Exact remainders of the generalized recursions: ``d`` series for ``Delta theta`` and
    (momentum, else ``None``) ``Delta m``, a series for the loss; ``*_ok``: only allowed monomials
    present, else ``offending[part]`` lists them; ``*_leading``: least-degree monomials.
    """

    kind: str
    pattern: DelayPattern
    trajectory_remainder: list
    buffer_remainder: list | None
    loss_remainder: TruncatedSeries
    trajectory_ok: bool
    buffer_ok: bool
    loss_ok: bool
    offending: dict = field(default_factory=dict)
    trajectory_leading: dict = field(default_factory=dict)
    loss_leading: dict = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.trajectory_ok and self.buffer_ok and self.loss_ok


def _consts(space, xs):
    return [x if isinstance(x, TruncatedSeries) else space.constant(x) for x in xs]


def check_optimizer_recursions(kind: str, n_blocks: int = 3, dims: int = 1, pattern: DelayPattern
                               | str = "gs",
                               degree: int = RECURSION_DEGREE) -> OptimizerRecursionCheck:
    """Compute the generalized Lemma 3 / Theorem 2 remainders exactly and check their monomials."""
    opt = optimizer_recursion_model(kind, n_blocks, dims)
    model = opt.model
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, n_blocks)
    pattern = check_pattern(model, pattern)
    space = recursion_space(model, degree)
    d = model.d
    eta = space.variable(0)
    eps = space.variable(1)
    delta = model.vectors["delta"]
    dtheta0 = [eps * delta[a] for a in range(d)]
    g_s = model.gradient(dtheta0, space=space)
    g_s = [g_s[a] for a in range(d)]
    wanted = [(a, b) for a in range(d) for j in pattern.fresh(model.block_of[a])
              for b in model.blocks[j]]
    h_s = model.hessian(dtheta0, entries=wanted, space=space)
    h_dtheta0 = [_dot(model.H[a], dtheta0) for a in range(d)]          # H_JC Delta theta
    half = model.const(sympy.Rational(1, 2))
    buffer_rem = None

    if kind == "momentum":
        mu = model.vectors["mu"]
        dm0 = [eps * mu[a] for a in range(d)]
        m_s = [space.constant(opt.buffer[a]) + dm0[a] for a in range(d)]
        step = one_step_update(model, pattern, space, base=dtheta0, factors=opt.factors,
                               direction=lambda i, fr: opt.direction(i, fr, buffer=m_s))
        m_s1 = [m_s[a] * opt.beta + step.fresh_gradient[a] for a in range(d)]
        m_j1 = [opt.buffer[a] * opt.beta + model.g[a] for a in range(d)]
        theta_j1 = [eta * (-(m_j1[a] * opt.factors[model.block_of[a]])) for a in range(d)]
        phi_s = [m_s[a] * opt.beta + g_s[a] for a in range(d)]
        mphi = _consts(space, masked_hessian_apply(model, pattern, opt.scale(phi_s), H=h_s))
        dm_pred = [dm0[a] * opt.beta + h_dtheta0[a] - eta * mphi[a] for a in range(d)]
        dm1 = [m_s1[a] - m_j1[a] for a in range(d)]
        buffer_rem = [dm1[a] - dm_pred[a] for a in range(d)]
        pred_dtheta1 = [dtheta0[a] - eta * (dm_pred[a] * opt.factors[model.block_of[a]])
                        for a in range(d)]
    else:
        step = one_step_update(model, pattern, space, base=dtheta0, factors=opt.factors,
                               direction=opt.direction)
        theta_j1 = [eta * (-x) for x in opt.effective(model.g)]
        a_h = opt.effective(h_dtheta0)                                  # A H_JC Delta theta
        forcing = opt.effective(_consts(space, masked_hessian_apply(model, pattern, opt.effective(
            g_s), H=h_s)))
        pred_dtheta1 = [dtheta0[a] - eta * a_h[a] + (eta * eta) * forcing[a] for a in range(d)]

    theta_s1 = [dtheta0[a] + step.displacement[a] for a in range(d)]
    dtheta1 = [theta_s1[a] - theta_j1[a] for a in range(d)]
    traj_rem = [dtheta1[a] - pred_dtheta1[a] for a in range(d)]
    g_j1 = model.gradient(theta_j1, space=space)
    g_j1 = [g_j1[a] for a in range(d)]
    prediction = _dot(g_j1, pred_dtheta1) + _dot(dtheta0, h_dtheta0) * half
    loss_rem = (model.loss(theta_s1, space) - model.loss(theta_j1, space)) - prediction

    bad = {
        "trajectory": sorted({e for s in traj_rem for e in s.terms if not lemma3_allowed(*e)}),
        "buffer": sorted({e for s in (buffer_rem or []) for e in s.terms if not buffer_allowed(
        *e)}),
        "loss": sorted(e for e in loss_rem.terms if not theorem2_allowed(*e)),
    }
    loss_leading = {e: loss_rem.coeff(*e) for e in loss_rem.monomials() if sum(e)
                    == loss_rem.min_degree()}
    return OptimizerRecursionCheck(
        kind=kind,
        pattern=pattern,
        trajectory_remainder=traj_rem,
        buffer_remainder=buffer_rem,
        loss_remainder=loss_rem,
        trajectory_ok=not bad["trajectory"],
        buffer_ok=not bad["buffer"],
        loss_ok=not bad["loss"],
        offending={k: v for k, v in bad.items() if v},
        trajectory_leading=_leading(traj_rem),
        loss_leading=loss_leading,
    )
