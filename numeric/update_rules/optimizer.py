"""A block-separable optimizer (per-block step factors, heavy ball, Adam): both runs step with it
from zero state.

The estimates are the generalizations of :mod:`crosscurv.numeric.optimizer_estimates`: the steps
move by ``-eta F phi`` and update each run's state, ``M_S g`` becomes the forcing ``M_S F phi``
(``phi`` at the run's own state), and ``z``, ``y``, ``w`` take the *tangent step* with their state
differences, at ``theta_JC^k`` (the forcing of ``z`` and ``w``, ``M_S F phi_S``, is taken first, at
``theta_S^k``; Adam's coefficients are formed while ``g_JC^k`` is at hand). ``bound_bk`` is the
majorant of :func:`crosscurv.numeric.optimizer_estimates.optimizer_bound`; the error columns are the
defect interval's bar (:meth:`OptimizerRule.error_columns`).

The optimizer state lives in the run's store under ``GROUP.BUFFER`` (:data:`STATE_GROUPS`); the JC
and ``S`` runs' states take ``k`` steps before iteration ``k``, so their step count is ``k`` and is
not stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from crosscurv.numeric import tree
from crosscurv.numeric.error_estimates import defect_error
from crosscurv.numeric.optimizer_estimates import (TangentStep, factor_tree, forcing_norm,
                                                   optimizer_bound, optimizer_in_regime,
                                                   scaled_direction, state_difference)
from crosscurv.numeric.optimizers import OptimizerSetup, OptimizerState, optimizer_scheme_step
from crosscurv.numeric.records import ESTIMATES

from .base import UpdateRule

__all__ = ["OptimizerRule", "STATE_GROUPS"]

#: Carried optimizer-state groups (``GROUP.BUFFER``): the JC and S runs' states, the cumulative and
#: JC-only estimates' state differences; the JC and S states may lack a buffer (``None``: torch's
#: initial state).
STATE_GROUPS = ("sj", "ss", "zs", "ys")


class OptimizerRule(UpdateRule):
    """A run's block-separable optimizer (not plain ``sgd``): its setup and what every iteration
    reuses."""

    def __init__(self, task, setup: OptimizerSetup):
        self.setup, self.spec = setup, setup.spec
        self.factors = list(setup.factors)
        self.f = factor_tree(task, self.factors)
        self.carried = tuple(f"{g}.{b}" for g in STATE_GROUPS for b in setup.buffers)

    # -- the state in the store ---------------------------------------------------------
    def start(self, store, like: Mapping) -> None:
        """Torch's initial states (no buffers) and zero state differences."""
        for b in self.setup.buffers:
            store.park(f"sj.{b}", None)
            store.park(f"ss.{b}", None)
            store.park(f"zs.{b}", tree.zeros_like(like))
            store.park(f"ys.{b}", tree.zeros_like(like))

    def state(self, store, group: str, k: int) -> OptimizerState:
        """The JC (``"sj"``) or ``S`` (``"ss"``) run's state at iteration ``k``."""
        bufs = {b: store.fetch(f"{group}.{b}") for b in self.setup.buffers}
        return OptimizerState(k, {b: v for b, v in bufs.items() if v is not None})

    def park_state(self, store, group: str, state: OptimizerState) -> None:
        for b in self.setup.buffers:
            store.park(f"{group}.{b}", state.buffers.get(b))

    def group(self, store, group: str) -> dict:
        """``{buffer: tree}`` of a difference group (``"zs"``, ``"ys"``, ``"ds"``)."""
        return {b: store.fetch(f"{group}.{b}") for b in self.setup.buffers}

    def park_group(self, store, group: str, values: Mapping | None) -> None:
        for b in self.setup.buffers:
            store.park(f"{group}.{b}", None if values is None else values[b])

    def tangent(self, store, lr: float) -> TangentStep:
        """The tangent step of this iteration (Adam's coefficients parked under ``tan.*`` at
        ``theta_JC``)."""
        coef = {n: store.fetch(f"tan.{n}") for n in ("a_m", "a_v",
                                                     "g")} if self.spec.name == "adam" else None
        return TangentStep(self.spec, lr, self.f, coefficients=coef)

    def park_tangent(self, store, step: TangentStep | None) -> None:
        if self.spec.name == "adam":
            for n in ("a_m", "a_v", "g"):
                store.park(f"tan.{n}", None if step is None else step.coefficients[n])

    # -- the hooks ------------------------------------------------------------------------
    def s_forcing(self, ctx, k, at_s, gs):
        """The forcing ``M_S F phi_S`` with the ``S`` run's state."""
        return at_s.masked(ctx.plan, scaled_direction(self.spec, self.state(ctx.store, "ss", k), gs,
                                                      self.f))

    def s_step(self, ctx, k, theta_s, gs, force, meas):
        """The state difference ``Delta s^k`` (for ``w``), then the scheme step with the ``S`` run's
        state."""
        S, lr = ctx.store, ctx.lr
        ss = self.state(S, "ss", k)
        self.park_group(S, "ds", state_difference(self.spec, ss, self.state(S, "sj", k), theta_s))
        meas["unorm"] = forcing_norm(self.spec, self.f, force)
        new, ss, _ = optimizer_scheme_step(ctx.task, theta_s, ctx.pattern, lr, self.spec, ss,
                                           self.factors, grad_at_params=gs)
        S.park("theta_s", new)
        self.park_state(S, "ss", ss)

    def jc_step(self, ctx, k, at_j, theta_j, gj, meas):
        S, lr = ctx.store, ctx.lr
        sj = self.state(S, "sj", k)
        S.park("m_jc", at_j.masked(ctx.plan, scaled_direction(self.spec, sj, gj, self.f)))
        self.park_tangent(S, TangentStep(self.spec, lr, self.f, sj, gj))
        new, sj, _ = optimizer_scheme_step(ctx.task, theta_j, ctx.jacobi, lr, self.spec, sj,
                                           self.factors, grad_at_params=gj)
        S.park("theta_j", new)
        self.park_state(S, "sj", sj)

    def advance_z(self, ctx, z, Hz, force):
        """The tangent step of ``z`` with ``H_JC^k z`` and the forcing."""
        S, lr = ctx.store, ctx.lr
        z, zs = self.tangent(S, lr).apply(z, self.group(S, "zs"), {n: Hz[n] - lr * force[n]
                                                                   for n in Hz})
        S.park("z", z)
        self.park_group(S, "zs", zs)

    def advance_y(self, ctx, at_j, y, Hy):
        S, lr = ctx.store, ctx.lr
        m_jc = S.fetch("m_jc")
        y, ys = self.tangent(S, lr).apply(y, self.group(S, "ys"), {n: Hy[n] - lr * m_jc[n]
                                                                   for n in Hy})
        S.park("y", y)
        self.park_group(S, "ys", ys)
        S.park("m_jc", None)

    def advance_delta(self, ctx, at_j, delta, Hdelta, gs, force, meas):
        """The tangent step of ``w`` from the measured ``Delta^k``, its state difference, ``H_JC^k
        Delta^k`` and the forcing."""
        S, lr = ctx.store, ctx.lr
        w, _ = self.tangent(S, lr).apply(delta, self.group(S, "ds"), {n: Hdelta[n] - lr * force[n]
                                                                      for n in Hdelta})
        S.park("w", w)
        self.park_group(S, "ds", None)

    def error_columns(self, ctx, record, meas):
        """The defect interval's symmetric bar
        (:func:`crosscurv.numeric.error_estimates.defect_error`) of each estimate, from its realised
        defects ``gap^j - estimate^j`` of the records before; the certified winners of
        :mod:`crosscurv.numeric.certificate`, inside the regime while below the optimizer's edge of
        stability (:func:`optimizer_in_regime`)."""
        regime = optimizer_in_regime(self.spec, ctx.lr, self.setup.f_max, meas["top"])
        for name in ESTIMATES:
            lo, hi, _ = ctx.est.defects.record(name, record["gap"], record[name], math.nan, regime)
            record[f"{name}_err"] = defect_error(lo, hi)
        certs = ctx.est.certificates.record(record, regime)
        for name in ESTIMATES:
            record[f"{name}_cert"] = certs[name]

    def bound(self, est, lr):
        return optimizer_bound(self.spec, est.unorms, lr, self.setup.f_max, est.G, est.L)

    def carry(self, ctx, k, meas):
        ctx.est.unorms.append(meas["unorm"])
        self.park_tangent(ctx.store, None)
