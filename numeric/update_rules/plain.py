"""The paper's plain steps: ``theta - eta g`` for JC, the scheme step of pattern ``S`` (Definition
1, Lemma 1).

The carried states advance by Lemma 3's linearised recursion
(:func:`crosscurv.numeric.estimates.propagate`), formed in place (:mod:`crosscurv.numeric.inplace`,
the same bits):

* ``z <- (z - eta H_JC^k z) + eta^2 u^k`` with ``u^k = M_S(theta_S^k) g_S^k`` (Theorem 3's
  cumulative state);
* ``y <- (y - eta H_JC^k y) + eta^2 M_S(theta_JC^k) g_JC^k`` (the JC-only state);
* ``w <- (Delta^k - eta H_JC^k Delta^k) + eta^2 u^k`` (the recursive term of ``k + 1``, Theorem 2).

The error estimates (:mod:`crosscurv.numeric.error_estimates`) are measured along the way with no
extra product: ``||g_S^k - g_JC^k - H_JC^k Delta^k||`` (the gradient expansion's remainder ``w^k``,
eq. grad_diff_expansion) and the two steps' remainders.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from crosscurv.numeric import error_estimates as errs
from crosscurv.numeric import tree
from crosscurv.numeric.inplace import (add_scaled_into, norm_of, scaled_difference_into,
                                       step_residual)
from crosscurv.numeric.records import ESTIMATES
from crosscurv.numeric.steps import scheme_step

from .base import UpdateRule

__all__ = ["PlainRule"]


class PlainRule(UpdateRule):
    """Plain block-gradient steps with one learning rate (the paper's protocol)."""

    carried = ()

    def s_forcing(self, ctx, k, at_s, gs):
        return at_s.masked(ctx.plan, gs)  # u = M_S g_S^k

    def s_step(self, ctx, k, theta_s, gs, force, meas):
        lr = ctx.lr
        new_s = scheme_step(ctx.task, theta_s, ctx.pattern, lr, grad_at_params=gs)
        meas["round_s"] = step_residual(new_s, theta_s, gs, lr, force, lr * lr)
        ctx.store.park("theta_s", new_s)
        meas["unorm"] = float(tree.norm(force))

    def jc_step(self, ctx, k, at_j, theta_j, gj, meas):
        # the expression crosscurv.numeric.steps.scheme_step uses for an empty pattern
        lr = ctx.lr
        new_j = {n: theta_j[n] - lr * gj[n] for n in theta_j}
        meas["round_j"] = step_residual(new_j, theta_j, gj, lr, None, 0.0)
        ctx.store.park("theta_j", new_j)

    def advance_z(self, ctx, z, Hz, force):
        # propagate(z, Hz, u, lr) = (z - lr H z) + lr^2 u, formed in Hz
        z = scaled_difference_into(z, Hz, ctx.lr)
        ctx.store.park("z", add_scaled_into(z, force, ctx.lr * ctx.lr, keep=not _read_anew(force)))

    def advance_y(self, ctx, at_j, y, Hy):
        # propagate(y, Hy, M_S g_JC, lr), formed in Hy; y is dropped before the masked product
        y = scaled_difference_into(y, Hy, ctx.lr)
        add_scaled_into(y, at_j.masked(ctx.plan, at_j.grad), ctx.lr * ctx.lr)
        ctx.store.park("y", y)

    def advance_delta(self, ctx, at_j, delta, Hdelta, gs, force, meas):
        g0, lr = at_j.grad, ctx.lr
        eps = torch.finfo(Hdelta[next(iter(Hdelta))].dtype).eps
        meas["norm_hd"] = float(tree.norm(Hdelta))
        # ||w^k|| = ||g_S^k - (g_JC^k + H_JC^k Delta^k)||, eq. grad_diff_expansion
        wnorm = norm_of(gs, lambda n: _sub_from(gs[n], g0[n] + Hdelta[n]), owned=True)
        D = float(tree.norm(delta))
        meas["rho"] = errs.rho_sample(wnorm, 8.0 * eps * (meas["G_s"] + meas["G"] + meas[
            "norm_hd"]), D)
        meas["wnorm"], meas["D"] = wnorm, D
        # w = propagate(Delta, H Delta, u, lr) = (Delta - lr H Delta) + lr^2 u, formed in H Delta
        w = add_scaled_into(scaled_difference_into(delta, Hdelta, lr), force, lr * lr,
                            keep=not _read_anew(force))
        meas["A"] = float(tree.norm(w))
        meas["d"] = norm_of(w, lambda n: w[n] - delta[n], owned=True)
        meas["P"] = norm_of(w, lambda n: w[n] + delta[n], owned=True)
        ctx.store.park("w", w)

    def error_columns(self, ctx, record, meas):
        E, lr = ctx.est.errors, ctx.lr
        err = {
            "recursive": errs.recursive_error(lr, E.rho, E.sigma, meas["G"], E.G, E.lam, meas[
            "lam"], E.A, E.d,
                                              E.P),
            "cumulative": errs.cumulative_error(meas["G"], meas["lam"], meas["Z"], E.R, E.rho),
            "jc_only": errs.jc_only_error(meas["G"], meas["lam"], meas["Y"], E.E, E.rho),
        }
        certs = ctx.est.certificates.record(record, errs.in_regime(lr, meas["top"]),
                                            losses=meas["losses"], dtype=ctx.task.dtype)
        for name in ESTIMATES:
            record[f"{name}_err"] = err[name]
            record[f"{name}_cert"] = certs[name]

    def bound(self, est, lr):
        return est.bound(lr)

    def carry(self, ctx, k, meas):
        est = ctx.est
        est.unorms.append(meas["unorm"])
        est.errors.rho = max(est.errors.rho, meas["rho"])
        _carry_errors(ctx, meas, meas["D"], meas["round_s"] + meas["round_j"], meas["A"], meas[
            "d"], meas["P"],
                      meas["wnorm"])


def _read_anew(v: Mapping) -> bool:
    """Whether each read of an entry of ``v`` returns a new tensor (a vector parked between uses and
    read back entry by entry, :func:`crosscurv.numeric.protocol._between_uses`), which its reader
    may overwrite."""
    return isinstance(v, tree.lazy)


def _sub_from(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a - b`` formed in ``b`` (a temporary of the caller's): no third entry-sized tensor."""
    return torch.sub(a, b, out=b)


def _carry_errors(ctx, meas: Mapping, D: float, e: float, A: float, d: float, P: float,
                  wnorm: float) -> None:
    """Advance the error estimates' state from ``k`` to ``k + 1``
    (:class:`crosscurv.numeric.error_estimates.ErrorState`); ``sigma_k`` from the measured
    ``||w^k||`` (:func:`crosscurv.numeric.error_estimates.measured_step_remainder`)."""
    E, lr = ctx.est.errors, ctx.lr
    lam, c, G = meas["lam"], meas["c"], meas["G"]
    sigma = errs.measured_step_remainder(lr, wnorm, e)
    X = meas["Y"] + E.E
    E.E = (c * E.E + lr * lr * errs.forcing_difference(E.rho, lam, G, X, len(ctx.pattern))
           + errs.step_remainder(lr, E.rho, X, e))
    E.R = errs.propagate_remainder(E.R, c, sigma)
    E.sigma, E.G, E.lam, E.A, E.d, E.P = sigma, G, lam, A, d, P
