"""In-place vector algebra of the protocol's iteration body (parameter-space dicts of tensors).

Each helper forms the same elementwise expression, tensor by tensor, as the dict comprehension it
replaces (the same kernels on the same operands: the same bits) into a buffer that is no longer
needed, so that no second parameter-sized vector is alive while it runs. An entry whose buffers
share memory (autograd may hand back its ``grad_outputs`` unchanged) is formed out of place.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .float64_sums import norm64

__all__ = ["shares", "scaled_difference_into", "add_scaled_into", "norm_of", "step_residual"]


def step_residual(new: Mapping, old: Mapping, g: Mapping, lr: float, u: Mapping | None,
                  lr2: float) -> float:
    """``||new - old + eta g - eta^2 u||`` in float64 (``u = None``: no ``eta^2`` term), formed
    chunk by chunk (:func:`crosscurv.numeric.float64_sums.norm64`): the ``S`` step's remainder of
    Lemma 1, or the JC step's round-off.
    """
    def form(x, t, new_c, old_c, g_c, u_c):
        # the float32 operand is widened inside the kernel: exactly x - float64(old)
        x.copy_(new_c).sub_(old_c)
        x.add_(t.copy_(g_c).mul_(lr))
        if u_c is not None:
            x.sub_(t.copy_(u_c).mul_(lr2))
    return norm64(form, new, old, g, u)


def shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` live in the same storage (an in-place update of one would change the
    other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def scaled_difference_into(s: Mapping, Hs: dict, lr: float) -> dict:
    """``s - lr * Hs`` formed in ``Hs`` (``s`` unchanged); returns ``Hs``."""
    for n in Hs:
        if shares(s[n], Hs[n]):
            Hs[n] = s[n] - lr * Hs[n]
        else:
            torch.sub(s[n], Hs[n].mul_(lr), out=Hs[n])
    return Hs


def add_scaled_into(x: dict, f: dict, c: float, keep: bool = False) -> dict:
    """``x + c * f`` formed in ``x`` (``f`` overwritten by ``c * f`` unless ``keep``); returns
    ``x``.
    """
    for n in x:
        if keep or shares(x[n], f[n]):
            t = c * f[n]
        else:
            t = f[n].mul_(c)
        if shares(x[n], t):
            x[n] = x[n] + t
        else:
            x[n].add_(t)
    return x


def norm_of(keys, entry, owned: bool = False) -> float:
    """``float(tree.norm(x))`` for the vector ``x = {n: entry(n) for n in keys}``, each entry formed
    when it is summed (the same products and the same order of summation as
    :func:`crosscurv.numeric.tree.dot`). ``owned``: ``entry(n)`` returns a tensor of its own,
    squared in place (no second buffer)."""
    total = None
    for n in keys:
        x = entry(n)
        s = (x.mul_(x) if owned else x * x).sum()
        total = s if total is None else total + s
        del x
    return float(torch.sqrt(total))
