"""One-step gap estimates from a common point (Theorem 1, and one order beyond it).

From the same ``theta^k`` (``g``, ``H``, third derivative ``T``), the exact step of an acyclic
pattern ``S`` and the JC step satisfy

    L_S^{k+1} - L_JC^{k+1} = eta^2 C_S + eta^3 c3 + O(eta^4),
    C_S = g^T M_S g,   c3 = - g^T (M_S + H) M_S g - 1/2 sum_i D^3 L[E_i g, P_i g, P_i g],

``E_i g`` keeping block ``i`` of ``g`` and ``P_i g`` the blocks ``j in S(i)``; the same coefficients
as ``crosscurv.theory.one_step.gap_coefficients``.
"""

from __future__ import annotations

from typing import Mapping

import torch

from crosscurv.theory.patterns import DelayPattern, jacobi

from . import tree
from .curvature import masked_directions
from .float64_sums import dot64
from .hvp import grad, hvp_batch
from .steps import block_keys, check_pattern, scheme_step
from .third import third_derivative
from .threads import computes_with_threads

__all__ = ["one_step_coefficients", "one_step_estimate", "one_step_gap"]


def one_step_coefficients(task, params: Mapping, pattern: DelayPattern | str, g: Mapping
                          | None = None, method: str = "auto") -> dict:
    """``{2: C_S, 3: c3}`` of the one-step gap at ``params`` as Python floats (dots in float64);
    ``g``: the gradient at ``params`` if known; ``method``: the HVP method.
    """
    pattern = check_pattern(task, pattern)
    groups = masked_directions(task, pattern)
    if not groups:  # JC against itself
        return {2: 0.0, 3: 0.0}
    if g is None:
        _, g = grad(task.loss, params)
    keys = block_keys(task)
    fresh_keys = [pattern.fresh_items(rows[0], keys) for _, rows in groups]
    row_keys = [[k for i in rows for k in keys[i]] for _, rows in groups]

    def rows_of(products: list) -> dict:  # M_S v from the products H (P_F v): each group's rows
        out = tree.zeros_like(params)
        for rk, hv in zip(row_keys, products):
            out.update((k, hv[k]) for k in rk)
        return out

    hg = hvp_batch(task.loss, params, [tree.restrict(g, fk) for fk in fresh_keys], method)
    mg = rows_of(hg)  # M_S g
    prods = hvp_batch(task.loss, params, [tree.restrict(mg, fk) for fk in fresh_keys] + [mg],
                      method)
    mmg = rows_of(prods[:-1])  # M_S^2 g
    hmg = prods[-1]  # H M_S g

    cubic = 0.0
    for fk, rk in zip(fresh_keys, row_keys):
        pg = tree.restrict(g, fk)
        cubic += float(third_derivative(task.loss, params, tree.restrict(g, rk), pg, pg, method).to(
            torch.float64))
    c_s = dot64(g, mg)
    c3 = -(dot64(g, mmg) + dot64(g, hmg)) - 0.5 * cubic
    return {2: c_s, 3: c3}


@computes_with_threads
def one_step_estimate(task, params: Mapping, pattern: DelayPattern | str, lr, g: Mapping
                      | None = None, method: str = "auto") -> dict:
    """One-step estimates of ``L_S^{k+1} - L_JC^{k+1}`` from ``params``.

    Returns:
        ``{"eta2": lr^2 C_S, "eta3": lr^2 C_S + lr^3 c3, "C_S": C_S, "c3": c3}``
        (Python floats): ``eta2`` is Theorem 1's estimate, ``eta3`` adds the
        next order (module docstring).
    """
    coef = one_step_coefficients(task, params, pattern, g, method)
    lr = float(lr)
    eta2 = lr**2 * coef[2]
    return {"eta2": eta2, "eta3": eta2 + lr**3 * coef[3], "C_S": coef[2], "c3": coef[3]}


@computes_with_threads
def one_step_gap(task, params: Mapping, pattern: DelayPattern | str, lr) -> float:
    """The measured gap ``L(S step) - L(JC step)`` from ``params`` (exact steps,
    :mod:`crosscurv.numeric.steps`)."""
    pattern = check_pattern(task, pattern)
    with torch.no_grad():
        ls = task.loss(scheme_step(task, params, pattern, lr))
        lj = task.loss(scheme_step(task, params, jacobi(task.n_blocks), lr))
    return float(ls.to(torch.float64) - lj.to(torch.float64))
