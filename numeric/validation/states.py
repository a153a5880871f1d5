"""The seeded states a step is checked at, their optimizer states, and the default step size."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from .. import tree
from ..hvp import grad
from ..hvp_differences import CurvatureRoute
from ..optimizers import STATE_BUFFERS, OptimizerState
from ..task import Task

__all__ = ["seeded_states", "seeded_optimizer_states", "spectral_radius", "default_eta0"]


def seeded_states(task: Task, seeds: Sequence[int] = (0, 1, 2), perturb: float = 0.5) -> list[dict]:
    """One point per seed, ``theta_s = theta^0 + perturb * sigma_t * xi_s`` (dtype and device of the
    task): ``xi_s`` standard normal from ``torch.Generator().manual_seed(s)`` in float64 on the CPU;
    ``sigma_t`` the RMS of tensor ``t``, else of all parameters (LoRA's ``B = 0``), else 1.
    """
    flat = torch.cat([v.detach().reshape(-1).to(torch.float64).cpu() for v in task.params.values()])
    rms_all = float(flat.pow(2).mean().sqrt()) if flat.numel() else 0.0
    rms_all = rms_all if rms_all > 0 else 1.0
    out = []
    for s in seeds:
        gen = torch.Generator().manual_seed(int(s))
        st = {}
        for k, v in task.params.items():
            v64 = v.detach().to(torch.float64).cpu()
            rms = float(v64.pow(2).mean().sqrt()) if v64.numel() else 0.0
            sigma = rms if rms > 0 else rms_all
            noise = torch.randn(v64.shape, generator=gen, dtype=torch.float64)
            st[k] = (v64 + perturb * sigma * noise).to(dtype=v.dtype, device=v.device)
        out.append(st)
    return out


def seeded_optimizer_states(
    task: Task, spec, states: Sequence[Mapping], seeds: Sequence[int], steps: int = 3
) -> list:
    """One :class:`~crosscurv.numeric.optimizers.OptimizerState` per state: buffers of the size of
    the gradient there.

    Heavy ball: ``momentum_buffer = rms(g) xi``; Adam: ``exp_avg = rms(g) xi``, ``exp_avg_sq =
    (rms(g) xi')^2``, ``step = steps`` (``xi, xi'`` standard normal, per tensor, from
    ``torch.Generator().manual_seed(1000 + seed)``).
    """
    out = []
    for st, s in zip(states, seeds):
        g = grad(task.loss, st)[1]
        gen = torch.Generator().manual_seed(1000 + int(s))
        bufs = {}
        for b in STATE_BUFFERS[spec.name]:
            d = {}
            for k, v in st.items():
                rms = float(g[k].pow(2).mean().sqrt()) if g[k].numel() else 0.0
                noise = torch.randn(v.shape, generator=gen, dtype=torch.float64).to(
                    v.device, v.dtype
                )
                x = (rms if rms > 0 else 1.0) * noise
                d[k] = x * x if b == "exp_avg_sq" else x
            bufs[b] = d
        out.append(OptimizerState(steps if spec.name == "adam" else 1, bufs))
    return out


def spectral_radius(
    task: Task, params: Mapping, iters: int = 12, route: CurvatureRoute | None = None
) -> float:
    """``|lambda|_max`` of ``H(params)`` by power iteration on HVPs (seeded start; products by
    ``route``)."""
    route = CurvatureRoute(task.loss) if route is None else route
    gen = torch.Generator().manual_seed(1234)
    v = {
        k: torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype)
        for k, t in params.items()
    }
    lam = 0.0
    for _ in range(iters):
        nv = float(tree.norm(v))
        if nv == 0.0 or not math.isfinite(nv):
            return lam
        v = tree.scale(v, 1.0 / nv)
        hv = route.one(params, v, precise=False)
        lam = float(tree.norm(hv))
        v = hv
    return lam


def default_eta0(
    task: Task, states: Sequence[Mapping], scale: float = 0.1, route: CurvatureRoute | None = None
) -> float:
    """``eta0 = scale / max_s |lambda_max(H(theta_s))|`` (``scale`` when ``H = 0``).

    With this choice ``eta * ||H|| <= 0.1`` on the whole grid, so the steps are in the asymptotic
    regime of Lemma 1, while the ``O(eta^2)`` differences between schemes (relative size ``eta
    ||H_ij||``) stay far above round-off.
    """
    route = CurvatureRoute(task.loss) if route is None else route
    lam = max(spectral_radius(task, s, route=route) for s in states)
    return scale / lam if lam > 0 and math.isfinite(lam) else scale
