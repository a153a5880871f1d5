"""Theorem 3 (signed cumulative terminal comparison) on a quadratic objective.

On ``L(theta) = g^T theta + 1/2 theta^T H theta`` (constant Hessian ``H``, the model's origin is the
common start ``theta^0``) everything is exact:

* the JC trajectory ``theta_JC^{k+1} = theta_JC^k - eta grad L(theta_JC^k)``;
* the ``S`` trajectory, each step the exact scheme step of
  :func:`crosscurv.theory.one_step.one_step_update` started at ``theta_S^k``;
* the cumulative state ``z_{k+1} = (I - eta H) z_k + eta^2 M_S g_S^k``,
  ``z_0 = 0`` (eq. signed_cumulative_state written as a recursion; ``M_S`` is
  constant because ``H`` is);
* the loss estimate ``g_JC^{K T} z_K + 1/2 z_K^T H z_K`` (eq. signed_cumulative_loss).

Checked for ``K = 1..K_max`` (series in ``eta`` up to ``eta^degree``): the trajectory remainder
``r_K = Delta theta^K - z_K`` and the loss remainder ``Delta L^K - estimate`` have no coefficient
below ``eta^3``. On a quadratic the local remainder of Lemma 3 is purely Lemma 1's: the fresh
gradient is exactly ``(I + eta M_S)^{-1} g_S`` (a finite sum, ``M_S`` being nilpotent), so ``s^k =
-eta^3 M_S^2 g_S^k + O(eta^4)`` and hence

    [eta^3] r_K = -K M_S^2 g,        [eta^3] (loss remainder) = -K g^T M_S^2 g,

the ``O(K eta^3)`` growth of Theorem 3, checked exactly as well. When ``M_S^2 = 0`` (e.g. ``N = 2``)
every ``s^k`` vanishes and ``z_K`` is exact.

Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .block_model import BlockModel, ModelError
from ._linalg import dot as _dot
from .one_step import check_pattern, eta_space, masked_hessian_apply, one_step_update
from .patterns import DelayPattern

__all__ = ["CumulativeStep", "CumulativeCheck", "quadratic_model", "check_cumulative"]


def quadratic_model(n_blocks: int, dims=1) -> BlockModel:
    """The quadratic block model (``g``, constant ``H``; no ``T``)."""
    return BlockModel(n_blocks, dims, taylor_order=2)


@dataclass
class CumulativeStep:
    """Theorem 3 at one horizon ``K``: ``trajectory_order``/``loss_order`` (lowest power of ``eta``
    in ``r_K`` and in the loss remainder; ``None``: zero up to the truncation degree), their
    ``[eta^3]`` coefficients ``trajectory_eta3``/``loss_eta3``, and ``trajectory_growth`` (``[eta^3]
    r_K == -K M_S^2 g``), ``loss_growth`` (``== -K g^T M_S^2 g``).
    """

    K: int
    trajectory_order: int | None
    loss_order: int | None
    trajectory_eta3: list
    loss_eta3: object
    trajectory_growth: bool
    loss_growth: bool

    @property
    def holds(self) -> bool:
        """Theorem 3 at this ``K``: both remainders are ``O(eta^3)``."""
        ok_t = self.trajectory_order is None or self.trajectory_order >= 3
        ok_l = self.loss_order is None or self.loss_order >= 3
        return ok_t and ok_l

    @property
    def growth_holds(self) -> bool:
        """The ``eta^3`` coefficients are ``-K M_S^2 g`` and ``-K g^T M_S^2 g``."""
        return self.trajectory_growth and self.loss_growth


@dataclass
class CumulativeCheck:
    """Theorem 3 on a quadratic for ``K = 1..K_max``."""

    pattern: DelayPattern
    steps: list = field(default_factory=list)
    degree: int = 4

    @property
    def holds(self) -> bool:
        """Theorem 3 (remainders ``O(eta^3)``) for every ``K``."""
        return all(s.holds for s in self.steps)

    @property
    def growth_holds(self) -> bool:
        """The ``eta^3`` coefficients grow exactly linearly in ``K`` for every ``K``."""
        return all(s.growth_holds for s in self.steps)


def _order(series_list) -> int | None:
    degs = [s.min_degree() for s in series_list if not s.is_zero]
    return min(degs) if degs else None


def check_cumulative(model: BlockModel, pattern: DelayPattern, K_max: int = 4,
                     degree: int = 4) -> CumulativeCheck:
    """Unroll both trajectories and ``z_K`` exactly (series in ``eta`` to ``degree``) on a
    :func:`quadratic_model` and compare: one :class:`CumulativeStep` per ``K = 1..K_max``.
    """
    pattern = check_pattern(model, pattern)
    if model.taylor_order != 2:
        raise ModelError("Theorem 3 is checked on the quadratic model (taylor_order=2)")
    if degree < 3:
        raise ModelError("the truncation degree must be at least 3 to see the eta^3 remainder")
    space = eta_space(model, degree)
    d = model.d
    eta = space.variable(0)
    theta_s = [space.zero_series() for _ in range(d)]
    theta_j = [space.zero_series() for _ in range(d)]
    z = [space.zero_series() for _ in range(d)]
    mg = masked_hessian_apply(model, pattern, model.g)
    mmg = masked_hessian_apply(model, pattern, mg)
    g_mmg = _dot(model.g, mmg) + model.zero
    out = CumulativeCheck(pattern, degree=degree)
    for K in range(1, K_max + 1):
        g_s = model.gradient(theta_s, space=space)
        m_gs = masked_hessian_apply(model, pattern, [g_s[a] for a in range(d)])
        hz = [_dot(model.H[a], z) for a in range(d)]
        z = [z[a] - eta * hz[a] + (eta * eta) * m_gs[a] for a in range(d)]
        step = one_step_update(model, pattern, space, base=theta_s)
        theta_s = [theta_s[a] + step.displacement[a] for a in range(d)]
        g_j = model.gradient(theta_j, space=space)
        theta_j = [theta_j[a] - eta * g_j[a] for a in range(d)]
        r = [(theta_s[a] - theta_j[a]) - z[a] for a in range(d)]
        g_j_new = model.gradient(theta_j, space=space)
        estimate = _dot([g_j_new[a] for a in range(d)], z) + _dot(z, [_dot(model.H[a], z)
            for a in range(d)]) * model.const(sympy.Rational(1, 2))
        loss_rem = (model.loss(theta_s, space) - model.loss(theta_j, space)) - estimate
        r3 = [s.coeff(3) for s in r]
        out.steps.append(CumulativeStep(
            K=K,
            trajectory_order=_order(r),
            loss_order=_order([loss_rem]),
            trajectory_eta3=r3,
            loss_eta3=loss_rem.coeff(3),
            trajectory_growth=all(r3[a] == -mmg[a] * K for a in range(d)),
            loss_growth=loss_rem.coeff(3) == -g_mmg * K,
        ))
    return out
