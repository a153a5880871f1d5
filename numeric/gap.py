"""Loss gaps without cancellation: ``L(a) - L(b)`` as an integral of the gradient.

    L(a) - L(b) = int_0^1 f(t) dt,   f(t) = grad L(b + t Delta) . Delta,   Delta = a - b,

whose round-off is relative to the gap, not to ``|L|``; inner products in float64.

* :func:`loss_gap`: ``nodes``-point Gauss-Legendre quadrature (``nodes`` gradients);
* :func:`segment_gap`: 5-point Gauss-Lobatto quadrature whose end points are gradients the caller
  has (three more gradients), with the error estimate ``|Lobatto - Simpson|`` on the same points
  plus ``4 eps sum_t |w_t| |g(t)| . |Delta|``;
* :func:`reconcile`: the record's ``(gap, gap_err)``: the segment value where it is more precise
  than the plain difference ``d = L_S - L_JC`` (error ``r``, :func:`difference_error`) and agrees
  with it within ``err + r``, else ``(d, r)``.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import torch

from .float64_sums import dot64, dot_absdot64
from .hvp import grad
from .rounding import DIFFERENCE_ULPS, difference_error, ulp

__all__ = ["GAP_NODES", "loss_gap", "segment_gap", "SegmentGap", "LOBATTO_NODES", "LOBATTO_WEIGHTS",
           "DIFFERENCE_ULPS", "ulp", "difference_error", "PLAIN_PRECISION", "plain_suffices",
           "reconcile"]

#: Gauss-Legendre nodes of :func:`loss_gap` (exact when ``grad L`` is a polynomial of degree <= 7
#: along the segment).
GAP_NODES = 4

_R = math.sqrt(3.0 / 7.0)
#: 5-point Gauss-Lobatto nodes on [0, 1] and their weights (on [-1, 1]: 0, +-sqrt(3/7), +-1; 32/45,
#: 49/90, 1/10).
LOBATTO_NODES = (0.0, 0.5 - 0.5 * _R, 0.5, 0.5 + 0.5 * _R, 1.0)
LOBATTO_WEIGHTS = (0.05, 49.0 / 180.0, 16.0 / 45.0, 49.0 / 180.0, 0.05)
#: Simpson's rule on the same end points and midpoint.
_SIMPSON = {0.0: 1.0 / 6.0, 0.5: 4.0 / 6.0, 1.0: 1.0 / 6.0}


#: The plain difference is recorded without computing the segment integral where it is already
#: within this fraction of the gap (``r <= PLAIN_PRECISION |d|``): far apart, where the 5-point rule
#: cannot be the more precise and the winner is not in doubt, its three gradients are saved.
PLAIN_PRECISION = 2.0 ** -10


def plain_suffices(loss_s: float, loss_jc: float, dtype) -> bool:
    """``difference_error(loss_s, loss_jc, dtype) <= PLAIN_PRECISION * |loss_s - loss_jc|``."""
    return difference_error(loss_s, loss_jc, dtype) <= PLAIN_PRECISION * abs(float(loss_s) - float(
        loss_jc))


def reconcile(gap: float, err: float, loss_s: float, loss_jc: float, dtype) -> tuple[float, float]:
    """The recorded ``(gap, gap_err)`` from the segment rule's ``(gap, err)`` and the two losses.

    With ``d = loss_s - loss_jc`` (in float64) and ``r = difference_error(...)``: ``(d, r)`` if
    :func:`plain_suffices` (``gap``, ``err`` unread: NaN when not computed); else ``(gap, err)`` if
    ``err < r`` and ``|gap - d| <= err + r``, else ``(d, r)``.  Idempotent.
    """
    d = float(loss_s) - float(loss_jc)
    r = difference_error(loss_s, loss_jc, dtype)
    if r <= PLAIN_PRECISION * abs(d):
        return d, r
    if err < r and abs(gap - d) <= err + r:
        return float(gap), float(err)
    return d, r


def loss_gap(task, theta_a, theta_b, nodes: int = GAP_NODES) -> float:
    """``L(theta_a) - L(theta_b)`` by ``nodes``-point Gauss-Legendre quadrature of ``grad L . (a -
    b)`` along the segment (``nodes`` gradients; exact for a quartic loss).
    """
    import numpy as np

    delta = {k: theta_a[k].detach() - theta_b[k].detach() for k in theta_b}
    xs, ws = np.polynomial.legendre.leggauss(nodes)
    total = 0.0
    for x, w in zip(xs, ws):
        t = 0.5 * (float(x) + 1.0)
        point = {k: theta_b[k].detach() + t * delta[k] for k in theta_b}
        _, g = grad(task.loss, point)
        total += 0.5 * float(w) * dot64(g, delta)
    return total


class SegmentGap:
    """Node-by-node :func:`segment_gap`: :meth:`interior`, then :meth:`add` at ``t = 0`` and ``t =
    1`` in any order, then :meth:`result`.
    """

    def __init__(self, delta: Mapping):
        self.zero = not any(bool(t.any()) for t in delta.values())
        self.dtype = next(iter(delta.values())).dtype
        self.eps = torch.finfo(self.dtype).eps
        self._f: dict[float, float] = {}
        self._absdot: dict[float, float] = {}

    def add(self, t: float, g: Mapping, delta: Mapping) -> None:
        """Node ``t`` of :data:`LOBATTO_NODES` with ``g = grad L(b + t Delta)``."""
        if self.zero:
            return
        self._f[t], self._absdot[t] = dot_absdot64(g, delta)

    def interior(self, loss: Callable, theta_b: Mapping, delta: Mapping,
                 gradient: Callable[[dict], Mapping] | None = None) -> None:
        """The three inner nodes (none when ``Delta = 0``); ``gradient(params)`` gives ``grad
        L(params)`` (default :func:`crosscurv.numeric.hvp.grad` of ``loss``).
        """
        if self.zero:
            return
        node = {k: torch.empty_like(delta[k]) for k in theta_b}  # one buffer for the three nodes
        for t in LOBATTO_NODES[1:-1]:
            for k in theta_b:  # t Delta + b: the bits of b + t Delta
                torch.mul(delta[k], t, out=node[k]).add_(theta_b[k].detach())
            g = grad(loss, node)[1] if gradient is None else gradient(node)
            self.add(t, g, delta)
            del g

    def result(self) -> tuple[float, float]:
        """``(gap, err)``: the 5-point Lobatto value and its error estimate (module docstring)."""
        if self.zero:
            return 0.0, 0.0
        gap = math.fsum(w * self._f[t] for t, w in zip(LOBATTO_NODES, LOBATTO_WEIGHTS))
        simpson = math.fsum(w * self._f[t] for t, w in _SIMPSON.items())
        mag = 0.0
        # a fixed order (inner nodes, then the ends), whatever the order of add()
        for i in (1, 2, 3, 0, 4):
            mag += LOBATTO_WEIGHTS[i] * self._absdot[LOBATTO_NODES[i]]
        return gap, abs(gap - simpson) + 4.0 * self.eps * mag


def segment_gap(loss: Callable, theta_a: Mapping, theta_b: Mapping, g_a: Mapping, g_b: Mapping,
                delta: Mapping | None = None) -> tuple[float, float]:
    """``(L(a) - L(b), error estimate)`` as floats by 5-point Gauss-Lobatto quadrature of ``grad L .
    Delta``, given ``g_a``, ``g_b`` (the end nodes) and optionally ``delta = a - b``; ``(0.0, 0.0)``
    without any gradient when ``a == b``.
    """
    if delta is None:
        delta = {k: theta_a[k].detach() - theta_b[k].detach() for k in theta_b}
    seg = SegmentGap(delta)
    seg.add(0.0, g_b, delta)
    seg.interior(loss, theta_b, delta)
    seg.add(1.0, g_a, delta)
    return seg.result()
