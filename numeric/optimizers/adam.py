"""``adam[:B1,B2,EPS]``: ``torch.optim.Adam`` (defaults 0.9, 0.999, 1e-8; no weight decay, no
amsgrad).

``m = lerp(m, g, 1 - B1)``, ``v = B2 v + (1 - B2) g^2``, step ``t``, ``theta - (eta_i / (1 - B1^t))
m / (sqrt(v) / sqrt(1 - B2^t) + EPS)``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

from crosscurv.theory.errors import OptimizerError

from .arguments import spec_number

# torch is imported by the functions that compute, so that parsing a spec needs none
if TYPE_CHECKING:
    import torch

    from .spec import OptimizerSpec

USAGE = "adam[:B1,B2,EPS]"
BUFFERS = ("exp_avg", "exp_avg_sq")


def parse(spec: str, sep: str, args: str) -> dict:
    """``adam`` (the defaults) or ``adam:B1,B2,EPS`` with ``0 <= B1, B2 < 1`` and ``EPS >= 0``: the
    :class:`~crosscurv.numeric.optimizers.spec.OptimizerSpec` fields (``betas``, ``eps``)."""
    if not sep:
        return {}
    parts = args.split(",")
    if len(parts) != 3:
        raise OptimizerError(f"adam takes three values adam:B1,B2,EPS, got {spec!r}")
    b1, b2, eps = (spec_number(p, w, spec) for p, w in zip(parts, ("B1", "B2", "EPS")))
    for b, w in ((b1, "B1"), (b2, "B2")):
        if not 0.0 <= b < 1.0:
            raise OptimizerError(f"adam {w} must satisfy 0 <= {w} < 1, got {b!r}")
    if eps < 0.0:
        raise OptimizerError(f"adam EPS must be >= 0, got {eps!r}")
    return {"betas": (b1, b2), "eps": eps}


def describe(spec: OptimizerSpec) -> str:
    return f"adam:{spec.betas[0]!r},{spec.betas[1]!r},{spec.eps!r}"


def settings(spec: OptimizerSpec) -> dict:
    return {"beta1": spec.betas[0], "beta2": spec.betas[1], "eps": spec.eps}


def bias_corrections(spec: OptimizerSpec, step: int) -> tuple[float, float]:
    """``(1 - B1^t, sqrt(1 - B2^t))`` at step ``t``."""
    b1, b2 = spec.betas
    t = float(step)
    return 1 - b1**t, (1 - b2**t) ** 0.5


def update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping, state,
           new_state, lrs: Mapping) -> dict:
    """New values of ``keys`` at step ``new_state.step``; their moments go to ``new_state``."""
    import torch

    out = {}
    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    dea = new_state.buffers.setdefault("exp_avg", {})
    deas = new_state.buffers.setdefault("exp_avg_sq", {})
    bc1, bc2_sqrt = bias_corrections(spec, new_state.step)
    for k in keys:
        g = grads[k]
        m = (ea[k].clone() if k in ea else torch.zeros_like(params[k])).lerp_(g, 1 - b1)
        v = (eas[k].clone() if k in eas else torch.zeros_like(params[k])).mul_(b2).addcmul_(g, g,
            value=1 - b2)
        dea[k], deas[k] = m, v
        denom = (v.sqrt() / bc2_sqrt).add_(spec.eps)
        out[k] = params[k].clone().addcdiv_(m, denom, value=-(lrs[k] / bc1))
    return out


def sqrt0(v: torch.Tensor) -> torch.Tensor:
    """``sqrt(v)`` for ``v >= 0`` (the same values), with derivative 0 instead of ``inf`` where ``v
    =
    0``."""
    import torch

    pos = v > 0
    return torch.where(pos, torch.sqrt(torch.where(pos, v, torch.ones_like(v))), torch.zeros_like(
        v))


def direction(spec: OptimizerSpec, state, grads: Mapping) -> dict:
    """``phi = (m'/c1) / (sqrt(v')/sqrt(c2) + eps)`` at step ``state.step + 1``.

    Differentiable in ``grads`` (``torch.func.jvp``): its derivative is :func:`jacobian_apply`'s
    ``J``, with the same convention at Adam's kink (``sqrt`` taken with derivative 0 where ``v' =
    0``).
    """
    import torch

    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    bc1, bc2_sqrt = bias_corrections(spec, state.step + 1)
    out = {}
    for k, g in grads.items():
        m = (ea[k] if k in ea else torch.zeros_like(g)).lerp(g, 1 - b1)
        v = (eas[k] if k in eas else torch.zeros_like(g)) * b2 + (1 - b2) * g * g
        out[k] = (m / bc1) / (sqrt0(v) / bc2_sqrt + spec.eps)
    return out


def jacobian_apply(spec: OptimizerSpec, state, grads: Mapping, v: Mapping) -> dict:
    """Diagonal ``J = (1 - b1) / (c1 D) - (m'/c1) (1 - b2) g / (c2 r D^2)`` applied to ``v``.

    ``r = sqrt(v'/c2)``, ``D = r + eps`` (:func:`crosscurv.theory.optimizers.adam_jacobian`); where
    ``r = 0`` (zero gradient and zero second moment, Adam's kink) the second term is taken as 0.
    """
    import torch

    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    t = float(state.step + 1)
    c1, c2 = 1 - b1**t, 1 - b2**t
    out = {}
    for k, g in grads.items():
        m = (ea[k] if k in ea else torch.zeros_like(g)).lerp(g, 1 - b1)
        vv = (eas[k] if k in eas else torch.zeros_like(g)) * b2 + (1 - b2) * g * g
        r = (vv / c2).sqrt()
        D = r + spec.eps
        second = torch.where(r > 0, (m / c1) * (1 - b2) * g / (c2 * torch.where(r > 0, r,
            torch.ones_like(r)) * D * D),
                             torch.zeros_like(r))
        out[k] = ((1 - b1) / (c1 * D) - second) * v[k]
    return out


# -- the estimates ----------------------------------------------------------------
#: :func:`crosscurv.numeric.optimizer_estimates.forcing_norm` takes ``||M_S F phi_S||``.
BOUND_SCALES_FORCING = False


def tangent_coefficients(spec: OptimizerSpec, jc_state, g_jc: Mapping) -> dict:
    """``{"a_m": d phi/d m', "a_v": d phi/d v', "g": g_JC}`` at the JC run's moments (trees keyed
    like the parameters); ``a_v`` is 0 where ``r = 0``."""
    import torch

    b1, b2 = spec.betas
    t = float(jc_state.step + 1)
    c1, c2 = 1 - b1**t, 1 - b2**t
    ea, eas = jc_state.buffers.get("exp_avg", {}), jc_state.buffers.get("exp_avg_sq", {})
    a_m, a_v = {}, {}
    for k, g in g_jc.items():
        m = (ea[k] if k in ea else torch.zeros_like(g)).lerp(g, 1 - b1)
        v = (eas[k] if k in eas else torch.zeros_like(g)) * b2 + (1 - b2) * g * g
        r = (v / c2).sqrt()
        D = r + spec.eps
        a_m[k] = 1.0 / (c1 * D)
        a_v[k] = torch.where(r > 0, -(m / c1) / (2 * c2 * torch.where(r > 0, r, torch.ones_like(r))
                                                 * D * D),
                             torch.zeros_like(r))
    return {"a_m": a_m, "a_v": a_v, "g": dict(g_jc)}


def tangent_apply(spec: OptimizerSpec, lr, f: Mapping, coefficients: Mapping, z: Mapping,
                  zs: Mapping, dg: Mapping) -> tuple[dict, dict]:
    """``zm' = b1 zm + (1 - b1) dg``, ``zv' = b2 zv + 2 (1 - b2) g dg``, ``z' = z - eta F (a_m zm' +
    a_v zv')``."""
    b1, b2 = spec.betas
    a_m, a_v, g = coefficients["a_m"], coefficients["a_v"], coefficients["g"]
    zm, zv, out = {}, {}, {}
    for k in z:
        zm[k] = b1 * zs["exp_avg"][k] + (1 - b1) * dg[k]
        zv[k] = b2 * zs["exp_avg_sq"][k] + 2 * (1 - b2) * g[k] * dg[k]
        out[k] = z[k] - lr * f[k] * (a_m[k] * zm[k] + a_v[k] * zv[k])
    return out, {"exp_avg": zm, "exp_avg_sq": zv}


def bound_majorant(spec: OptimizerSpec, norms: Sequence[float], lr: float, f_max: float,
                   L: float) -> float:
    """Not bounded this way (the coefficients ``1/(c1 D)`` have no a-priori bound): NaN."""
    return math.nan


def edge_curvature(spec: OptimizerSpec, lr: float, f_max: float) -> float:
    """Not derived from ``lambda_max(H)`` alone (Adam's step scales each coordinate by ``1/(sqrt(v)
    +
    eps)``, so its edge is one of the preconditioned Hessian): NaN, so no Adam run is certified
    inside the regime."""
    return math.nan
