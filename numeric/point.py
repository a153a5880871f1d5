"""What the protocol asks of one point ``theta``: loss, gradient, ``H v`` and ``M_S v``.

The per-point interface (:class:`Point`) has three implementations, the engines of
:func:`crosscurv.numeric.protocol.run_protocol`:

* :class:`PointCurvature` (engine ``"graph"``): the gradient built once with ``create_graph=True``,
  every product one backward pass through that retained graph,
  ``[H v]_R = d/dtheta_R <g(theta), v> = H_{R,F} v_F`` for ``v`` supported on ``F``; a masked
  product ``(M_S v)_i = H_{i,S(i)} v_{S(i)}`` (Lemma 1) reads only the fresh blocks of ``v``;
* :class:`TermwisePoint` (engine ``"termwise"``): for a loss written as a sum of terms
  (``Task.loss_terms``), every gradient and product accumulated term by term, one term's graph
  alive at a time;
* :class:`BatchedPoint` (engine ``"batched"``): the gradient by one backward pass, the products
  batched by :func:`crosscurv.numeric.hvp.hvp_batch`, for models without a double derivative.

Vectors are dicts of tensors keyed like the parameters (:mod:`crosscurv.numeric.tree`); a vector may
hold only some of the keys (the others are zero).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch

from crosscurv.theory.patterns import DelayPattern

from . import tree
from .curvature import MaskedProductPlan, plan_for_blocks
from .hvp import HVPError, backward_of, grad, hvp, hvp_batch

__all__ = ["Point", "PointCurvature", "TermwisePoint", "BatchedPoint", "masked_product_at"]

Named = Sequence  # [(name, callable returning the vector), ...]


class Point:
    """The per-point interface: ``value``, ``grad``, ``hvp``, ``products``, ``masked``, ``release``.
    """

    value: torch.Tensor
    grad: dict

    def hvp(self, v: Mapping) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def products(self, named: Named) -> Iterator[tuple[str, dict]]:
        """``(name, H v)`` for each ``(name, get)`` in order; ``get()`` returns ``v`` (called when
        needed)."""
        for name, get in named:
            yield name, self.hvp(get())

    def masked(self, plan: MaskedProductPlan, v: Mapping) -> dict:
        """``M_S v`` by ``plan``: one restricted product per entry, reading ``v``'s columns only."""
        return plan.assemble(v, (self.hvp({k: v[k] for k in cols}, rows)
                                 for cols, rows in plan.products))

    def release(self) -> None:
        pass

Loss = Callable[[dict], torch.Tensor]


def _check_vector(shapes: Mapping, v: Mapping) -> None:
    """Raise :class:`HVPError` unless every entry of ``v`` names a parameter and has its shape."""
    for k, t in v.items():
        if k not in shapes:
            raise HVPError(f"vector entry {k!r} is not a parameter")
        if tuple(t.shape) != shapes[k]:
            raise HVPError(f"vector entry {k!r} has shape {tuple(t.shape)}, parameter has "
                           f"{shapes[k]}")


def _check_rows(shapes: Mapping, rows: Iterable[str] | None) -> list:
    rows = list(shapes if rows is None else rows)
    unknown = [k for k in rows if k not in shapes]
    if unknown:
        raise HVPError(f"unknown row keys {unknown}")
    return rows


class PointCurvature(Point):
    """``L(theta)``, ``grad L(theta)`` and ``H(theta) v`` products on one retained graph.

    Args:
        loss: ``loss(params) -> 0-dim tensor``, twice differentiable by double backward.
        params: the point ``theta``, ``dict[str, Tensor]`` (not modified).

    Attributes:
        value: ``L(theta)``, detached 0-dim tensor.
        grad: ``grad L(theta)``, detached dict keyed like ``params`` (zeros for
            parameters the loss does not depend on).
        keys: the parameter names, in order.
    """

    def __init__(self, loss: Loss, params: Mapping):
        self.keys = list(params)
        self._shapes = {k: tuple(v.shape) for k, v in params.items()}
        self._like = {k: v for k, v in params.items()}
        self._p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        self._g: dict[str, torch.Tensor] = {}
        with torch.enable_grad():
            value = loss(self._p)
            if value.requires_grad:
                gs = torch.autograd.grad(value, [self._p[k] for k in self.keys], create_graph=True,
                                         allow_unused=True)
            else:
                gs = [None] * len(self.keys)
        self.value = value.detach()
        self.grad = {}
        for k, gk in zip(self.keys, gs):
            self.grad[k] = gk.detach() if gk is not None else torch.zeros_like(self._p[k])
            if gk is not None and gk.requires_grad:
                self._g[k] = gk  # graph-carrying entries: H v needs only these

    def _check(self, v: Mapping) -> None:
        _check_vector(self._shapes, v)

    def hvp(self, v: Mapping, rows: Iterable[str] | None = None) -> dict:
        """``[H v]_R = sum_{j in keys(v)} H_{R,j} v_j``, detached, keyed by ``rows`` (default all);
        a key missing from ``v`` is a zero block."""
        if self._p is None:
            raise RuntimeError("PointCurvature used after release()")
        self._check(v)
        rows = _check_rows(self._shapes, rows)
        outs, gos = [], []
        for k, t in v.items():
            if k in self._g:
                outs.append(self._g[k])
                p = self._like[k]
                gos.append(t.detach().to(dtype=p.dtype, device=p.device))
        if not outs or not rows:
            return {k: torch.zeros_like(self._p[k]) for k in rows}
        with torch.enable_grad():
            hs = backward_of(outs, [self._p[k] for k in rows], gos, retain_graph=True)
        return {k: (h.detach() if h is not None else torch.zeros_like(self._p[k])) for k, h in zip(
            rows, hs)}

    def release(self) -> None:
        """Free the retained graph (the gradient and value stay)."""
        self._g = {}
        self._p = None


def _term_product(term: Loss, params: Mapping, v: Mapping, rows: Sequence[str]) -> dict:
    """``[H_t v]_R`` for one term ``t`` through a graph built for this product, detached, keyed by
    ``rows``."""
    leaves = set(v) | set(rows)
    p = {k: (t.detach().requires_grad_(True) if k in leaves else t.detach()) for k,
         t in params.items()}
    with torch.enable_grad():
        value = term(p)
        outs, gos = [], []
        if value.requires_grad:
            cols = list(v)
            gs = torch.autograd.grad(value, [p[k] for k in cols], create_graph=True,
                                     allow_unused=True)
            for k, gk in zip(cols, gs):
                if gk is not None and gk.requires_grad:
                    outs.append(gk)
                    gos.append(v[k])
        hs = backward_of(outs, [p[k] for k in rows], gos) if outs else [None] * len(rows)
    return {k: (h.detach() if h is not None else torch.zeros_like(p[k])) for k, h in zip(rows, hs)}


def _term_products(term: Loss, params: Mapping, vs: Sequence[Mapping], rows: Sequence[str]) -> list:
    """``[[H_t v]_R for v in vs]`` for one term ``t`` through one graph (vectors with the same
    keys), each detached and keyed by ``rows``: what :func:`_term_product` gives per vector."""
    cols = list(vs[0])
    leaves = set(cols) | set(rows)
    p = {k: (t.detach().requires_grad_(True) if k in leaves else t.detach()) for k,
         t in params.items()}
    out = []
    with torch.enable_grad():
        value = term(p)
        live = []
        if value.requires_grad:
            gs = torch.autograd.grad(value, [p[k] for k in cols], create_graph=True,
                                     allow_unused=True)
            live = [(k, gk) for k, gk in zip(cols, gs) if gk is not None and gk.requires_grad]
        for i, v in enumerate(vs):
            hs = (backward_of([gk for _, gk in live], [p[k] for k in rows], [v[k] for k, _ in live],
                              retain_graph=i < len(vs) - 1) if live else [None] * len(rows))
            out.append({k: (h.detach() if h is not None else torch.zeros_like(p[k]))
                        for k, h in zip(rows, hs)})
    return out


def _accumulate(into: dict | None, part: dict, inputs: Iterable[torch.Tensor] = ()) -> dict:
    """``into += part`` entry by entry, in place. The first time, ``part`` itself becomes the sum,
    except entries that cannot take an in-place sum: a copy replaces an entry that shares memory
    with one of ``inputs`` (autograd may hand back a ``grad_outputs`` tensor unchanged) or is not
    contiguous (an expanded gradient)."""
    if into is None:
        taken = {x.untyped_storage().data_ptr() for x in inputs}
        return {k: (t if t.is_contiguous() and t.untyped_storage().data_ptr() not in taken
                    else t.contiguous().clone()) for k, t in part.items()}
    for k, t in part.items():
        into[k].add_(t)
    return into


class TermwisePoint(Point):
    """``L(theta) = sum_t L_t(theta)``, its gradient and ``H(theta) v`` accumulated term by term.

    ``value = sum_t L_t``, ``grad = sum_t grad L_t`` and ``[H v]_R = sum_t [H_t v]_R``, summed in
    term order; at most one term's graph is alive at a time.

    Args:
        terms: the loss terms, ``term(params) -> 0-dim tensor`` (``Task.loss_terms``), summed in
        order. params: the point ``theta``, ``dict[str, Tensor]`` (not modified).

    Attributes:
        value: ``sum_t L_t(theta)``, detached 0-dim tensor. grad: ``sum_t grad L_t(theta)``,
        detached dict keyed like ``params``. keys: the parameter names, in order.
    """

    def __init__(self, terms: Sequence[Loss], params: Mapping):
        self.terms = tuple(terms)
        if not self.terms:
            raise HVPError("TermwisePoint needs at least one loss term")
        self.keys = list(params)
        self._shapes = {k: tuple(v.shape) for k, v in params.items()}
        self._p = {k: v.detach() for k, v in params.items()}
        value, g = None, None
        for term in self.terms:
            vt, gt = grad(term, self._p)
            value = vt if value is None else value + vt
            g = _accumulate(g, gt, self._p.values())
            del gt
        self.value, self.grad = value, g

    def hvp(self, v: Mapping, rows: Iterable[str] | None = None) -> dict:
        """``[H v]_R`` with ``v`` zero outside its keys (as :meth:`PointCurvature.hvp`), summed over
        the terms."""
        if self._p is None:
            raise RuntimeError("TermwisePoint used after release()")
        _check_vector(self._shapes, v)
        rows = _check_rows(self._shapes, rows)
        t = {k: x.detach().to(dtype=self._p[k].dtype, device=self._p[k].device) for k,
             x in v.items()}
        if not t or not rows:
            return {k: torch.zeros_like(self._p[k]) for k in rows}
        out = None
        for term in self.terms:
            out = _accumulate(out, _term_product(term, self._p, t, rows), [*t.values(),
                                                                           *self._p.values()])
        return out

    def products(self, named: Named) -> Iterator[tuple[str, dict]]:
        """``(name, H v)`` for each ``(name, get)``, every term's graph built once for all the
        vectors (full vectors with the same keys; otherwise one product at a time): the same
        values as :meth:`hvp` per vector."""
        names, vs = [n for n, _ in named], [get() for _, get in named]
        if len(vs) < 2 or any(set(v) != set(self.keys) for v in vs):
            for n, v in zip(names, vs):
                yield n, self.hvp(v)
            return
        if self._p is None:
            raise RuntimeError("TermwisePoint used after release()")
        for v in vs:
            _check_vector(self._shapes, v)
        ts = [{k: x.detach().to(dtype=self._p[k].dtype, device=self._p[k].device) for k,
               x in v.items()} for v in vs]
        outs: list = [None] * len(ts)
        for term in self.terms:
            for i, part in enumerate(_term_products(term, self._p, ts, self.keys)):
                outs[i] = _accumulate(outs[i], part, [*ts[i].values(), *self._p.values()])
        yield from zip(names, outs)

    def release(self) -> None:
        """Drop the point's parameters (the gradient and value stay); no graph outlives a product.
        """
        self._p = None


class BatchedPoint(Point):
    """The batched engine at one point: gradient by one backward pass, products by
    :mod:`crosscurv.numeric.hvp`.

    Args:
        loss, params: as :class:`PointCurvature`. method: a concrete HVP method (``"forward"``,
            ``"reverse"``, ``"rof"``). chunk_size: at most this many products per batch; ``1`` takes
            them one at a time (nothing stacked: the lean-memory setting).
    """

    def __init__(self, loss, params: Mapping, method: str = "forward", chunk_size: int
                 | None = None):
        self._loss, self._params, self.method, self.chunk = loss, params, method, chunk_size
        self.value, self.grad = grad(loss, params)

    def hvp(self, v: Mapping) -> dict:
        return hvp(self._loss, self._params, v, self.method)

    def products(self, named: Named) -> Iterator[tuple[str, dict]]:
        if self.chunk == 1:
            yield from super().products(named)
            return
        names = [n for n, _ in named]
        vs = [get() for _, get in named]
        out = hvp_batch(self._loss, self._params, vs, self.method, self.chunk)
        del vs
        while out:
            yield names.pop(0), out.pop(0)

    def masked(self, plan: MaskedProductPlan, v: Mapping) -> dict:
        dirs = [{k: (v[k] if k in set(cols) else torch.zeros_like(v[k])) for k in v} for cols,
                _ in plan.products]
        if not dirs:
            return tree.zeros_like(v)
        prods = hvp_batch(self._loss, self._params, dirs, self.method, self.chunk)
        return plan.assemble(v, prods)


def masked_product_at(point: PointCurvature, block_keys: Sequence[Sequence[str]],
                      pattern: DelayPattern, v: Mapping) -> dict:
    """``M_S v`` at ``point`` (Lemma 1): ``(M_S v)_i = sum_{j in S(i)} H_ij v_j``, one product per
    distinct non-empty fresh set; ``block_keys`` names each block's parameters, in block order.
    Returns a dict with every parameter key."""
    return point.masked(plan_for_blocks(block_keys, pattern, "fresh_set"), v)
