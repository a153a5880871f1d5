"""Private vector helpers shared by the ``theory`` modules (ring elements and series mixed).

Importing this module never imports torch.
"""

from __future__ import annotations

from typing import Sequence

from .series import TruncatedSeries

__all__ = ["mul", "dot"]


def mul(x, y):
    """``x * y`` with a series on the left when there is one.

    (``PolyElement * TruncatedSeries`` would first try, and fail, to coerce the series into the ring
    -- slowly, since the failure message prints it.)
    """
    if isinstance(y, TruncatedSeries) and not isinstance(x, TruncatedSeries):
        return y * x
    return x * y


def dot(u: Sequence, v: Sequence):
    """``sum_a u_a v_a`` for ring elements and/or series (``0`` for empty input)."""
    acc = 0
    for x, y in zip(u, v):
        acc = mul(x, y) + acc
    return acc
