"""``sgd``: ``phi(g) = g`` (per-block step sizes through ``f_i``); ``J_phi = I``.

Every polynomial optimizer kind is a module like this one, listed in
:data:`crosscurv.theory.optimizers.KINDS`: :func:`symbols` (the generators it adds to the block
model), :func:`attach` (stores them on the :class:`~crosscurv.theory.optimizers.OptimizerModel`),
:func:`direction` (``phi`` on one block) and :func:`jacobian` (``J_ab`` within a block).
"""

from __future__ import annotations


def symbols(pairs, triples) -> tuple[list, list]:
    """``(extra generator names, vector names)`` this kind adds (none)."""
    return [], []


def attach(opt, x: dict, pairs, triples) -> None:
    """Store the kind's generators ``x`` on ``opt`` (none)."""


def direction(opt, i: int, fresh: dict, buffer=None) -> dict:
    """``{a: g~_a}``."""
    return dict(fresh)


def jacobian(opt, a: int, b: int):
    """``delta_ab``."""
    m = opt.model
    return m.one if a == b else m.zero
