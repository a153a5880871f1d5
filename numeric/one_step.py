"""One-step gap estimates from a common point (Theorem 1, and one order beyond it).

From the same ``theta^k`` (gradient ``g``, Hessian ``H``, third derivative
``T``), the exact step of an acyclic pattern ``S`` and the JC step satisfy

    L_S^{k+1} - L_JC^{k+1} = eta^2 C_S + eta^3 c3 + O(eta^4),

with ``C_S = g^T M_S g`` (Theorem 1) and

    c3 = - g^T (M_S + H) M_S g - 1/2 sum_i D^3 L[E_i g, P_i g, P_i g],

where ``E_i g`` keeps block ``i`` of ``g`` and ``P_i g`` the blocks
``j in S(i)``.  (Derivation: the fresh gradient is
``g_tilde = g - eta M_S g + eta^2 (M_S^2 g + t/2) + O(eta^3)`` with
``t_i = [T(., P_i g, P_i g)]_i``; substitute ``Delta = -eta g_tilde`` into the
cubic Taylor expansion of ``L`` and subtract the JC expansion; the
``T[g, g, g]`` terms cancel.)  ``crosscurv.theory.one_step.gap_coefficients`` derives the
same coefficients symbolically; the tests compare the two.

Cost: ``n_F`` HVPs for ``M_S g``, ``n_F + 1`` for ``M_S^2 g`` and ``H M_S g``
(one batch), and ``n_F`` third derivatives (nested ``jvp``), where ``n_F`` is
the number of distinct non-empty fresh sets.
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


def one_step_coefficients(task, params: Mapping, pattern: DelayPattern | str, g: Mapping | None = None, method: str = "auto") -> dict:
    """The coefficients ``{2: C_S, 3: c3}`` of the one-step gap at ``params``.

    Args:
        task: the :class:`crosscurv.numeric.Task`.
        params: the common point ``theta^k``.
        pattern: acyclic delay pattern over ``task.n_blocks`` blocks, or its
            spec (``"gs"``, ``"2<-1"``...; :func:`crosscurv.theory.patterns.as_pattern`).
        g: the gradient at ``params`` if known (else computed).
        method: HVP method (:func:`crosscurv.numeric.hvp.hvp`).

    Returns:
        ``{2: C_S, 3: c3}`` as Python floats (dots accumulated in float64),
        the same keys as ``crosscurv.theory.one_step.gap_coefficients``.
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
    prods = hvp_batch(task.loss, params, [tree.restrict(mg, fk) for fk in fresh_keys] + [mg], method)
    mmg = rows_of(prods[:-1])  # M_S^2 g
    hmg = prods[-1]  # H M_S g

    cubic = 0.0
    for fk, rk in zip(fresh_keys, row_keys):
        pg = tree.restrict(g, fk)
        cubic += float(third_derivative(task.loss, params, tree.restrict(g, rk), pg, pg, method).to(torch.float64))
    c_s = dot64(g, mg)
    c3 = -(dot64(g, mmg) + dot64(g, hmg)) - 0.5 * cubic
    return {2: c_s, 3: c3}


@computes_with_threads
def one_step_estimate(task, params: Mapping, pattern: DelayPattern | str, lr, g: Mapping | None = None, method: str = "auto") -> dict:
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
    """The measured gap ``L(S step) - L(JC step)`` from ``params`` (exact steps, :mod:`crosscurv.numeric.steps`)."""
    pattern = check_pattern(task, pattern)
    with torch.no_grad():
        ls = task.loss(scheme_step(task, params, pattern, lr))
        lj = task.loss(scheme_step(task, params, jacobi(task.n_blocks), lr))
    return float(ls.to(torch.float64) - lj.to(torch.float64))
