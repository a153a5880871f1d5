"""``sgd``: ``theta - eta_i g`` (exactly the plain step of :mod:`crosscurv.numeric.steps`); no
state.

Every optimizer is a module like this one, listed in :data:`crosscurv.numeric.optimizers.RULES`:
``USAGE`` (the spec's form), ``BUFFERS`` (``torch.optim``'s state names), :func:`parse`,
:func:`describe`, :func:`settings`, :func:`update` (the step, ``torch.optim``'s arithmetic),
:func:`direction` (``phi(g, s)``), :func:`jacobian_apply` (``J_phi v``), and for the estimates
(:mod:`crosscurv.numeric.optimizer_estimates`) :func:`tangent_coefficients`, :func:`tangent_apply`
(one step of the linearized ``S - JC`` difference), ``BOUND_SCALES_FORCING`` and
:func:`bound_majorant` (the magnitude bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from crosscurv.theory.errors import OptimizerError

if TYPE_CHECKING:
    from .spec import OptimizerSpec

USAGE = "sgd"
BUFFERS: tuple = ()


def parse(spec: str, sep: str, args: str) -> dict:
    """``sgd`` (no arguments): the fields of its
    :class:`~crosscurv.numeric.optimizers.spec.OptimizerSpec` (none)."""
    if sep:
        raise OptimizerError(f"optimizer sgd takes no arguments, got {spec!r}")
    return {}


def describe(spec: OptimizerSpec) -> str:
    return "sgd"


def settings(spec: OptimizerSpec) -> dict:
    """The hyperparameters a run's settings record (none)."""
    return {}


def update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping, state,
           new_state, lrs: Mapping) -> dict:
    """``{key: theta_key - lr_key g_key}`` (new tensors)."""
    return {k: params[k] - lrs[k] * grads[k] for k in keys}


def direction(spec: OptimizerSpec, state, grads: Mapping) -> dict:
    """``phi(g) = g``."""
    return dict(grads)


def jacobian_apply(spec: OptimizerSpec, state, grads: Mapping, v: Mapping) -> dict:
    """``J_phi = I``."""
    return dict(v)


# -- the estimates ----------------------------------------------------------------
#: :func:`crosscurv.numeric.optimizer_estimates.forcing_norm` takes ``||F M_S F phi_S||``.
BOUND_SCALES_FORCING = True


def tangent_coefficients(spec: OptimizerSpec, jc_state, g_jc) -> dict:
    """The tangent step's coefficients from the JC run (none)."""
    return {}


def tangent_apply(spec: OptimizerSpec, lr, f: Mapping, coefficients: Mapping, z: Mapping,
                  zs: Mapping, dg: Mapping) -> tuple[dict, dict]:
    """``z' = z - eta F dg`` (no state difference)."""
    return {k: z[k] - lr * f[k] * dg[k] for k in z}, {}


def bound_majorant(spec: OptimizerSpec, norms: Sequence[float], lr: float, f_max: float,
                   L: float) -> float:
    """``a_K`` of ``a_{k+1} = (1 + eta f_max L) a_k + eta^2 n_k`` from ``a_0 = 0`` (the paper's
    ``b_k`` when ``F = I``)."""
    a = 0.0
    c = 1.0 + lr * f_max * L
    for n in norms:
        a = a * c + n
    a *= lr * lr
    return a


def edge_curvature(spec: OptimizerSpec, lr: float, f_max: float) -> float:
    """The largest curvature ``lambda`` at which the step is stable on ``lambda/2 x^2``: ``|1 - eta
    f lambda| < 1`` for every factor ``f <= f_max`` holds while ``lambda < 2 / (eta f_max)`` (the
    edge of stability)."""
    return 2.0 / (lr * f_max)
