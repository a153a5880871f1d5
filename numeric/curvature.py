"""Block-masked curvature: ``M_S v`` (Lemma 1) and the cross-curvature table (Theorem 1).

``M_S`` keeps the Hessian blocks ``H_ij`` with ``(i, j) in S`` and zeroes the rest (paper, Lemma 1).
With ``P_i`` the projection onto the blocks of ``S(i) = {j : (i, j) in S}``,

    (M_S v)_i = sum_{j in S(i)} H_ij v_j = [H (P_i v)]_i,

so ``M_S v`` needs one HVP per *distinct* non-empty fresh set (blocks with the same ``S(i)`` share
the product), batched by :func:`crosscurv.numeric.hvp.hvp_batch`.

The table ``c_ij = g_i^T H_ij g_j`` (Theorem 1) needs ``N`` HVPs, one per block direction ``E_j g``;
from it ``C_S = sum_{(i,j) in S} c_ij`` (Theorem 1) and ``C_cross = g^T (H - D) g = 2 sum_{i<j}
c_ij`` (Corollary 1). No ``d x d`` tensor is ever formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import torch

from crosscurv.theory.patterns import DelayPattern, as_pattern

from . import tree
from .float64_sums import dot64
from .hvp import grad, hvp_batch
from .steps import block_keys, check_pattern
from .threads import computes_with_threads

__all__ = ["masked_directions", "masked_product", "masked_products", "MaskedProductPlan",
           "masked_product_plan", "plan_for_blocks", "CrossCurvature", "cross_curvature_table"]


def masked_directions(task, pattern: DelayPattern) -> list[tuple[tuple[int, ...], list[int]]]:
    """Distinct non-empty fresh sets of ``pattern`` and the blocks that share each.

    Returns:
        ``[(F, rows), ...]``: ``rows`` are the blocks ``i`` with ``S(i) = F``;
        one HVP along ``P_F v`` serves all of them.  JC gives ``[]``.
    """
    check_pattern(task, pattern)
    return _fresh_sets(pattern)


def _fresh_sets(pattern: DelayPattern) -> list[tuple[tuple[int, ...], list[int]]]:
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in range(pattern.n_blocks):
        f = pattern.fresh(i)
        if f:
            groups.setdefault(f, []).append(i)
    return list(groups.items())


def _assemble(keys: list[list[str]], groups, products: list, like: Mapping) -> dict:
    """``M_S v`` from the products ``H (P_F v)``: block ``i`` of the product of its group."""
    out = tree.zeros_like(like)
    for (_, rows), hv in zip(groups, products):
        for i in rows:
            for k in keys[i]:
                out[k] = hv[k]
    return out


@dataclass(frozen=True)
class MaskedProductPlan:
    """How ``M_S v`` is assembled from restricted products ``[H (P_C v)]_R`` (Lemma 1).

    Two forms give the same ``M_S v`` (up to the order of the sums):

    * ``"fresh_set"``: one product per distinct non-empty fresh set ``F``,
      seeded by ``v_F`` (columns ``C = F``), rows ``R = {i : S(i) = F}``;
    * ``"fresh_block"``: one product per block ``j`` that is fresh for some
      block, seeded by ``v_j`` alone (``C = {j}``), rows ``R = {i : j in S(i)}``;
      row ``i`` sums its products in increasing ``j``.

    Attributes:
        form: ``"fresh_set"`` or ``"fresh_block"``.
        products: ``((column keys, row keys), ...)``, parameter names.
    """

    form: str
    products: tuple

    def assemble(self, like: Mapping, restricted: Iterable[Mapping]) -> dict:
        """``M_S v`` keyed like ``like`` from the products' rows (``restricted[m]`` holds
        ``products[m]``'s rows; an iterator is consumed one product at a time); rows no product
        reaches are zero."""
        out: dict = {}
        for (_, rows), hv in zip(self.products, restricted):
            for k in rows:
                out[k] = hv[k] if k not in out else out[k] + hv[k]
        return {k: out[k] if k in out else torch.zeros_like(like[k]) for k in like}


def masked_product_plan(task, pattern: DelayPattern, form: str = "auto") -> MaskedProductPlan:
    """The products of ``M_S v`` for ``pattern`` (see :class:`MaskedProductPlan`).

    ``form="auto"`` takes ``"fresh_block"`` unless it needs more products than ``"fresh_set"``: a
    product seeded by one block reaches only the part of the retained graph below that block's
    gradient, so at equal counts it is the cheaper one (``benchmarks/bench_protocol.py`` measures
    both).
    """
    check_pattern(task, pattern)
    return plan_for_blocks(block_keys(task), pattern, form)


def plan_for_blocks(keys: Sequence[Sequence[str]], pattern: DelayPattern,
                    form: str = "auto") -> MaskedProductPlan:
    """:func:`masked_product_plan` from the parameter names of each block (``keys[i]``: block
    ``i``).
    """
    groups = _fresh_sets(pattern)
    by_set = tuple(
        (tuple(k for j in fresh for k in keys[j]), tuple(k for i in rows for k in keys[i]))
        for fresh, rows in groups
    )
    readers: dict[int, list[int]] = {}
    for i in range(pattern.n_blocks):
        for j in pattern.fresh(i):
            readers.setdefault(j, []).append(i)
    by_block = tuple(
        (tuple(keys[j]), tuple(k for i in rows for k in keys[i])) for j, rows in sorted(
        readers.items())
    )
    if form == "auto":
        form = "fresh_block" if len(by_block) <= len(by_set) else "fresh_set"
    if form == "fresh_set":
        return MaskedProductPlan("fresh_set", by_set)
    if form == "fresh_block":
        return MaskedProductPlan("fresh_block", by_block)
    raise ValueError(f"unknown masked-product form {form!r} (use auto, fresh_set, fresh_block)")


def masked_products(
    task, params: Mapping, pattern: DelayPattern, vs: Sequence[Mapping], method: str = "auto",
    chunk_size=None
) -> list:
    """``[M_S v_1, ..., M_S v_m]`` at ``params``, dicts keyed like ``params``, all ``m * n_F``
    HVPs in one batch (``n_F`` distinct non-empty fresh sets; ``method``, ``chunk_size`` as in
    :func:`crosscurv.numeric.hvp.hvp_batch`).
    """
    groups = masked_directions(task, pattern)
    if not groups:
        return [tree.zeros_like(params) for _ in vs]
    keys = block_keys(task)
    dirs = []
    for v in vs:
        for fresh, _ in groups:
            dirs.append(tree.restrict(v, [k for j in fresh for k in keys[j]]))
    prods = hvp_batch(task.loss, params, dirs, method, chunk_size)
    n = len(groups)
    return [_assemble(keys, groups, prods[a * n : (a + 1) * n], params) for a in range(len(vs))]


def masked_product(task, params: Mapping, pattern: DelayPattern, v: Mapping, method: str = "auto",
                   chunk_size=None) -> dict:
    """``M_S v`` (Lemma 1): ``(M_S v)_i = sum_{j in S(i)} H_ij v_j`` (see :func:`masked_products`).
    """
    return masked_products(task, params, pattern, [v], method, chunk_size)[0]


@dataclass
class CrossCurvature:
    """The table ``c_ij = g_i^T H_ij g_j`` at one point (Theorem 1): ``c`` an ``(N, N)`` float64 CPU
    tensor (symmetric up to round-off), ``block_names``, ``loss`` and ``grad_norm2 = ||g||^2``.
    """

    c: torch.Tensor
    block_names: list = field(default_factory=list)
    loss: float = float("nan")
    grad_norm2: float = float("nan")

    def C_S(self, pattern: DelayPattern | str) -> float:
        """``C_S = g^T M_S g = sum_{(i,j) in S} c_ij`` (Theorem 1); ``pattern`` may be a spec such
        as ``"gs"``."""
        pattern = as_pattern(pattern, self.c.shape[0], self.block_names)
        return float(sum((self.c[i, j] for i, j in pattern.pairs), torch.zeros((),
            dtype=torch.float64)))

    @property
    def C_cross(self) -> float:
        """``C_cross = g^T (H - D) g = sum_{i != j} c_ij`` (``= 2 sum_{i<j} c_ij``, Corollary 1)."""
        return float(self.c.sum() - self.c.diagonal().sum())

    @property
    def gHg(self) -> float:
        """``g^T H g = sum_{i,j} c_ij`` (the shared ``eta^2/2`` term of Theorem 1)."""
        return float(self.c.sum())

    def to_dict(self) -> dict:
        return {
            "block_names": list(self.block_names),
            "c": self.c.tolist(),
            "C_cross": self.C_cross,
            "gHg": self.gHg,
            "loss": self.loss,
            "grad_norm2": self.grad_norm2,
        }


@computes_with_threads
def cross_curvature_table(task, params: Mapping | None = None, g: Mapping | None = None,
                          method: str = "auto", chunk_size=None) -> CrossCurvature:
    """Compute ``c_ij = g_i^T H_ij g_j`` for all block pairs with ``N`` HVPs.

    Column ``j`` comes from ``u_j = H (E_j g)`` (``E_j g``: block ``j`` of ``g``, zeros elsewhere):
    ``c_ij = g_i^T (u_j)_i``. Dots are accumulated in float64.

    Args:
        task: the :class:`crosscurv.numeric.Task`.
        params: the point (default ``task.params``).
        g: the gradient at ``params`` if already known (else computed).
        method, chunk_size: passed to :func:`crosscurv.numeric.hvp.hvp_batch`.
    """
    p = task.params if params is None else params
    value = float("nan")
    if g is None:
        val, g = grad(task.loss, p)
        value = float(val)
    keys = block_keys(task)
    dirs = [tree.restrict(g, ks) for ks in keys]
    cols = hvp_batch(task.loss, p, dirs, method, chunk_size)
    rows = []  # rows[j][i] = c_ij (float64 accumulation: crosscurv.numeric.float64_sums)
    for u in cols:
        rows.append([dot64({k: g[k] for k in ks}, {k: u[k] for k in ks}) for ks in keys])
    c = torch.tensor(rows, dtype=torch.float64).T.contiguous()
    gn2 = dot64(g, g)
    return CrossCurvature(c, task.block_names, value, gn2)
