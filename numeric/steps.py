"""Exact block-gradient steps for a delay pattern (paper, Definitions 1 and 2).

With ``theta = theta^k`` and learning rate ``eta``, block ``i`` is updated as

    theta_i^{k+1} = theta_i^k - eta * grad_i L(theta^{(i)}),

where ``theta^{(i)}`` holds the new ``theta_j^{k+1}`` exactly for the blocks ``j`` with ``(i, j) in
S`` and the old ``theta_j^k`` for every other block. Blocks with the same fresh set share one
gradient with respect to their parameters only (:func:`crosscurv.numeric.hvp.block_grad`): JC costs
one gradient, full GS ``N`` block gradients.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Mapping, Sequence

import torch

from crosscurv.theory.errors import StepError
from crosscurv.theory.patterns import DelayPattern, as_pattern, gauss_seidel, jacobi

from .chain import PrefixCache
from .hvp import block_grad, grad

__all__ = ["StepError", "block_keys", "fresh_groups", "scheme_step", "scheme_step_with_grads",
           "jacobi_step", "gauss_seidel_step"]


def block_keys(task) -> list[list[str]]:
    """Parameter names of each block, in block order (block ``i`` -> ``task.blocks[name_i]``)."""
    return [list(task.blocks[b]) for b in task.block_names]


def check_pattern(task, pattern: DelayPattern | str) -> DelayPattern:
    """``pattern`` (or its spec, block names allowed) as a :class:`DelayPattern` over
    ``task.n_blocks`` blocks; raises ``PatternError``.
    """
    return as_pattern(pattern, task.n_blocks, task.block_names)


def fresh_groups(pattern: DelayPattern) -> list[tuple[tuple[int, ...], list[int]]]:
    """``[(F, members), ...]``: the blocks grouped by fresh set ``F = S(i)`` (sorted, 0-based), each
    group after every group holding a block of its ``F``.
    """
    return pattern.groups_by_fresh_set()


def _check_lr(lr) -> None:
    try:
        val = float(lr)
    except (TypeError, ValueError):
        raise StepError(f"learning rate must be a number, got {lr!r}") from None
    if not math.isfinite(val):
        raise StepError(f"learning rate must be finite, got {val}")


def scheme_step_with_grads(task, params: Mapping, pattern: DelayPattern, lr,
                           grad_at_params: Mapping | None = None, update=None) -> tuple[dict, dict]:
    """One exact step of scheme ``S``: ``(theta^{k+1}, g_tilde)``, detached dicts keyed like
    ``params``, ``theta^{k+1} = theta^k - eta * g_tilde``, ``g_tilde`` the fresh block gradients
    ``grad_i L(theta^{(i)})``.

    ``grad_at_params``: ``grad L(theta^k)`` if the caller has it (the blocks with an empty fresh set
    use it). ``update(keys, old, grads) -> {key: new value}``: a block-separable optimizer
    (:func:`crosscurv.numeric.optimizers.optimizer_scheme_step`); default ``old - lr * grad``.
    """
    pattern = check_pattern(task, pattern)
    _check_lr(lr)
    old = {k: v.detach() for k, v in params.items()}
    if pattern.is_jacobi:
        g = grad(task.loss, old)[1] if grad_at_params is None else dict(grad_at_params)
        if update is not None:
            return dict(update(list(old), old, g)), g
        return {k: old[k] - lr * g[k] for k in old}, g
    keys = block_keys(task)
    new: dict[str, torch.Tensor] = {}
    used: dict[str, torch.Tensor] = {}
    # a chained loss (crosscurv.numeric.chain) runs each block gradient's forward pass from the
    # first updated stage
    chain = getattr(task, "chain", None)
    block_gradient = PrefixCache(chain, keys).block_grad if chain is not None else partial(
        block_grad, task.loss)
    for fresh, members in fresh_groups(pattern):
        state = dict(old)
        for j in fresh:
            for k in keys[j]:
                state[k] = new[k]
        wrt = [k for b in members for k in keys[b]]
        if not fresh and grad_at_params is not None:
            gb = {k: grad_at_params[k] for k in wrt}
        else:
            gb = block_gradient(state, wrt)
        moved = update(wrt, old, gb) if update is not None else None
        for k in wrt:
            used[k] = gb[k]
            new[k] = old[k] - lr * gb[k] if moved is None else moved[k]
    return {k: new[k] for k in old}, {k: used[k] for k in old}


def scheme_step(task, params: Mapping, pattern: DelayPattern, lr, grad_at_params: Mapping
                | None = None) -> dict:
    """``theta^{k+1}`` of scheme ``S`` from ``theta^k`` (see :func:`scheme_step_with_grads`)."""
    return scheme_step_with_grads(task, params, pattern, lr, grad_at_params)[0]


def jacobi_step(task, params: Mapping, lr) -> dict:
    """JC step (Definition 1): ``theta - eta * grad L(theta)``, one gradient."""
    return scheme_step(task, params, jacobi(task.n_blocks), lr)


def gauss_seidel_step(task, params: Mapping, lr, order: Sequence[int] | None = None) -> dict:
    """Full GS sweep (Definition 1) in ``order`` (0-based; index order by default)."""
    return scheme_step(task, params, gauss_seidel(task.n_blocks, order), lr)
