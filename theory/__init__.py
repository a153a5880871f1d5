"""Symbolic half of crosscurv: delay patterns and the paper's expansions (SymPy).

Importing ``theory`` never imports torch.
"""

from .patterns import (
    DelayPattern,
    PatternError,
    chain,
    from_pairs,
    gauss_seidel,
    jacobi,
    parse_pattern,
    partial,
)

__all__ = [
    "DelayPattern",
    "PatternError",
    "chain",
    "from_pairs",
    "gauss_seidel",
    "jacobi",
    "parse_pattern",
    "partial",
]
