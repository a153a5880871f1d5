"""A block model with a block-separable direction map: :class:`OptimizerModel` and
:func:`optimizer_model`.

The kind's own symbols and arithmetic live in its module
(:data:`~crosscurv.theory.optimizers.KINDS`); this module holds what every kind shares: the
step-size factors ``F``, ``phi`` over all blocks, ``J_phi v`` and ``A v = F J_phi v``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..block_model import BlockModel, ModelError
from .kinds import KINDS, OPTIMIZER_KINDS
from .linear import lin

__all__ = ["OptimizerModel", "optimizer_model"]


@dataclass
class OptimizerModel:
    """A :class:`BlockModel` (its ring holds the optimizer's symbols) with a block-separable
    direction map of ``kind``: ``factors`` ``f_i`` (1 without per-block factors); ``beta`` and the
    buffer ``m`` (momentum); ``p``, ``J`` (``{(a, b): gen}``), ``K`` (``{(a, b, c): gen}``, ``b <=
    c``) (generic); ``P`` (preconditioner); all indices within one block.
    """

    model: BlockModel
    kind: str
    factors: list
    beta: object = None
    buffer: list | None = None
    p: list | None = None
    J: dict = field(default_factory=dict)
    K: dict = field(default_factory=dict)
    P: dict = field(default_factory=dict)

    @property
    def rule(self):
        """The kind's module (:data:`~crosscurv.theory.optimizers.KINDS`)."""
        return KINDS[self.kind]

    # -- the direction map -------------------------------------------------
    def direction(self, i: int, fresh: dict, buffer: Sequence | None = None) -> dict:
        """``{a: phi_a(g~)}`` for the coordinates ``a`` of block ``i``.

        Args:
            i: block index (0-based).
            fresh: ``{a: g~_a}`` (series or ring elements) for block ``i``.
            buffer: momentum buffer to use instead of :attr:`buffer` (the
                ``S`` trajectory's own buffer in the recursions).
        """
        return self.rule.direction(self, i, fresh, buffer)

    def phi(self, g: Sequence | None = None, buffer: Sequence | None = None) -> list:
        """``phi(g)``: the direction at the gradient ``g`` (default the model's), ``d`` ring
        elements.
        """
        m = self.model
        g = m.g if g is None else g
        at = getattr(self.rule, "phi", None)
        out = [None] * m.d
        for i in range(m.n_blocks):
            d = at(self, i, g, buffer) if at else self.direction(i, {a: g[a] for a in m.blocks[i]},
                                                                 buffer)
            for a in m.blocks[i]:
                out[a] = d[a]
        return out

    def jacobian(self, a: int, b: int):
        """``J_ab = d phi_a / d g_b`` (0 unless ``a, b`` lie in one block)."""
        m = self.model
        if m.block_of[a] != m.block_of[b]:
            return m.zero
        return self.rule.jacobian(self, a, b)

    def jacobian_apply(self, v: Sequence) -> list:
        """``J_phi v`` (block-diagonal Jacobian in the gradient)."""
        m = self.model
        return [lin(((self.jacobian(a, b), v[b]) for b in m.blocks[m.block_of[a]])) for a in range(
            m.d)]

    def scale(self, v: Sequence) -> list:
        """``F v``: block ``i`` of ``v`` times ``f_i``."""
        m = self.model
        return [v[a] * self.factors[m.block_of[a]] for a in range(m.d)]

    def effective(self, v: Sequence) -> list:
        """``A v = F J_phi v``, the step's linear part in the gradient."""
        return self.scale(self.jacobian_apply(v))


def optimizer_model(n_blocks: int, dims=1, kind: str = "sgd", *, taylor_order: int = 3,
                    step_factors: bool = True, vectors: Sequence[str] = ()) -> OptimizerModel:
    """A :class:`BlockModel` with the optimizer's symbols, as an :class:`OptimizerModel`:
    ``f1..fN`` (symbolic factors when ``step_factors``, else 1), ``P_a_b``, ``beta`` and ``m``, or
    ``p``, ``J_a_b``, ``K_a_b_c`` (1-based flat coordinates of one block); the other arguments as
    for
    :class:`BlockModel`.
    """
    if kind not in OPTIMIZER_KINDS:
        raise ModelError(
            f"optimizer kind must be one of {', '.join(OPTIMIZER_KINDS)}, got {kind!r}")
    probe = BlockModel(n_blocks, dims, taylor_order=2)
    blocks = probe.blocks
    extra: list[str] = []
    if step_factors:
        extra += [f"f{i + 1}" for i in range(n_blocks)]
    pairs = [(a, b) for rows in blocks for a in rows for b in rows]
    triples = [(a, b, c) for rows in blocks for a in rows for b in rows for c in rows if b <= c]
    kind_extra, kind_vectors = KINDS[kind].symbols(pairs, triples)
    extra += kind_extra
    vecs = list(vectors) + kind_vectors
    model = BlockModel(n_blocks, dims, taylor_order=taylor_order, vectors=tuple(vecs), extra=tuple(
        extra))
    x = model.extra
    factors = [x[f"f{i + 1}"] for i in range(n_blocks)] if step_factors else [model.one] * n_blocks
    opt = OptimizerModel(model, kind, factors)
    KINDS[kind].attach(opt, x, pairs, triples)
    return opt
