"""Gradients and Hessian-vector products ``H(theta) v`` without forming ``H``.

Parameter-space vectors are dicts of tensors keyed like the parameters
(:mod:`numeric.tree`).  ``loss`` is a pure function ``loss(params) -> 0-dim
tensor`` (the :class:`numeric.Task` contract).

HVP methods (DESIGN.md, "Computation notes"):

* ``"forward"``: forward-over-reverse, ``torch.func.jvp`` of ``torch.func.grad``
  (the default; the tangent of the gradient map along ``v`` is ``H v``);
* ``"reverse"``: double backward, ``torch.autograd.grad`` of
  ``grad L(theta)^T v`` built with ``create_graph=True``;
* ``"auto"``: ``"forward"``, falling back to ``"reverse"`` once if the forward
  method raises (some kernels have no forward-mode or double derivative); the
  choice is remembered per ``loss`` object (see :func:`hvp_choice`).

:func:`hvp_batch` evaluates several products at one point in one ``vmap``
call where the model allows, and remembers per ``loss`` and method when it
does not (it then loops).
"""

from __future__ import annotations

import weakref
from typing import Callable, Mapping, Sequence

import torch

from theory.errors import InputError

from . import tree

__all__ = [
    "HVP_METHODS",
    "HVPError",
    "grad",
    "block_grad",
    "hvp",
    "hvp_batch",
    "hvp_choice",
]

#: Accepted ``method`` values.
HVP_METHODS = ("auto", "forward", "reverse")

Loss = Callable[[dict], torch.Tensor]


class HVPError(InputError):
    """A bad HVP request: unknown method, or a vector not shaped like the parameters."""


# -- per-loss memory of what works -------------------------------------------
# Keyed weakly by the loss function object so that dropping a task drops its
# entries.  Losses that cannot be weakly referenced are simply not remembered.
_auto_choice: "weakref.WeakKeyDictionary[Loss, str]" = weakref.WeakKeyDictionary()
_no_vmap: "weakref.WeakKeyDictionary[Loss, set]" = weakref.WeakKeyDictionary()


def _remember(store, loss, value) -> None:
    try:
        store[loss] = value
    except TypeError:  # not weak-referenceable: do not remember
        pass


def _lookup(store, loss, default=None):
    try:
        return store.get(loss, default)
    except TypeError:
        return default


def hvp_choice(loss: Loss) -> dict:
    """What :func:`hvp` / :func:`hvp_batch` learned about ``loss``.

    Returns:
        ``{"auto": "forward" | "reverse" | None, "no_vmap": [methods]}``;
        ``None`` means ``"auto"`` has not needed a fallback (it uses
        ``"forward"``).
    """
    return {
        "auto": _lookup(_auto_choice, loss),
        "no_vmap": sorted(_lookup(_no_vmap, loss, set())),
    }


def _check_method(method: str) -> None:
    if method not in HVP_METHODS:
        raise HVPError(f"unknown HVP method {method!r} (use {', '.join(HVP_METHODS)})")


def _current(loss: Loss, method: str) -> str:
    """The concrete method ``method`` stands for now (resolves ``"auto"``)."""
    if method == "auto":
        return _lookup(_auto_choice, loss) or "forward"
    return method


def _primal(params: Mapping) -> dict:
    return {k: v.detach() for k, v in params.items()}


def _tangent(v: Mapping, params: Mapping) -> dict:
    """``v`` checked against and cast to the parameters' keys, shapes, dtype, device."""
    missing = [k for k in params if k not in v]
    extra = [k for k in v if k not in params]
    if missing or extra:
        raise HVPError(
            "vector keys differ from the parameters'"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {extra}" if extra else "")
        )
    out = {}
    for k, p in params.items():
        t = v[k]
        if tuple(t.shape) != tuple(p.shape):
            raise HVPError(f"vector entry {k!r} has shape {tuple(t.shape)}, parameter has {tuple(p.shape)}")
        out[k] = t.detach().to(dtype=p.dtype, device=p.device)
    return out


# -- gradients -----------------------------------------------------------------
def block_grad(loss: Loss, params: Mapping, keys: Sequence[str]) -> dict:
    """Gradient of ``loss`` with respect to the parameters in ``keys`` only.

    The other parameters are held fixed (they do not require grad, so autograd
    skips their weight gradients).

    Args:
        loss: ``loss(params) -> 0-dim tensor``.
        params: the point, ``dict[str, Tensor]``.
        keys: parameter names to differentiate with respect to.

    Returns:
        ``{key: tensor}`` for ``key in keys`` (detached, shapes of the
        parameters; zeros for a parameter the loss does not depend on).
    """
    keys = list(keys)
    unknown = [k for k in keys if k not in params]
    if unknown:
        raise HVPError(f"block_grad: unknown parameter names {unknown}")
    p = _primal(params)
    leaves = {k: p[k].detach().requires_grad_(True) for k in keys}
    p.update(leaves)
    with torch.enable_grad():
        value = loss(p)
        if not value.requires_grad:
            return {k: torch.zeros_like(leaves[k]) for k in keys}
        gs = torch.autograd.grad(value, [leaves[k] for k in keys], allow_unused=True)
    return {k: (g.detach() if g is not None else torch.zeros_like(leaves[k])) for k, g in zip(keys, gs)}


def grad(loss: Loss, params: Mapping) -> tuple[torch.Tensor, dict]:
    """Loss value and full gradient ``(L(theta), grad L(theta))`` by one backward pass.

    Returns:
        ``(value, g)``: ``value`` a detached 0-dim tensor, ``g`` a dict keyed
        like ``params`` (detached).
    """
    keys = list(params)
    p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        value = loss(p)
        if not value.requires_grad:
            return value.detach(), {k: torch.zeros_like(p[k]) for k in keys}
        gs = torch.autograd.grad(value, [p[k] for k in keys], allow_unused=True)
    g = {k: (gk.detach() if gk is not None else torch.zeros_like(p[k])) for k, gk in zip(keys, gs)}
    return value.detach(), g


# -- one HVP -------------------------------------------------------------------
def _hvp_forward(loss: Loss, params: Mapping, v: Mapping) -> dict:
    """Forward-over-reverse: the jvp of ``torch.func.grad(loss)`` along ``v``."""
    p = _primal(params)
    _, hv = torch.func.jvp(torch.func.grad(loss), (p,), (v,))
    return {k: hv[k].detach() for k in p}


def _reverse_core(loss: Loss, params: Mapping, grad_outputs: list, batched: bool) -> list:
    """Double backward: ``d/dtheta <grad L(theta), v>`` (``v`` stacked when ``batched``)."""
    keys = list(params)
    p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    zeros = [torch.zeros_like(o) for o in grad_outputs]
    with torch.enable_grad():
        value = loss(p)
        if not value.requires_grad:
            return zeros
        gs = torch.autograd.grad(value, [p[k] for k in keys], create_graph=True, allow_unused=True)
        outs, gos = [], []
        for g, go in zip(gs, grad_outputs):
            if g is not None and g.requires_grad:
                outs.append(g)
                gos.append(go)
        if not outs:  # gradient independent of theta: H = 0
            return zeros
        hs = torch.autograd.grad(
            outs, [p[k] for k in keys], grad_outputs=gos, allow_unused=True, is_grads_batched=batched
        )
    return [h.detach() if h is not None else z for h, z in zip(hs, zeros)]


def _hvp_reverse(loss: Loss, params: Mapping, v: Mapping) -> dict:
    hs = _reverse_core(loss, params, [v[k] for k in params], batched=False)
    return dict(zip(params, hs))


_SINGLE = {"forward": _hvp_forward, "reverse": _hvp_reverse}


def hvp(loss: Loss, params: Mapping, v: Mapping, method: str = "auto") -> dict:
    """Hessian-vector product ``H(theta) v`` (``H = grad^2 L(theta)``), never forming ``H``.

    Args:
        loss: ``loss(params) -> 0-dim tensor``, twice differentiable.
        params: the point ``theta``, ``dict[str, Tensor]``.
        v: direction, keyed and shaped like ``params`` (cast to their dtype).
        method: ``"forward"``, ``"reverse"`` or ``"auto"`` (module docstring).

    Returns:
        ``H v`` as a detached dict keyed like ``params``.
    """
    _check_method(method)
    t = _tangent(v, params)
    m = _current(loss, method)
    if method != "auto" or m == "reverse":
        return _SINGLE[m](loss, params, t)
    try:
        return _hvp_forward(loss, params, t)
    except Exception as exc:  # no forward-mode / functorch support somewhere
        try:
            out = _hvp_reverse(loss, params, t)
        except Exception as exc2:
            raise exc2 from exc
        _remember(_auto_choice, loss, "reverse")
        return out


# -- several HVPs at one point --------------------------------------------------
def _batched(loss: Loss, params: Mapping, ts: list, method: str, chunk_size) -> list:
    stacked = tree.stack(ts)
    p = _primal(params)
    if method == "forward":
        def one(t):
            return torch.func.jvp(torch.func.grad(loss), (p,), (t,))[1]

        out = torch.func.vmap(one, chunk_size=chunk_size)(stacked)
        return tree.unstack({k: out[k].detach() for k in p})
    hs = _reverse_core(loss, p, [stacked[k] for k in p], batched=True)
    return tree.unstack(dict(zip(p, hs)))


def _vmap_ok(loss: Loss, method: str) -> bool:
    return method not in _lookup(_no_vmap, loss, set())


def _mark_no_vmap(loss: Loss, method: str) -> None:
    _remember(_no_vmap, loss, _lookup(_no_vmap, loss, set()) | {method})


def hvp_batch(
    loss: Loss,
    params: Mapping,
    vs: Sequence[Mapping],
    method: str = "auto",
    chunk_size: int | None = None,
) -> list:
    """Several HVPs ``[H v_1, ..., H v_m]`` at one point.

    Batched with ``torch.func.vmap`` (``"forward"``) or a batched double
    backward (``"reverse"``, ``is_grads_batched``).  If batching fails for
    this loss and method, the products are computed one by one, and later
    calls go straight to the loop (see :func:`hvp_choice`).

    Args:
        loss, params, method: as in :func:`hvp`.
        vs: list of ``m`` directions keyed like ``params``.
        chunk_size: at most this many products per ``vmap`` chunk (memory
            cap); ``None`` means all ``m`` at once.

    Returns:
        list of ``m`` dicts, ``H v_l`` for each direction in order.
    """
    _check_method(method)
    ts = [_tangent(v, params) for v in vs]
    if not ts:
        return []
    if len(ts) == 1:
        return [hvp(loss, params, ts[0], method)]
    m = _current(loss, method)
    if not _vmap_ok(loss, m):
        return [hvp(loss, params, t, method) for t in ts]
    try:
        return _batched(loss, params, ts, m, chunk_size)
    except Exception:
        pass
    # Was it the batching or the method itself?  One plain product decides
    # (and, for "auto", switches to "reverse" when "forward" is at fault).
    first = hvp(loss, params, ts[0], method)
    m2 = _current(loss, method)
    if m2 == m:
        _mark_no_vmap(loss, m)
    elif _vmap_ok(loss, m2):
        try:
            return [first] + _batched(loss, params, ts[1:], m2, chunk_size)
        except Exception:
            _mark_no_vmap(loss, m2)
    return [first] + [hvp(loss, params, t, method) for t in ts[1:]]
