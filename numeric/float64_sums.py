"""Float64 sums over parameter vectors, formed chunk by chunk.

The protocol measures several quantities in float64 over every parameter: the
loss gap's node products ``g(t) . Delta`` and ``|g(t)| . |Delta|``
(:mod:`crosscurv.numeric.gap`), the step remainders ``||theta^{k+1} - theta^k +
eta g - eta^2 u||`` (:func:`crosscurv.numeric.inplace.step_residual`), the
eigen-residuals ``||H v - lambda v||`` (:mod:`crosscurv.numeric.estimates`).
Each entry of each operand is read flat (``reshape(-1)``: a view for a
contiguous tensor) in chunks of :data:`CHUNK` elements, widened into one reused
float64 buffer, and the chunks' sums are summed in float64.  So no
parameter-sized float64 temporary exists (two of them, for the largest tensor,
are about one gradient step of the MNIST MLP), and the passes run in cache.

Every element is the same float64 number as with whole float64 copies (widening
is exact, each elementwise operation is rounded once, in the same order); only
the order of summation differs (a sum of chunk sums), a change at the
float64 rounding of the sum (relative ``~ 1e-16``), far below any
record column's tolerance (:mod:`crosscurv.numeric.record_comparison`).

Shapes and dtypes: the operands are mappings ``name -> tensor`` with equal keys
and shapes, of any floating dtype, on one device; the results are Python floats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

__all__ = ["CHUNK", "sum_sq64", "norm64", "dot64", "absdot64", "dot_absdot64"]

#: Elements per chunk (512 KiB of float64): large enough that the per-chunk kernel launches cost little,
#: small enough that a chunk stays in cache.
CHUNK = 1 << 16


def _chunks(vectors, scratch: bool):
    """``(x, t, parts)`` for each chunk of each entry: ``x``, ``t`` float64 buffers of the chunk's length
    (``t`` is ``None`` without ``scratch``), ``parts[i]`` the chunk of ``vectors[i]``'s entry flattened
    (``None`` for a ``None`` operand); an entry of one chunk is passed whole, the buffers viewed in its
    shape.  Called under ``torch.no_grad()`` (the operands may require grad)."""
    like = vectors[0]
    first = next(iter(like.values()), None)
    if first is None:
        return
    size = max(1, min(CHUNK, max(t.numel() for t in like.values())))
    x_buf = torch.empty(size, dtype=torch.float64, device=first.device)
    t_buf = torch.empty(size, dtype=torch.float64, device=first.device) if scratch else None
    for n in like:
        entries = [None if v is None else v[n] for v in vectors]
        first = entries[0]
        total = first.numel()
        if total <= size:  # one chunk: the entries themselves, the buffers viewed in their shape
            shape = first.shape
            yield (x_buf[:total].view(shape), None if t_buf is None else t_buf[:total].view(shape), entries)
            continue
        flat = [None if e is None else e.reshape(-1) for e in entries]
        for s in range(0, total, size):
            e = min(s + size, total)
            yield x_buf[:e - s], None if t_buf is None else t_buf[:e - s], [None if f is None else f[s:e] for f in flat]


def _accumulate(vectors, form, *reductions, scratch: bool = True) -> list:
    """For each reduction ``r(x)`` (a 0-dim tensor from the chunk buffer ``x``), its float64 sum over all
    chunks, after ``form(x, t, *parts)`` wrote each chunk (``t``: a second buffer, ``None`` without
    ``scratch``); the reductions run in order on the same buffer."""
    parts = [[] for _ in reductions]
    with torch.no_grad():
        for x, t, chunk in _chunks(vectors, scratch):
            form(x, t, *chunk)
            for i, r in enumerate(reductions):
                parts[i].append(r(x))
    return [torch.stack(p).sum() if p else torch.zeros((), dtype=torch.float64) for p in parts]


def sum_sq64(form: Callable, *vectors: Mapping | None) -> torch.Tensor:
    """``sum_n sum_i r_{n,i}^2`` in float64 (0-dim tensor), where ``form(x, t, *parts)`` writes the chunk of
    ``r`` into the float64 buffer ``x`` (``t``: a second float64 buffer it may use) from the chunks ``parts``
    of the operands ``vectors`` (the keys are those of ``vectors[0]``; an operand may be ``None``)."""
    return _accumulate(vectors, form, lambda x: x.mul_(x).sum())[0]


def norm64(form: Callable, *vectors: Mapping | None) -> float:
    """``sqrt(`` :func:`sum_sq64` ``)``: the float64 norm of the vector that ``form`` writes chunk by chunk."""
    return float(torch.sqrt(sum_sq64(form, *vectors)))


def _product(x, t, bp, ap):
    x.copy_(ap).mul_(bp)  # bp widened inside the kernel: exactly the product of the two float64 copies


def dot_absdot64(a: Mapping, b: Mapping) -> tuple[float, float]:
    """``(a . b, |a| . |b|)`` accumulated in float64 (keys: those of ``b``).

    A product of two float32 (or bfloat16/float16) numbers is exact in float64, so ``a_i b_i`` formed in the
    float64 copy of ``a_i`` is the product of the two float64 copies, and ``|a_i b_i| = |a_i| |b_i|``: one
    product per element serves both sums.  For float64 operands the product is rounded once, and its
    absolute value is ``|a_i| |b_i|`` rounded the same way.
    """
    dot, absdot = _accumulate((b, a), _product, torch.sum, lambda x: x.abs_().sum(), scratch=False)
    return float(dot), float(absdot)


def dot64(a: Mapping, b: Mapping) -> float:
    """``a . b`` accumulated in float64 (keys: those of ``b``)."""
    return float(_accumulate((b, a), _product, torch.sum, scratch=False)[0])


def absdot64(a: Mapping, b: Mapping) -> float:
    """``|a| . |b|`` accumulated in float64 (keys: those of ``b``)."""
    return float(_accumulate((b, a), _product, lambda x: x.abs_().sum(), scratch=False)[0])
