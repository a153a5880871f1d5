"""Delay patterns the theory tests run over (cases as data).

For ``N = 2, 3, 4``: JC, full GS in *every* block order, partial patterns, chains (two orders) and
an explicit non-GS-prefix pattern.
"""

from __future__ import annotations

import itertools

from crosscurv.theory.patterns import chain, from_pairs, gauss_seidel, jacobi, partial

BLOCK_COUNTS = (2, 3, 4)

_PARTIAL = {
    2: [[(1, 0)]],
    3: [[(1, 0)], [(2, 0)], [(2, 0), (2, 1)]],
    4: [[(1, 0), (3, 2)], [(3, 0), (2, 1)], [(3, 1)]],
}

_EXPLICIT = {
    2: [[(0, 1)]],
    3: [[(0, 2), (1, 2)]],
    4: [[(2, 0), (3, 1), (0, 1)]],
}


def gs_all_orders(n: int):
    return [gauss_seidel(n, o) for o in itertools.permutations(range(n))]


def patterns_for(n: int, all_gs_orders: bool = True):
    """``[(id, DelayPattern)]`` covering JC, GS (all orders), partial, chain, explicit pairs."""
    out = [("jc", jacobi(n))]
    gs = gs_all_orders(n) if all_gs_orders else [gauss_seidel(n), gauss_seidel(n, list(reversed(
        range(n))))]
    out += [(p.name, p) for p in gs]
    out += [(f"partial{k}", partial(n, pairs)) for k, pairs in enumerate(_PARTIAL[n])]
    out += [("chain", chain(n)), ("chain_rev", chain(n, list(reversed(range(n)))))]
    out += [(f"pairs{k}", from_pairs(n, pairs)) for k, pairs in enumerate(_EXPLICIT[n])]
    return out


def all_cases(all_gs_orders: bool = True):
    """``pytest.param``-ready list of ``(n, pattern)`` with readable ids."""
    import pytest

    return [pytest.param(n, p, id=f"N{n}-{name}") for n in BLOCK_COUNTS for name, p in patterns_for(
        n, all_gs_orders)]
