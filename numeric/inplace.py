"""In-place vector algebra of the protocol's iteration body (parameter-space dicts of tensors).

Each helper forms the same elementwise expression, tensor by tensor, as the dict comprehension it
replaces (the same kernels on the same operands: the same bits) into a buffer that is no longer
needed, so that no second parameter-sized vector is alive while it runs.  An entry whose buffers
share memory (autograd may hand back its ``grad_outputs`` unchanged) is formed out of place.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

__all__ = ["shares", "sub_scaled_into", "scaled_difference_into", "add_scaled_into", "norm_of", "step_residual"]


def step_residual(new: Mapping, old: Mapping, g: Mapping, lr: float, u: Mapping | None, lr2: float) -> float:
    """``||new - old + eta g - eta^2 u||`` in float64 (``u = None``: no ``eta^2`` term): the scheme's remainder
    ``eta^3 eps^k`` of Lemma 1 for the ``S`` step (with the step's round-off), the JC step's round-off without ``u``.

    Each entry is the float64 expression ``new - old + lr * g [- lr2 * u]`` of the float64 copies, evaluated left
    to right with every product rounded once (the same bits as the out-of-place expression), in two float64
    buffers: the copy of ``new_n`` that collects the sum and one that takes each scaled term in turn."""
    def r(n):
        x = new[n].to(torch.float64, copy=True)
        x.sub_(old[n])  # the float32 operand is widened inside the kernel: exactly x - float64(old)
        t = g[n].to(torch.float64, copy=True).mul_(lr)
        x.add_(t)
        if u is not None:
            x.sub_(t.copy_(u[n]).mul_(lr2))
        return x
    return norm_of(new, r, owned=True)


def shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` live in the same storage (an in-place update of one would change the other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def sub_scaled_into(s: dict, Hs: dict, lr: float) -> dict:
    """``s - lr * Hs`` (:func:`crosscurv.numeric.estimates.propagate` without forcing), formed in ``s``
    (``Hs`` is overwritten by ``lr * Hs``); returns ``s``."""
    for n in s:
        if shares(s[n], Hs[n]):
            s[n] = s[n] - lr * Hs[n]
        else:
            s[n].sub_(Hs[n].mul_(lr))
    return s


def scaled_difference_into(s: Mapping, Hs: dict, lr: float) -> dict:
    """``s - lr * Hs`` formed in ``Hs`` (``s`` unchanged); returns ``Hs``."""
    for n in Hs:
        if shares(s[n], Hs[n]):
            Hs[n] = s[n] - lr * Hs[n]
        else:
            torch.sub(s[n], Hs[n].mul_(lr), out=Hs[n])
    return Hs


def add_scaled_into(x: dict, f: dict, c: float, keep: bool = False) -> dict:
    """``x + c * f`` formed in ``x`` (``f`` overwritten by ``c * f`` unless ``keep``); returns ``x``."""
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
    """``float(tree.norm(x))`` for the vector ``x = {n: entry(n) for n in keys}``, each entry formed when
    it is summed (the same products and the same order of summation as :func:`crosscurv.numeric.tree.dot`).
    ``owned``: ``entry(n)`` returns a tensor of its own, squared in place (no second buffer)."""
    total = None
    for n in keys:
        x = entry(n)
        s = (x.mul_(x) if owned else x * x).sum()
        total = s if total is None else total + s
        del x
    return float(torch.sqrt(total))
