"""``preconditioner``: ``phi_i(g_i) = P_i g_i`` with a fixed block ``P_i`` (generic entries
``P_a_b``, not assumed symmetric); ``J_phi = P``."""

from __future__ import annotations

from .linear import lin


def symbols(pairs, triples) -> tuple[list, list]:
    return [f"P_{a + 1}_{b + 1}" for a, b in pairs], []


def attach(opt, x: dict, pairs, triples) -> None:
    opt.P = {(a, b): x[f"P_{a + 1}_{b + 1}"] for a, b in pairs}


def direction(opt, i: int, fresh: dict, buffer=None) -> dict:
    """``{a: sum_b P_ab g~_b}`` over the coordinates of block ``i``."""
    rows = opt.model.blocks[i]
    return {a: lin(((opt.P[(a, b)], fresh[b]) for b in rows)) for a in rows}


def jacobian(opt, a: int, b: int):
    return opt.P[(a, b)]
