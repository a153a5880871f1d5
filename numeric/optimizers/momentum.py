"""``momentum:BETA``: heavy ball, ``torch.optim.SGD(momentum=BETA)`` (dampening 0, no Nesterov).

``buf = g`` at the first step, then ``buf = BETA buf + g``; ``theta - eta_i buf``. ``phi(g, s) =
BETA buf + g`` (``g`` without a buffer), so ``J_phi = I``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from crosscurv.theory.errors import OptimizerError

from .arguments import spec_number

if TYPE_CHECKING:
    from .spec import OptimizerSpec

USAGE = "momentum:BETA"
BUFFERS = ("momentum_buffer",)


def parse(spec: str, sep: str, args: str) -> dict:
    """``momentum:BETA`` with ``0 <= BETA < 1``: the fields (``beta``) of its
    :class:`~crosscurv.numeric.optimizers.spec.OptimizerSpec`."""
    if not args.strip():
        raise OptimizerError("optimizer momentum needs its coefficient: momentum:BETA, got "
                             f"{spec!r}")
    beta = spec_number(args, "BETA", spec)
    if not 0.0 <= beta < 1.0:
        raise OptimizerError(f"momentum coefficient must satisfy 0 <= BETA < 1, got {beta!r}")
    return {"beta": beta}


def describe(spec: OptimizerSpec) -> str:
    return f"momentum:{spec.beta!r}"


def settings(spec: OptimizerSpec) -> dict:
    return {"beta": spec.beta}


def update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping, state,
           new_state, lrs: Mapping) -> dict:
    """New values of ``keys``; their new buffers go to ``new_state`` (``torch.optim.SGD``'s
    arithmetic)."""
    out = {}
    old = state.buffers.get("momentum_buffer", {})
    dst = new_state.buffers.setdefault("momentum_buffer", {})
    for k in keys:
        g = grads[k]
        buf = g.detach().clone() if k not in old else old[k].clone().mul_(spec.beta).add_(g,
                                                                                          alpha=1)
        dst[k] = buf
        out[k] = params[k].clone().add_(buf, alpha=-lrs[k])
    return out


def direction(spec: OptimizerSpec, state, grads: Mapping) -> dict:
    """``phi = beta buf + g`` (``g`` without a buffer)."""
    buf = state.buffers.get("momentum_buffer", {})
    return {k: (buf[k] * spec.beta + g if k in buf else g) for k, g in grads.items()}


def jacobian_apply(spec: OptimizerSpec, state, grads: Mapping, v: Mapping) -> dict:
    """``J_phi = I``."""
    return dict(v)


# -- the estimates ----------------------------------------------------------------
#: :func:`crosscurv.numeric.optimizer_estimates.forcing_norm` takes ``||M_S F phi_S||``.
BOUND_SCALES_FORCING = False


def tangent_coefficients(spec: OptimizerSpec, jc_state, g_jc) -> dict:
    """The tangent step's coefficients from the JC run (none)."""
    return {}


def tangent_apply(spec: OptimizerSpec, lr, f: Mapping, coefficients: Mapping, z: Mapping,
                  zs: Mapping, dg: Mapping) -> tuple[dict, dict]:
    """``zm' = beta zm + dg``, ``z' = z - eta F zm'``."""
    zm = {k: spec.beta * zs["momentum_buffer"][k] + dg[k] for k in z}
    return {k: z[k] - lr * f[k] * zm[k] for k in z}, {"momentum_buffer": zm}


def bound_majorant(spec: OptimizerSpec, norms: Sequence[float], lr: float, f_max: float,
                   L: float) -> float:
    """``a_K`` with ``c_{k+1} = beta c_k + L a_k + eta n_k``, ``a_{k+1} = a_k + eta f_max c_{k+1}``
    from zero (``c_k >= ||zm_k||``)."""
    a = 0.0
    m = 0.0
    for n in norms:
        m = spec.beta * m + L * a + lr * n
        a = a + lr * f_max * m
    return a


def edge_curvature(spec: OptimizerSpec, lr: float, f_max: float) -> float:
    """The largest curvature ``lambda`` at which heavy ball is stable on ``lambda/2 x^2``: the roots
    of ``r^2 - (1 + beta - eta f lambda) r + beta`` lie inside the unit circle while ``0 < eta f
    lambda < 2 (1 + beta)``, so ``lambda < 2 (1 + beta) / (eta f_max)``."""
    return 2.0 * (1.0 + spec.beta) / (lr * f_max)
