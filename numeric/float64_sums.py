"""Float64 sums over parameter vectors, formed chunk by chunk.

Each entry of each operand is read flat in chunks of :data:`CHUNK` elements, widened into one reused
float64 buffer, and the chunks' sums are summed in float64: no parameter-sized float64 temporary
exists. Every element is the float64 number whole copies would give; only the order of summation
differs (relative ``~ 1e-16``). Operands are mappings ``name -> tensor`` with equal keys and shapes,
any floating dtype, one device; results are Python floats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

__all__ = ["CHUNK", "sum_sq64", "norm64", "dot64", "absdot64", "dot_absdot64"]

#: Elements per chunk (512 KiB of float64): large enough that the per-chunk kernel launches cost
#: little,
#: small enough that a chunk stays in cache.
CHUNK = 1 << 16


def _chunks(vectors, scratch: bool):
    """``(x, t, parts)`` per chunk of each entry: float64 buffers ``x``, ``t`` (``None`` without
    ``scratch``) and ``parts[i]``, the chunk of ``vectors[i]``'s entry (``None`` for a ``None``
    operand). Called under ``torch.no_grad()``.
    """
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
            yield (x_buf[:total].view(shape), None if t_buf is None else t_buf[:total].view(shape),
                   entries)
            continue
        flat = [None if e is None else e.reshape(-1) for e in entries]
        for s in range(0, total, size):
            e = min(s + size, total)
            yield x_buf[:e - s], None if t_buf is None else t_buf[:e - s], [None if f is None
                else f[s:e] for f in flat]


def _accumulate(vectors, form, *reductions, scratch: bool = True) -> list:
    """Each reduction ``r(x)`` summed in float64 over all chunks, after ``form(x, t, *parts)`` wrote
    each chunk.
    """
    parts = [[] for _ in reductions]
    with torch.no_grad():
        for x, t, chunk in _chunks(vectors, scratch):
            form(x, t, *chunk)
            for i, r in enumerate(reductions):
                parts[i].append(r(x))
    return [torch.stack(p).sum() if p else torch.zeros((), dtype=torch.float64) for p in parts]


def sum_sq64(form: Callable, *vectors: Mapping | None) -> torch.Tensor:
    """``sum r^2`` in float64 (0-dim tensor), ``form(x, t, *parts)`` writing the chunk of ``r`` into
    ``x`` from the chunks of ``vectors`` (keys of ``vectors[0]``; an operand may be ``None``).
    """
    return _accumulate(vectors, form, lambda x: x.mul_(x).sum())[0]


def norm64(form: Callable, *vectors: Mapping | None) -> float:
    """``sqrt(`` :func:`sum_sq64` ``)``: the float64 norm of the vector that ``form`` writes chunk
    by chunk."""
    return float(torch.sqrt(sum_sq64(form, *vectors)))


def _product(x, t, bp, ap):
    # bp widened inside the kernel: exactly the product of the two float64 copies
    x.copy_(ap).mul_(bp)


def dot_absdot64(a: Mapping, b: Mapping) -> tuple[float, float]:
    """``(a . b, |a| . |b|)`` accumulated in float64 (keys: those of ``b``); one exact product per
    element serves both sums.
    """
    dot, absdot = _accumulate((b, a), _product, torch.sum, lambda x: x.abs_().sum(), scratch=False)
    return float(dot), float(absdot)


def dot64(a: Mapping, b: Mapping) -> float:
    """``a . b`` accumulated in float64 (keys: those of ``b``)."""
    return float(_accumulate((b, a), _product, torch.sum, scratch=False)[0])


def absdot64(a: Mapping, b: Mapping) -> float:
    """``|a| . |b|`` accumulated in float64 (keys: those of ``b``)."""
    return float(_accumulate((b, a), _product, lambda x: x.abs_().sum(), scratch=False)[0])
