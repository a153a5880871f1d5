"""Block-separable optimizers as symbolic direction maps (beyond the paper).

A block-separable optimizer moves block ``i`` by ``-eta f_i phi_i(g_i, s_i)``:
``eta`` is the base step size, ``f_i`` the block's step-size factor (so
``eta_i = eta f_i``), ``s_i`` the block's optimizer state and ``phi_i`` a map
smooth in the gradient.  The scheme ``S`` evaluates block ``i``'s gradient
``g~_i`` where exactly the blocks of ``S(i)`` hold their new values, moves by
``-eta f_i phi_i(g~_i, s_i)`` and updates the block's state with ``g~_i``;
JC uses ``g_i`` at the common iterate.  Both start from the same state.

Instances (conventions of ``torch.optim``):

* ``sgd``: ``phi(g) = g`` (per-block step sizes through ``f_i``);
* ``preconditioner``: ``phi_i(g_i) = P_i g_i`` with a fixed block ``P_i``
  (generic entries, not assumed symmetric);
* ``momentum`` (heavy ball, ``torch.optim.SGD(momentum=beta)``, dampening 0,
  no Nesterov): buffer ``m' = beta m + g``, ``phi(g, m) = beta m + g``;
* ``generic``: ``phi_a(g + e) = p_a + sum_b J_ab e_b + 1/2 sum_bc K_abc e_b e_c
  + O(e^3)`` with generic symbols ``p`` (= ``phi(g)``), ``J`` (the
  block-diagonal Jacobian of ``phi`` in the gradient, not symmetric) and
  ``K``; the truncation is exact for every loss coefficient through
  ``eta^3`` because ``e = g~ - g = O(eta)`` enters the step multiplied by
  ``eta``;
* ``adam`` (``torch.optim.Adam``, bias-corrected): not polynomial in the
  gradient, so it is handled with plain SymPy expressions
  (:func:`adam_direction`, :func:`adam_jacobian`); the other instances are
  ring elements of the :class:`~crosscurv.theory.block_model.BlockModel`'s ring.

Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import sympy

from .block_model import BlockModel, ModelError

__all__ = [
    "OPTIMIZER_KINDS",
    "OptimizerModel",
    "optimizer_model",
    "adam_direction",
    "adam_jacobian",
]

#: optimizer kinds with a polynomial direction map (ring arithmetic)
OPTIMIZER_KINDS = ("sgd", "preconditioner", "momentum", "generic")


@dataclass
class OptimizerModel:
    """A :class:`BlockModel` together with a block-separable direction map.

    Attributes:
        model: the block model (its ring holds the optimizer's symbols).
        kind: one of :data:`OPTIMIZER_KINDS`.
        factors: ``N`` ring elements ``f_i`` (``1`` without per-block factors).
        beta: the momentum coefficient (ring generator) for ``momentum``.
        buffer: the momentum buffer ``m`` at the step's start (``d`` ring
            generators) for ``momentum``.
        p, J, K: the generic map's symbols (``p``: ``d`` generators; ``J``:
            ``{(a, b): gen}`` for ``a, b`` in one block; ``K``: ``{(a, b, c): gen}``
            with ``b <= c`` in one block).
        P: preconditioner entries ``{(a, b): gen}`` (``a, b`` in one block).
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

    # -- the direction map -------------------------------------------------
    def direction(self, i: int, fresh: dict, buffer: Sequence | None = None) -> dict:
        """``{a: phi_a(g~)}`` for the coordinates ``a`` of block ``i``.

        Args:
            i: block index (0-based).
            fresh: ``{a: g~_a}`` (series or ring elements) for block ``i``.
            buffer: momentum buffer to use instead of :attr:`buffer` (the
                ``S`` trajectory's own buffer in the recursions).
        """
        m = self.model
        rows = m.blocks[i]
        if self.kind == "sgd":
            return dict(fresh)
        if self.kind == "preconditioner":
            return {a: _lin(((self.P[(a, b)], fresh[b]) for b in rows)) for a in rows}
        if self.kind == "momentum":
            buf = self.buffer if buffer is None else buffer
            return {a: fresh[a] + buf[a] * self.beta for a in rows}
        # generic: Taylor expansion of phi around the gradient g
        e = {b: fresh[b] - m.g[b] for b in rows}
        half = m.const(sympy.Rational(1, 2))
        out = {}
        for a in rows:
            acc = e[rows[0]] * 0 + self.p[a]
            for b in rows:
                acc = acc + e[b] * self.J[(a, b)]
            for b in rows:
                for c in rows:
                    if b <= c:
                        w = self.K[(a, b, c)] if b == c else self.K[(a, b, c)] * 2
                        acc = acc + (e[b] * e[c]) * (w * half)
            out[a] = acc
        return out

    def phi(self, g: Sequence | None = None, buffer: Sequence | None = None) -> list:
        """``phi(g)``: the direction at the gradient ``g`` (default the model's), ``d`` ring elements."""
        m = self.model
        g = m.g if g is None else g
        out = [None] * m.d
        for i in range(m.n_blocks):
            if self.kind == "generic":
                if g is not m.g:
                    raise ModelError("the generic direction map is only known at the model's gradient g")
                for a in m.blocks[i]:
                    out[a] = self.p[a]
                continue
            d = self.direction(i, {a: g[a] for a in m.blocks[i]}, buffer)
            for a in m.blocks[i]:
                out[a] = d[a]
        return out

    def jacobian(self, a: int, b: int):
        """``J_ab = d phi_a / d g_b`` (0 unless ``a, b`` lie in one block)."""
        m = self.model
        if m.block_of[a] != m.block_of[b]:
            return m.zero
        if self.kind in ("sgd", "momentum"):
            return m.one if a == b else m.zero
        if self.kind == "preconditioner":
            return self.P[(a, b)]
        return self.J[(a, b)]

    def jacobian_apply(self, v: Sequence) -> list:
        """``J_phi v`` (block-diagonal Jacobian in the gradient)."""
        m = self.model
        return [_lin(((self.jacobian(a, b), v[b]) for b in m.blocks[m.block_of[a]])) for a in range(m.d)]

    def scale(self, v: Sequence) -> list:
        """``F v``: block ``i`` of ``v`` times ``f_i``."""
        m = self.model
        return [v[a] * self.factors[m.block_of[a]] for a in range(m.d)]

    def effective(self, v: Sequence) -> list:
        """``A v = F J_phi v``, the step's linear part in the gradient."""
        return self.scale(self.jacobian_apply(v))


def _lin(pairs):
    acc = None
    for c, x in pairs:
        t = x * c
        acc = t if acc is None else acc + t
    return acc


def optimizer_model(n_blocks: int, dims=1, kind: str = "sgd", *, taylor_order: int = 3, step_factors: bool = True,
                    vectors: Sequence[str] = ()) -> OptimizerModel:
    """Build a :class:`BlockModel` with the optimizer's symbols and its :class:`OptimizerModel`.

    Args:
        n_blocks, dims, taylor_order, vectors: as for :class:`BlockModel`.
        kind: one of :data:`OPTIMIZER_KINDS`.
        step_factors: give every block a symbolic step-size factor ``f_i``
            (else every ``f_i = 1``).

    Symbols added: ``f1..fN``; ``P_a_b`` (preconditioner); ``beta`` and the
    vector ``m`` (momentum); the vector ``p``, ``J_a_b``, ``K_a_b_c``
    (generic), with ``a, b, c`` 1-based flat coordinates of one block.
    """
    if kind not in OPTIMIZER_KINDS:
        raise ModelError(f"optimizer kind must be one of {', '.join(OPTIMIZER_KINDS)}, got {kind!r}")
    probe = BlockModel(n_blocks, dims, taylor_order=2)
    blocks = probe.blocks
    extra: list[str] = []
    if step_factors:
        extra += [f"f{i + 1}" for i in range(n_blocks)]
    pairs = [(a, b) for rows in blocks for a in rows for b in rows]
    triples = [(a, b, c) for rows in blocks for a in rows for b in rows for c in rows if b <= c]
    vecs = list(vectors)
    if kind == "preconditioner":
        extra += [f"P_{a + 1}_{b + 1}" for a, b in pairs]
    elif kind == "momentum":
        extra.append("beta")
        vecs.append("m")
    elif kind == "generic":
        extra += [f"J_{a + 1}_{b + 1}" for a, b in pairs] + [f"K_{a + 1}_{b + 1}_{c + 1}" for a, b, c in triples]
        vecs.append("p")
    model = BlockModel(n_blocks, dims, taylor_order=taylor_order, vectors=tuple(vecs), extra=tuple(extra))
    x = model.extra
    factors = [x[f"f{i + 1}"] for i in range(n_blocks)] if step_factors else [model.one] * n_blocks
    opt = OptimizerModel(model, kind, factors)
    if kind == "preconditioner":
        opt.P = {(a, b): x[f"P_{a + 1}_{b + 1}"] for a, b in pairs}
    elif kind == "momentum":
        opt.beta = x["beta"]
        opt.buffer = list(model.vectors["m"])
    elif kind == "generic":
        opt.p = list(model.vectors["p"])
        opt.J = {(a, b): x[f"J_{a + 1}_{b + 1}"] for a, b in pairs}
        opt.K = {(a, b, c): x[f"K_{a + 1}_{b + 1}_{c + 1}"] for a, b, c in triples}
    return opt


# -- Adam (plain SymPy expressions) ----------------------------------------
def adam_direction(gamma, m, v, beta1, beta2, eps, c1, c2):
    """``torch.optim.Adam``'s direction for one coordinate with gradient ``gamma``.

    ``m' = beta1 m + (1 - beta1) gamma``, ``v' = beta2 v + (1 - beta2) gamma^2``,
    ``phi = (m' / c1) / (sqrt(v' / c2) + eps)`` with the bias corrections
    ``c1 = 1 - beta1^t``, ``c2 = 1 - beta2^t`` at step ``t``; the parameter
    moves by ``-lr phi``.  ``torch`` computes ``sqrt(v') / sqrt(c2)``, the same
    real number.
    """
    m_new = beta1 * m + (1 - beta1) * gamma
    v_new = beta2 * v + (1 - beta2) * gamma**2
    return (m_new / c1) / (sympy.sqrt(v_new / c2) + eps)


def adam_jacobian(gamma, m, v, beta1, beta2, eps, c1, c2):
    """``d phi / d gamma`` of :func:`adam_direction` in closed form.

    With ``r = sqrt(v'/c2)``, ``D = r + eps``:
    ``J = (1 - beta1) / (c1 D) - (m'/c1) (1 - beta2) gamma / (c2 r D^2)``.
    Diagonal in the coordinates (Adam is coordinate-wise), so ``J_phi`` is
    block-diagonal (indeed diagonal).
    """
    m_new = beta1 * m + (1 - beta1) * gamma
    v_new = beta2 * v + (1 - beta2) * gamma**2
    r = sympy.sqrt(v_new / c2)
    D = r + eps
    return (1 - beta1) / (c1 * D) - (m_new / c1) * (1 - beta2) * gamma / (c2 * r * D**2)
