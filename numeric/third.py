"""Third directional derivatives ``D^3 L(theta)[u, v, w]`` by nested ``jvp``.

``D^3 L[u, v, w] = sum_{abc} T_abc u_a v_b w_c`` with ``T = grad^3 L(theta)`` (symmetric), needed
for the ``eta^3`` coefficient of the one-step gap (:mod:`crosscurv.numeric.one_step`). Three nested
forward-mode passes, never the ``d x d x d`` tensor; triple backward is the fallback when forward
mode is unavailable for some operation of the loss.
"""

from __future__ import annotations

from typing import Mapping

import torch

from . import tree
from .hvp import HVP_METHODS, HVPError

__all__ = ["third_derivative"]


def _third_forward(loss, p, u, v, w) -> torch.Tensor:
    def d1(q):
        return torch.func.jvp(loss, (q,), (w,))[1]

    def d2(q):
        return torch.func.jvp(d1, (q,), (v,))[1]

    return torch.func.jvp(d2, (p,), (u,))[1].detach()


def _third_reverse(loss, p, u, v, w) -> torch.Tensor:
    keys = list(p)
    q = {k: t.detach().requires_grad_(True) for k, t in p.items()}
    leaves = [q[k] for k in keys]
    zero = torch.zeros((), dtype=leaves[0].dtype, device=leaves[0].device)

    def contract(out, vec):
        terms = [(o * vec[k]).sum() for o, k in zip(out, keys) if o is not None]
        return sum(terms, zero)

    with torch.enable_grad():
        value = loss(q)
        if not value.requires_grad:
            return zero
        g = torch.autograd.grad(value, leaves, create_graph=True, allow_unused=True)
        s1 = contract(g, w)
        if not s1.requires_grad:
            return zero
        h = torch.autograd.grad(s1, leaves, create_graph=True, allow_unused=True)
        s2 = contract(h, v)
        if not s2.requires_grad:
            return zero
        t = torch.autograd.grad(s2, leaves, allow_unused=True)
    return contract(t, u).detach()


def third_derivative(loss, params: Mapping, u: Mapping, v: Mapping, w: Mapping,
                     method: str = "auto") -> torch.Tensor:
    """``D^3 L(theta)[u, v, w]`` as a detached 0-dim tensor in the parameters' dtype.

    Args:
        loss: ``loss(params) -> 0-dim tensor``, three times differentiable.
        params: the point ``theta``.
        u, v, w: directions keyed and shaped like ``params``.
        method: ``"forward"`` (nested ``torch.func.jvp``), ``"reverse"``
            (triple backward) or ``"auto"`` (forward, else reverse).
    """
    if method not in HVP_METHODS:
        raise HVPError(f"unknown HVP method {method!r} (use {', '.join(HVP_METHODS)})")
    p = tree.detach(params)
    u, v, w = (tree.conform(x, params, HVPError) for x in (u, v, w))
    if method == "reverse":
        return _third_reverse(loss, p, u, v, w)
    if method == "forward":
        return _third_forward(loss, p, u, v, w)
    try:
        return _third_forward(loss, p, u, v, w)
    except HVPError:
        raise
    except Exception:
        return _third_reverse(loss, p, u, v, w)
