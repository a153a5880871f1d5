"""``generic``: ``phi_a(g + e) = p_a + sum_b J_ab e_b + 1/2 sum_bc K_abc e_b e_c + O(e^3)`` with
generic symbols.

``p`` (= ``phi(g)``), ``J`` (the block-diagonal Jacobian of ``phi`` in the gradient, not symmetric)
and ``K``; the truncation is exact for every loss coefficient through ``eta^3`` because ``e = g~ - g
= O(eta)`` enters the step multiplied by ``eta``. The map is known only at the model's gradient
``g`` and near it.
"""

from __future__ import annotations

import sympy

from ..block_model import ModelError


def symbols(pairs, triples) -> tuple[list, list]:
    """``J_a_b``, ``K_a_b_c`` (``b <= c``) and the vector ``p``."""
    return [f"J_{a + 1}_{b + 1}" for a, b in pairs] + [f"K_{a + 1}_{b + 1}_{c + 1}" for a, b,
                                                       c in triples], ["p"]


def attach(opt, x: dict, pairs, triples) -> None:
    opt.p = list(opt.model.vectors["p"])
    opt.J = {(a, b): x[f"J_{a + 1}_{b + 1}"] for a, b in pairs}
    opt.K = {(a, b, c): x[f"K_{a + 1}_{b + 1}_{c + 1}"] for a, b, c in triples}


def direction(opt, i: int, fresh: dict, buffer=None) -> dict:
    """The Taylor expansion of ``phi`` around the gradient ``g`` on block ``i``."""
    m = opt.model
    rows = m.blocks[i]
    e = {b: fresh[b] - m.g[b] for b in rows}
    half = m.const(sympy.Rational(1, 2))
    out = {}
    for a in rows:
        acc = e[rows[0]] * 0 + opt.p[a]
        for b in rows:
            acc = acc + e[b] * opt.J[(a, b)]
        for b in rows:
            for c in rows:
                if b <= c:
                    w = opt.K[(a, b, c)] if b == c else opt.K[(a, b, c)] * 2
                    acc = acc + (e[b] * e[c]) * (w * half)
        out[a] = acc
    return out


def phi(opt, i: int, g, buffer=None) -> dict:
    """``{a: p_a}`` on block ``i``: the map is only known at the model's gradient."""
    m = opt.model
    if g is not m.g:
        raise ModelError("the generic direction map is only known at the model's gradient g")
    return {a: opt.p[a] for a in m.blocks[i]}


def jacobian(opt, a: int, b: int):
    return opt.J[(a, b)]
