"""Loss-gap estimates along the JC and pattern-``S`` trajectories (paper, Section 4.2).

Notation (paper, Section 4.2.1): ``theta_JC^k`` and ``theta_S^k`` are the two
trajectories from the common ``theta^0`` with constant step ``eta``;
``Delta theta^k = theta_S^k - theta_JC^k``; ``g_JC^k``, ``H_JC^k`` the gradient
and Hessian at ``theta_JC^k``; ``u^k = M_S(theta_S^k) g_S^k`` the freshness
forcing (``M_S`` keeps the Hessian blocks ``H_ij`` with ``(i, j) in S``).

Implemented quantities (all parameter-space vectors are dicts of tensors with
the parameters' keys, shapes, dtype and device; scalars are 0-dim tensors of
the same dtype unless said otherwise):

* Lemma 3 / Theorem 3 propagation (:func:`propagate`)::

      s_{k+1} = (I - eta H_JC^k) s_k + eta^2 f^k

  with ``s = z`` and ``f^k = u^k`` this is the cumulative state of Theorem 3,
  ``z_K = eta^2 sum_j Phi_{K,j+1} M_S^j g_S^j`` (``z_0 = 0``), computed forward
  with one HVP per iteration (``O(K)`` HVPs in total, not ``O(K^2)``); with
  ``s = y`` and ``f^k = M_S(theta_JC^k) g_JC^k`` it is the JC-only state.
* Theorem 3's signed estimate (:func:`quadratic_estimate`)::

      cumulative^K = g_JC^K . z_K + 1/2 z_K . H_JC^K z_K

  (the HVP ``H_JC^K z_K`` also propagates ``z`` to ``K + 1``).
* Theorem 2 with the measured difference (:func:`recursive_estimate`, with
  ``w`` and ``q`` formed by the protocol)::

      recursive^{k+1} = g_JC^{k+1} . [(I - eta H_JC^k) Delta^k + eta^2 u^k]
                        + 1/2 Delta^k . H_JC^k Delta^k

  which is the paper's three terms (propagation, quadratic, freshness) with
  the two ``g_JC^{k+1}`` products merged into one inner product.
* Theorem 3's magnitude bound (:func:`bk_radius`, :func:`bound_bk`)::

      b_k = eta^2 sum_{j<k} (1 + eta L)^{k-1-j} ||u^j||,   bound_bk^k = G b_k + L/2 b_k^2.

``G`` and ``L`` (Assumption 1, A1-A2) are not known for a real model.  The
protocol uses *a-posteriori estimates*, not certified constants:

* ``G`` = running maximum of ``||g||`` over every gradient evaluated so far on
  both trajectories (a lower estimate of the sup over the region Omega);
* ``L`` = running maximum of ``|p^T H_JC^k p|`` (Rayleigh quotient, ``||p|| = 1``)
  of a power iteration on ``H_JC^k`` warm-started from the previous
  iteration's vector, one HVP per iteration (a lower estimate of
  ``sup ||H||``; the Hessian along the ``S`` trajectory is not probed).

``b_k`` is recomputed from the stored ``||u^j||`` with the current ``L`` at every
``k`` (Horner's rule, float64), so the bound always uses the latest ``L``.
Because ``G`` and ``L`` can only underestimate the true constants, ``bound_bk``
is an estimate of Theorem 3's bound, not a guaranteed one.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from . import tree

__all__ = [
    "propagate",
    "quadratic_estimate",
    "quadratic_from_linear",
    "recursive_estimate",
    "bk_radius",
    "bound_bk",
    "init_power_vector",
    "power_step",
    "EstimateState",
]


def propagate(s: Mapping, Hs: Mapping, forcing: Mapping | None, lr: float) -> dict:
    """``(I - eta H) s + eta^2 f`` (Lemma 3's linearised trajectory recursion).

    Args:
        s: state vector ``s_k`` (dict of tensors).
        Hs: ``H_JC^k s_k`` (same keys and shapes).
        forcing: ``f^k`` (``M_S g``), or ``None`` for no forcing.
        lr: the step ``eta``.

    Returns:
        ``s_{k+1}`` as a new dict.
    """
    lr2 = lr * lr
    if forcing is None:
        return {k: s[k] - lr * Hs[k] for k in s}
    return {k: (s[k] - lr * Hs[k]) + lr2 * forcing[k] for k in s}


def quadratic_estimate(g: Mapping, z: Mapping, Hz: Mapping) -> torch.Tensor:
    """``g^T z + 1/2 z^T H z`` (Theorem 3, eq. signed_cumulative_loss), a 0-dim tensor."""
    return quadratic_from_linear(tree.dot(g, z), z, Hz)


def quadratic_from_linear(gz: torch.Tensor, z: Mapping, Hz: Mapping) -> torch.Tensor:
    """:func:`quadratic_estimate` with ``g^T z`` already computed (``gz``): ``gz + 1/2 z^T H z``.

    For a caller that has to drop ``g`` before ``H z`` is formed (the protocol's
    lean-memory engine); the result is bit for bit the same.
    """
    return gz + 0.5 * tree.dot(z, Hz)


def recursive_estimate(g_next: Mapping, w: Mapping, q: torch.Tensor) -> torch.Tensor:
    """``g_JC^{k+1} . w + q`` (Theorem 2 with the measured ``Delta theta^k``)."""
    return tree.dot(g_next, w) + q


def bk_radius(unorms: Sequence[float], lr: float, L: float) -> float:
    """``b_k = eta^2 sum_{j<k} (1 + eta L)^{k-1-j} ||u^j||`` for ``k = len(unorms)`` (float64)."""
    c = 1.0 + lr * L
    acc = 0.0
    for un in unorms:  # Horner: ((u0 c + u1) c + u2) ...
        acc = acc * c + un
    return lr * lr * acc


def bound_bk(unorms: Sequence[float], lr: float, G: float, L: float) -> float:
    """Theorem 3's bound ``G b_k + L/2 b_k^2`` with estimated ``G``, ``L`` (float64)."""
    b = bk_radius(unorms, lr, L)
    return G * b + 0.5 * L * b * b


def init_power_vector(like: Mapping, seed: int) -> dict:
    """A seeded random unit vector keyed like ``like`` (same on every device).

    Drawn in float64 on the CPU from ``torch.Generator().manual_seed(seed)`` in
    key order, normalised, then cast to ``like``'s dtype and device.
    """
    gen = torch.Generator().manual_seed(int(seed))
    raw = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in like.items()}
    n = tree.norm(raw)
    return {k: (raw[k] / n).to(dtype=like[k].dtype, device=like[k].device) for k in like}


def power_step(p: Mapping, Hp: Mapping) -> tuple[float, dict]:
    """One warm-started power-iteration step on ``H``.

    Args:
        p: current unit vector.
        Hp: ``H p``.

    Returns:
        ``(rayleigh, p_next)``: ``rayleigh = p^T H p`` as a Python float and
        ``p_next = H p / ||H p||`` (``p`` itself when ``H p`` is zero or not
        finite).
    """
    rq = float(tree.dot(p, Hp))
    n = float(tree.norm(Hp))
    if n > 0 and math.isfinite(n):
        return rq, {k: Hp[k] / n for k in Hp}
    return rq, dict(p)


class EstimateState:
    """The scalars the estimates carry from iteration ``k`` to ``k + 1`` (resumable).

    The parameter-sized vectors (``z``, ``y``, the pending recursive term ``w``,
    the power vector ``p``) live in the protocol's store
    (:mod:`numeric.offload`), updated by :func:`propagate`; this holds the rest.

    Attributes:
        q: pending quadratic term ``1/2 Delta^{k-1} . H_JC^{k-1} Delta^{k-1}``
            (``None`` at ``k = 0``).
        unorms: ``[||u^0||, ..., ||u^{k-1}||]`` (Python floats).
        G, L: running estimates (module docstring).
        rayleigh: the last power-iteration estimate ``p^T H_JC^k p``.
    """

    def __init__(self):
        self.q: torch.Tensor | None = None
        self.unorms: list[float] = []
        self.G = 0.0
        self.L = 0.0
        self.rayleigh = math.nan

    def observe_gradients(self, *grads: Mapping) -> None:
        """Fold ``||g||`` of each gradient into ``G`` (non-finite norms skipped)."""
        for g in grads:
            n = float(tree.norm(g))
            if math.isfinite(n):
                self.G = max(self.G, n)

    def observe_power(self, p: Mapping, Hp: Mapping) -> dict:
        """One power step with ``H_JC^k p``: fold ``|p^T H p|`` into ``L``; returns the next vector."""
        self.rayleigh, p_next = power_step(p, Hp)
        if math.isfinite(self.rayleigh):
            self.L = max(self.L, abs(self.rayleigh))
        return p_next

    def bound(self, lr: float) -> float:
        """Theorem 3's bound at ``k = len(unorms)`` with the current ``G`` and ``L`` (float64)."""
        return bound_bk(self.unorms, lr, self.G, self.L)

    def state_dict(self) -> dict:
        """What :meth:`from_state_dict` needs to continue bit for bit (for ``torch.save``)."""
        return {"q": self.q, "unorms": list(self.unorms), "G": self.G, "L": self.L, "rayleigh": self.rayleigh}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> "EstimateState":
        obj = cls()
        q = state["q"]
        if q is not None and not isinstance(q, torch.Tensor):
            raise TypeError("q")
        obj.q = q
        obj.unorms = [float(x) for x in state["unorms"]]
        obj.G = float(state["G"])
        obj.L = float(state["L"])
        obj.rayleigh = float(state.get("rayleigh", math.nan))
        return obj
