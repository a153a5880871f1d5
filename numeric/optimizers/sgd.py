"""``sgd``: ``theta - eta_i g`` (exactly the plain step of :mod:`crosscurv.numeric.steps`); no state.

Every optimizer is a module like this one, listed in :data:`crosscurv.numeric.optimizers.RULES`:
``USAGE`` (the spec's form), ``BUFFERS`` (``torch.optim``'s state names), :func:`parse`,
:func:`describe`, :func:`settings`, :func:`update` (the step, ``torch.optim``'s arithmetic),
:func:`direction` (``phi(g, s)``) and :func:`jacobian_apply` (``J_phi v``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .spec import OptimizerError, OptimizerSpec

USAGE = "sgd"
BUFFERS: tuple = ()


def parse(spec: str, sep: str, args: str) -> OptimizerSpec:
    """``sgd`` (no arguments)."""
    if sep:
        raise OptimizerError(f"optimizer sgd takes no arguments, got {spec!r}")
    return OptimizerSpec()


def describe(spec: OptimizerSpec) -> str:
    return "sgd"


def settings(spec: OptimizerSpec) -> dict:
    """The hyperparameters a run's settings record (none)."""
    return {}


def update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping, state, new_state,
           lrs: Mapping) -> dict:
    """``{key: theta_key - lr_key g_key}`` (new tensors)."""
    return {k: params[k] - lrs[k] * grads[k] for k in keys}


def direction(spec: OptimizerSpec, state, grads: Mapping) -> dict:
    """``phi(g) = g``."""
    return dict(grads)


def jacobian_apply(spec: OptimizerSpec, state, grads: Mapping, v: Mapping) -> dict:
    """``J_phi = I``."""
    return dict(v)
