"""``sum_k c_k x_k`` of ring elements, in the order given (the symbolic side's one linear
combination).
"""

from __future__ import annotations


def lin(pairs):
    """``sum (x * c)`` over ``(c, x)`` pairs, accumulated left to right; ``None`` for no pairs."""
    acc = None
    for c, x in pairs:
        t = x * c
        acc = t if acc is None else acc + t
    return acc
