"""The extreme eigenpairs of a Hessian: their record, residual test and seeded start vector.

A pair ``(lambda, v)`` is converged when ``||H v - lambda v|| <= tol ||H||`` (:func:`pair_residual`,
:data:`SHARPNESS_TOL`).  Vectors are dicts of tensors keyed like the parameters.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from .float64_sums import norm64

__all__ = ["SHARPNESS_TOL", "Extremes", "pair_residual", "init_power_vector"]

#: Relative residual tolerance of the converged extreme eigenpairs:
#: ``||H v - lambda v|| <= tol * ||H||`` (``||H|| = max(|lambda_max|, |lambda_min|)``), for
#: ``lambda_max`` and ``lambda_min`` alike.
SHARPNESS_TOL = 1e-3


class Extremes:
    """The converged extreme eigenpairs of ``H_JC^k`` and their cost: ``lam_max``, ``lam_min``
    (floats), unit eigenvectors ``v_max``, ``v_min``, ``hvps`` used, ``residual`` (``max ||H v -
    lambda v|| / ||H||`` of the two) and ``solved`` (a solve ran; ``False``: tracked pairs passed).
    """

    def __init__(self, lam_max, lam_min, v_max, v_min, hvps, residual, solved):
        self.lam_max, self.lam_min = float(lam_max), float(lam_min)
        self.v_max, self.v_min = v_max, v_min
        self.hvps, self.residual, self.solved = int(hvps), float(residual), bool(solved)

    @property
    def norm(self) -> float:
        """``||H|| = max(|lambda_max|, |lambda_min|)``."""
        return max(abs(self.lam_max), abs(self.lam_min))

    def contraction(self, lr: float) -> float:
        """``||I - eta H|| = max(|1 - eta lambda_max|, |1 - eta lambda_min|)`` (symmetric ``H``)."""
        return max(abs(1.0 - lr * self.lam_max), abs(1.0 - lr * self.lam_min))


def pair_residual(hvp, *pairs) -> float:
    """``max ||H v - lambda v|| / max |lambda|`` over ``(lambda, v)`` pairs (unit ``v``), one
    product each."""
    scale = max(abs(lam) for lam, _ in pairs)
    worst = 0.0
    for lam, v in pairs:
        Hv = hvp(v)

        def form(x, t, vc, hv, lam=lam):  # Hv - lam v in float64, chunk by chunk
            x.copy_(hv).sub_(t.copy_(vc).mul_(lam))

        r = norm64(form, v, Hv)
        del Hv
        worst = max(worst, r / scale if scale > 0 else (0.0 if r == 0 else math.inf))
    return worst


def init_power_vector(like: Mapping, seed: int) -> dict:
    """A seeded random unit vector keyed like ``like`` (same on every device): drawn in float64 on
    the CPU from ``torch.Generator().manual_seed(seed)`` in key order, normalised, cast to
    ``like``'s dtype and device, one float64 entry in memory at a time.
    """

    def draws():
        gen = torch.Generator().manual_seed(int(seed))
        for k, v in like.items():
            yield k, torch.randn(v.shape, generator=gen, dtype=torch.float64)

    total = None  # tree.norm's sum, in its order
    for _, r in draws():
        s = (r * r).sum()
        total = s if total is None else total + s
    n = torch.sqrt(total) if total is not None else None
    return {k: (r / n).to(dtype=like[k].dtype, device=like[k].device) for k, r in draws()}
