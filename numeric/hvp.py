"""Gradients and Hessian-vector products ``H(theta) v`` without forming ``H``.

Vectors are dicts of tensors keyed like the parameters (:mod:`crosscurv.numeric.tree`); ``loss`` is
a pure function ``loss(params) -> 0-dim tensor``. HVP methods:

* ``"forward"``: forward-over-reverse, ``torch.func.jvp`` of ``torch.func.grad``;
* ``"reverse"``: double backward, ``torch.autograd.grad`` of ``grad L(theta)^T v``;
* ``"rof"``: reverse-over-forward, ``torch.func.grad`` of ``DL(theta)[v]``;
* ``"auto"`` (everywhere in crosscurv): ``"reverse"`` where the model has a double derivative,
  else ``"forward"``, decided afresh at each call (:func:`resolve_method` decides once).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import torch

from crosscurv.theory.errors import HVPError

from . import tree

__all__ = ["HVP_METHODS", "HVPError", "grad", "block_grad", "hvp", "hvp_batch", "grad_and_hvp",
           "tune_hvp", "resolve_method", "backward_of"]

#: Accepted ``method`` values.
HVP_METHODS = ("auto", "forward", "reverse", "rof")

Loss = Callable[[dict], torch.Tensor]


def _check_method(method: str) -> None:
    if method not in HVP_METHODS:
        raise HVPError(f"unknown HVP method {method!r} (use {', '.join(HVP_METHODS)})")


def _primal(params: Mapping) -> dict:
    return {k: v.detach() for k, v in params.items()}


# -- gradients -----------------------------------------------------------------
def block_grad(loss: Loss, params: Mapping, keys: Sequence[str]) -> dict:
    """Gradient of ``loss`` with respect to the parameters in ``keys`` only, the others held fixed:
    ``{key: tensor}``, detached (zeros where the loss does not depend on it).
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
    return {k: (g.detach() if g is not None else torch.zeros_like(leaves[k]))
            for k, g in zip(keys, gs)}


def grad(loss: Loss, params: Mapping) -> tuple[torch.Tensor, dict]:
    """``(L(theta), grad L(theta))`` by one backward pass: a detached 0-dim tensor and a detached
    dict keyed like ``params``.
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


def backward_of(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                grad_outputs: Sequence[torch.Tensor], retain_graph: bool = False) -> tuple:
    """``sum_i grad_outputs[i]^T d outputs[i] / d inputs``, one tensor per input (``None`` where no
    output depends on it): ``torch.autograd.grad(..., allow_unused=True)`` by the same engine call,
    with the shapes compared directly (no import of torch.fx's symbolic shapes).

    ``grad_outputs[i]`` is shaped like ``outputs[i]``, both real or both complex, else
    ``RuntimeError``.
    """
    outputs, inputs, grad_outputs = tuple(outputs), tuple(inputs), tuple(grad_outputs)
    if len(outputs) != len(grad_outputs):
        raise RuntimeError(f"{len(grad_outputs)} grad_outputs for {len(outputs)} outputs")
    for i, (out, go) in enumerate(zip(outputs, grad_outputs)):
        if out.shape != go.shape or out.dtype.is_complex != go.dtype.is_complex:
            raise RuntimeError(f"grad_outputs[{i}] is {go.dtype} {tuple(go.shape)}, "
                               f"its output {out.dtype} {tuple(out.shape)}")
    if _ENGINE is None or any(type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter)
                              for t in outputs + inputs + grad_outputs):
        return torch.autograd.grad(outputs, inputs, grad_outputs=grad_outputs,
                                   retain_graph=retain_graph, allow_unused=True)
    return _ENGINE(outputs, grad_outputs, retain_graph, False, inputs, True, accumulate_grad=False)


try:  # the engine call behind torch.autograd.grad (torch >= 2.1)
    from torch.autograd.graph import _engine_run_backward as _ENGINE
except ImportError:  # pragma: no cover - another torch
    _ENGINE = None


# -- one HVP -------------------------------------------------------------------
def _hvp_forward(loss: Loss, params: Mapping, v: Mapping) -> dict:
    """Forward-over-reverse: the jvp of ``torch.func.grad(loss)`` along ``v``."""
    p = _primal(params)
    _, hv = torch.func.jvp(torch.func.grad(loss), (p,), (v,))
    return {k: hv[k].detach() for k in p}


def _reverse_core(loss: Loss, params: Mapping, grad_outputs: list, batched: bool) -> tuple:
    """Double backward ``d/dtheta <grad L(theta), v>`` (``v`` stacked when ``batched``): ``(value,
    [grad L entries], [H v entries])``.
    """
    keys = list(params)
    p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    zeros = [torch.zeros_like(o) for o in grad_outputs]
    with torch.enable_grad():
        value = loss(p)
        if not value.requires_grad:
            return value.detach(), [torch.zeros_like(p[k]) for k in keys], zeros
        gs = torch.autograd.grad(value, [p[k] for k in keys], create_graph=True, allow_unused=True)
        g = [gk.detach() if gk is not None else torch.zeros_like(p[k]) for gk, k in zip(gs, keys)]
        outs, gos = [], []
        for gk, go in zip(gs, grad_outputs):
            if gk is not None and gk.requires_grad:
                outs.append(gk)
                gos.append(go)
        if not outs:  # gradient independent of theta: H = 0
            return value.detach(), g, zeros
        inputs = [p[k] for k in keys]
        hs = (torch.autograd.grad(outs, inputs, grad_outputs=gos, allow_unused=True,
                                  is_grads_batched=True)
              if batched else backward_of(outs, inputs, gos))
    return value.detach(), g, [h.detach() if h is not None else z for h, z in zip(hs, zeros)]


def _hvp_reverse(loss: Loss, params: Mapping, v: Mapping) -> dict:
    _, _, hs = _reverse_core(loss, params, [v[k] for k in params], batched=False)
    return dict(zip(params, hs))


def _rof_one(loss: Loss, p: dict, t: dict) -> dict:
    """Reverse-over-forward: ``grad_theta`` of the directional derivative ``DL(theta)[t]``."""
    return torch.func.grad(lambda q: torch.func.jvp(loss, (q,), (t,))[1])(p)


def _hvp_rof(loss: Loss, params: Mapping, v: Mapping) -> dict:
    p = _primal(params)
    hv = _rof_one(loss, p, v)
    return {k: hv[k].detach() for k in p}


_SINGLE = {"forward": _hvp_forward, "reverse": _hvp_reverse, "rof": _hvp_rof}


def _with_auto_fallback(method: str, run: Callable[[str], object]):
    """``run(method)``; under ``"auto"``: ``run("reverse")``, else ``run("forward")`` if that
    raises."""
    if method != "auto":
        return run(method)
    try:
        return run("reverse")
    except Exception as exc:  # no double derivative for some kernel
        try:
            return run("forward")
        except Exception as exc2:
            raise exc2 from exc


def resolve_method(loss: Loss, params: Mapping, method: str = "auto") -> str:
    """The concrete method ``method`` stands for at ``params``: ``"auto"`` tries one double-backward
    product (``"reverse"``) and answers ``"forward"`` if it raises; any other method is returned as
    is."""
    _check_method(method)
    if method != "auto":
        return method
    try:
        _hvp_reverse(loss, params, _primal(params))
        return "reverse"
    except Exception:
        return "forward"


def hvp(loss: Loss, params: Mapping, v: Mapping, method: str = "auto") -> dict:
    """``H(theta) v`` as a detached dict keyed like ``params`` (``v`` keyed and shaped like
    ``params``, cast to their dtype), never forming ``H``; ``method`` as in the module docstring.
    """
    _check_method(method)
    t = tree.conform(v, params, HVPError)
    return _with_auto_fallback(method, lambda m: _SINGLE[m](loss, params, t))


def grad_and_hvp(loss: Loss, params: Mapping, v: Mapping, method: str = "auto") -> tuple:
    """``(L(theta), grad L(theta), H(theta) v)``, the gradient a by-product of the product where the
    method allows (not ``"rof"``): a detached 0-dim tensor and two dicts.
    """
    _check_method(method)
    t = tree.conform(v, params, HVPError)

    def run(m):
        if m == "forward":
            p = _primal(params)
            (g, value), (hv, _) = torch.func.jvp(torch.func.grad_and_value(loss), (p,), (t,))
            return value.detach(), {k: g[k].detach() for k in p}, {k: hv[k].detach() for k in p}
        if m == "reverse":
            value, g, hs = _reverse_core(loss, params, [t[k] for k in params], batched=False)
            return value, dict(zip(params, g)), dict(zip(params, hs))
        value, g = grad(loss, params)
        return value, g, _hvp_rof(loss, params, t)

    return _with_auto_fallback(method, run)


# -- several HVPs at one point --------------------------------------------------
def _batched(loss: Loss, params: Mapping, ts: list, method: str, chunk_size) -> list:
    stacked = tree.stack(ts)
    p = _primal(params)
    if method == "reverse":
        _, _, hs = _reverse_core(loss, p, [stacked[k] for k in p], batched=True)
        return tree.unstack(dict(zip(p, hs)))
    if method == "forward":
        def one(t):
            return torch.func.jvp(torch.func.grad(loss), (p,), (t,))[1]
    else:  # rof
        def one(t):
            return _rof_one(loss, p, t)

    out = torch.func.vmap(one, chunk_size=chunk_size)(stacked)
    return tree.unstack({k: out[k].detach() for k in p})


def hvp_batch(
    loss: Loss,
    params: Mapping,
    vs: Sequence[Mapping],
    method: str = "auto",
    chunk_size: int | None = None,
) -> list:
    """``[H v_1, ..., H v_m]`` at one point: ``vmap`` over the directions (``"forward"``, ``"rof"``)
    or a batched double backward (``"reverse"``), one by one where batching fails; ``chunk_size``
    caps the products per ``vmap`` chunk (``None``: all at once).
    """
    _check_method(method)
    ts = [tree.conform(v, params, HVPError) for v in vs]
    if not ts:
        return []
    if len(ts) == 1:
        return [hvp(loss, params, ts[0], method)]

    def run(m):
        try:
            return _batched(loss, params, ts, m, chunk_size)
        except Exception:  # no batching for this model: one product at a time
            return [_SINGLE[m](loss, params, t) for t in ts]

    return _with_auto_fallback(method, run)


# -- choosing the fastest method for a model ------------------------------------
def _sync(params: Mapping) -> None:
    dev = next(iter(params.values())).device
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def tune_hvp(loss: Loss, params: Mapping, v: Mapping | None = None,
             methods: Sequence[str] = ("forward", "reverse", "rof"), repeats: int = 1) -> dict:
    """Time each of ``methods`` on ``v`` (default the parameters) after a warm-up, the minimum of
    ``repeats`` runs: ``{"best": method, "seconds": {method: seconds or None}}``. Raises
    :class:`HVPError` when no method works.
    """
    for m in methods:
        _check_method(m)
    t = tree.conform(v if v is not None else params, params, HVPError)
    seconds: dict[str, float | None] = {}
    for m in methods:
        if m == "auto":
            continue
        try:
            _SINGLE[m](loss, params, t)  # warm-up
            best = float("inf")
            for _ in range(max(1, repeats)):
                _sync(params)
                t0 = time.perf_counter()
                _SINGLE[m](loss, params, t)
                _sync(params)
                best = min(best, time.perf_counter() - t0)
            seconds[m] = best
        except Exception:
            seconds[m] = None
    ok = {m: s for m, s in seconds.items() if s is not None}
    if not ok:
        raise HVPError("no HVP method works for this loss: " + ", ".join(methods))
    winner = min(ok, key=ok.get)
    return {"best": winner, "seconds": seconds}
