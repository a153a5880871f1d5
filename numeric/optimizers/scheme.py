"""The optimizer's step of a scheme and its direction map, dispatched to the optimizer's rule
module.

The scheme step (:func:`optimizer_scheme_step`) is
:func:`crosscurv.numeric.steps.scheme_step_with_grads` with the optimizer as its update: block
``i``'s gradient is evaluated where exactly the blocks of ``S(i)`` hold their new values, and both
the move and the state update use that fresh gradient.  JC and ``S`` keep separate states
(:class:`~crosscurv.numeric.optimizers.OptimizerState`), equal at the start.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from crosscurv.theory.patterns import DelayPattern

from ..steps import scheme_step_with_grads
from .blocks import param_lrs
from .spec import OptimizerSpec, parse_optimizer
from .state import OptimizerState

__all__ = ["optimizer_update", "optimizer_scheme_step", "direction", "direction_jacobian_apply"]


def optimizer_update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping,
                     state: OptimizerState, new_state: OptimizerState, lrs: Mapping) -> dict:
    """``{key: new value}`` (new tensors) for the parameters ``keys`` moved from ``params`` with
    ``grads`` by ``torch.optim`` arithmetic; ``state`` is read only, ``new_state`` (whose ``step``
    is already ``state.step + 1``) receives the updated buffers; ``lrs``: ``{name: lr_i}``.
    """
    return spec.rule.update(spec, keys, params, grads, state, new_state, lrs)


def optimizer_scheme_step(task, params: Mapping, pattern: DelayPattern, lr, spec: OptimizerSpec
                          | str,
                          state: OptimizerState | None = None, factors: Sequence[float]
                          | None = None,
                          grad_at_params: Mapping | None = None):
    """One exact step of scheme ``S`` with a block-separable optimizer: ``(theta^{k+1}, new_state,
    g_tilde)``, ``g_tilde`` the fresh gradient each block used.

    ``state``: the run's state at ``theta^k`` (default the initial one); ``factors``: per-block
    step-size factors (default 1); ``grad_at_params`` as in
    :func:`crosscurv.numeric.steps.scheme_step_with_grads`, which this is exactly for ``sgd``
    without factors.
    """
    spec = parse_optimizer(spec)
    state = OptimizerState() if state is None else state
    lrs = param_lrs(task, lr, factors)
    new_state = OptimizerState(state.step + 1, {n: dict(d) for n, d in state.buffers.items()})
    if spec.name == "sgd" and all(f == 1.0 for f in (factors or [])):
        new, used = scheme_step_with_grads(task, params, pattern, lr, grad_at_params)
        return new, new_state, used

    def update(keys, old, grads):
        return optimizer_update(spec, keys, old, grads, state, new_state, lrs)

    new, used = scheme_step_with_grads(task, params, pattern, lr, grad_at_params, update=update)
    return new, new_state, used


def direction(spec: OptimizerSpec, state: OptimizerState, grads: Mapping) -> dict:
    """``phi(g, s)``: the step the run would take with gradients ``grads`` is ``-lr_i phi`` (float64
    arithmetic in the estimates): ``g`` for ``sgd``, ``beta buf + g`` for ``momentum``, Adam's
    bias-corrected ratio."""
    return spec.rule.direction(spec, state, grads)


def direction_jacobian_apply(spec: OptimizerSpec, state: OptimizerState, grads: Mapping,
                             v: Mapping) -> dict:
    """``J_phi v``: the Jacobian of :func:`direction` in the gradient, at ``grads``, applied to
    ``v``
    (identity for ``sgd`` and ``momentum``, diagonal for Adam:
    :func:`crosscurv.numeric.optimizers.adam.jacobian_apply`)."""
    return spec.rule.jacobian_apply(spec, state, grads, v)
