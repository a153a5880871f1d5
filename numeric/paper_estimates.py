"""The paper's estimates as an observer of the protocol's iteration ``k``
(:func:`crosscurv.numeric.protocol.run_protocol`).

The protocol's body advances the JC and ``S`` runs and the carried states; at ``theta_JC^k`` it
hands this observer what the estimates of ``k`` need, as it has them, and shares with it the
products ``H_JC^k [p_k, z_k, y_k, Delta^k]`` that also advance the states:

* ``g_JC^k`` and ``||g_S^k||``: the running gradient bound ``G`` (Theorem 3's constant), and
  with the pending term ``w_k`` the recursive estimate (Theorem 2, Lemma 3)
  ``recursive = g_JC^k . w_k + q_k``;
* ``(p_k, H p_k)``: one power step, ``sharpness = p_k^T H_JC^k p_k`` (folded into ``L``), then the
  converged extreme eigenpairs of ``H_JC^k`` (:func:`extremes`);
* ``(z_k, H z_k)``: the cumulative estimate (Theorem 3)
  ``cumulative = g_JC^k . z_k + z_k . H z_k / 2``;
* ``(y_k, H y_k)``: the JC-only estimate ``jc_only = g_JC^k . y_k + y_k . H y_k / 2``;
* ``(Delta^k, H Delta^k)``: ``q_{k+1} = Delta^k . H Delta^k / 2``.

It writes the estimates into the record of ``k`` and what their error estimates measure (``G``,
``G_s``, ``Z``, ``Y``, ``lam``, ``c``, ``top``) into ``meas``
(:mod:`crosscurv.numeric.error_estimates`, through the run's update rule). It only reads the vectors
and products it is handed, but for ``H p_k``, in whose tensors ``p_{k+1}`` is formed; the body
advances the other states in their products' tensors afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from . import tree
from .estimates import Extremes, quadratic_from_linear, recursive_estimate, track_extremes

__all__ = ["PaperEstimates", "extremes"]


class PaperEstimates:
    """The observer of one run's body ``ctx`` (:class:`crosscurv.numeric.protocol.RunContext`: its
    ``store``, the estimates' scalar state ``est``, ``lr``, ``settings``)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def gradients(self, k: int, gj: Mapping, gs_norm: float, record: dict, meas: dict) -> None:
        """``||g_JC^k||``, then ``||g_S^k||``, folded into ``G`` (and into ``meas``); ``recursive =
        g_JC^k . w_k + q_k`` (``k >= 1``)."""
        est = self.ctx.est
        meas["G"] = est.observe_gradient_norm(float(tree.norm(gj)))
        meas["G_s"] = est.observe_gradient_norm(gs_norm)
        if k >= 1:
            record["recursive"] = float(recursive_estimate(gj, self.ctx.store.fetch("w"), est.q))

    def product(self, k: int, name: str, v: Mapping, Hv: Mapping, gj: Mapping, record: dict,
                meas: dict) -> None:
        """The product ``H_JC^k v`` of the carried vector ``name`` (module docstring); ``p`` of ``k
        + 1`` is formed in ``Hv``'s tensors and parked."""
        est = self.ctx.est
        if name == "p":
            self.ctx.store.park("p", est.observe_power(v, Hv))
            record["sharpness"] = est.rayleigh
        elif name == "z":
            meas["Z"] = float(tree.norm(v))
            if k >= 1:
                record["cumulative"] = float(quadratic_from_linear(tree.dot(gj, v), v, Hv))
        elif name == "y":
            meas["Y"] = float(tree.norm(v))
            if k >= 1:
                record["jc_only"] = float(quadratic_from_linear(tree.dot(gj, v), v, Hv))
        else:  # delta
            est.q = 0.5 * tree.dot(v, Hv)

    def extremes(self, k: int, at_j, theta_j: Mapping, record: dict, meas: dict) -> None:
        """After the power step: :func:`extremes`."""
        extremes(self.ctx, k, at_j, theta_j, record, meas)


def extremes(ctx, k: int, at_j, theta_j: Mapping, record: dict, meas: dict) -> None:
    """The converged extreme eigenpairs of ``H_JC^k``
    (:func:`crosscurv.numeric.estimates.track_extremes`, warm-started from the carried ``vmax``,
    ``vmin``) into the record and ``meas`` (``lam = ||H||``, ``c = ||I - eta H||``)."""
    S, est = ctx.store, ctx.est
    # fetched only if the solve reads them (between solves it returns them unchanged: nothing
    # to park)
    vmax, vmin = (_Parked(S, "vmax"), _Parked(S, "vmin")) if S.holds("vmax") else (None, None)
    prev = None if vmax is None else Extremes(est.lam_max, est.lam_min, vmax, vmin, 0, 0.0, False)
    seed = int(ctx.settings.get("seed") or 0)
    try:
        ext = track_extremes(at_j.hvp, theta_j, prev, k, seed=seed, store=S)
    except (ValueError, RuntimeError, ArithmeticError):  # non-finite products (a diverging run)
        ext = Extremes(math.nan, math.nan, vmax, vmin, 0, math.nan, False)
    est.lam_max, est.lam_min = ext.lam_max, ext.lam_min
    if ext.v_max is not vmax:
        S.park("vmax", ext.v_max)
    if ext.v_min is not vmin:
        S.park("vmin", ext.v_min)
    record["lambda_max"], record["lambda_min"] = ext.lam_max, ext.lam_min
    record["sharpness_hvps"] = ext.hvps
    # between converged iterations the power iteration's p^T H_JC^k p (a lower bound of
    # lambda_max(H_JC^k), taken anyway) keeps the regime test and ||H|| current
    top = ext.lam_max if not math.isfinite(est.rayleigh) else max(ext.lam_max, est.rayleigh)
    low = ext.lam_min if not math.isfinite(est.rayleigh) else min(ext.lam_min, est.rayleigh)
    meas["top"] = top
    meas["lam"] = max(abs(top), abs(low))
    meas["c"] = max(abs(1.0 - ctx.lr * top), abs(1.0 - ctx.lr * low))


class _Parked(Mapping):
    """A vector parked in a store under ``name``, read-only, fetched on its first use."""

    def __init__(self, store, name: str):
        self._store, self._name, self._v = store, name, None

    def _vector(self) -> dict:
        if self._v is None:
            self._v = self._store.fetch(self._name)
        return self._v

    def __getitem__(self, key):
        return self._vector()[key]

    def __iter__(self):
        return iter(self._vector())

    def __len__(self) -> int:
        return len(self._vector())
