"""The curvature scale ``lam`` of an instance and the step-size grid it sets.

``eta0`` is the largest power of two with ``eta0 * lam <= factor`` (:func:`grid_start`), so every
study's grid is derived from the instance, never drawn; :func:`dense_derivatives` gives the dense
float64 ``g, H, T`` of small instances (coordinates in block order, :func:`flat_order`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.task import Task


#: tasks with at most this many parameters get exact (dense) norms in :func:`curvature_scale`
DENSE_SCALE_MAX = 256


def curvature_scale(task: Task, params=None, iters: int = 12, seed: int = 0) -> float:
    """``lam = ||H|| + ||g|| ||D^3 L[g_hat]|| + ||g|| ||D^4 L[g_hat, g_hat]||^(1/2)`` at ``params``.

    Spectral norms of the symmetric ``d x d`` matrices ``H``, ``D^3 L[g_hat, ., .]`` and ``D^4
    L[g_hat, g_hat, ., .]`` (``g_hat = g/||g||``): ``lam`` is the inverse step size on which the
    one-step expansion varies. Exact (dense) for at most :data:`DENSE_SCALE_MAX` parameters, else
    ``iters`` power-iteration steps on matrix-free products (never an overestimate); a derivative
    forward mode cannot take contributes 0.
    """
    from crosscurv.numeric.hvp import grad, hvp

    p = {k: v.detach() for k, v in (task.params if params is None else params).items()}
    _, g = grad(task.loss, p)
    gn = float(tree.norm(g))
    if task.num_params() <= DENSE_SCALE_MAX:
        return _dense_scale(task, p, g, gn)
    gen = torch.Generator().manual_seed(seed)
    v0 = {k: torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t) for k, t in p.items()}

    def power(apply) -> float:
        v = tree.scale(v0, 1.0 / float(tree.norm(v0)))
        est = 0.0
        for _ in range(iters):
            w = apply(v)
            n = float(tree.norm(w))
            if not (n > 0 and math.isfinite(n)):
                return est
            est = n
            v = tree.scale(w, 1.0 / n)
        return est

    h_norm = power(lambda v: hvp(task.loss, p, v))
    if gn == 0.0:
        return h_norm
    ghat = tree.scale(g, 1.0 / gn)

    def hv_at(v):
        return lambda q: torch.func.jvp(torch.func.grad(task.loss), (q,), (v,))[1]

    def t_apply(v):  # D^3 L[ghat] v = d/de H(theta + e ghat) v
        return {k: t.detach() for k, t in torch.func.jvp(hv_at(v), (p,), (ghat,))[1].items()}

    def q_apply(v):  # D^4 L[ghat, ghat] v
        inner = lambda q: torch.func.jvp(hv_at(v), (q,), (ghat,))[1]  # noqa: E731
        return {k: t.detach() for k, t in torch.func.jvp(inner, (p,), (ghat,))[1].items()}

    norms = []
    for apply in (t_apply, q_apply):
        try:
            norms.append(power(apply))
        except Exception:  # no forward-mode derivative for some operation
            norms.append(0.0)
    return h_norm + gn * norms[0] + gn * math.sqrt(norms[1])


def _dense_scale(task: Task, p: dict, g: dict, gn: float) -> float:
    """:func:`curvature_scale` with the three matrices formed (double/triple/quadruple backward)."""
    names = flat_order(task)
    like = {n: p[n] for n in names}
    x0 = tree.flatten(like)

    def f(x):
        q = dict(p)
        q.update(tree.unflatten(x, like))
        return task.loss(q)

    def norm2(m: torch.Tensor) -> float:
        m = 0.5 * (m + m.T)
        return float(torch.linalg.eigvalsh(m).abs().max())

    hessian = torch.autograd.functional.hessian
    h_norm = norm2(hessian(f, x0))
    if gn == 0.0:
        return h_norm
    ghat = tree.flatten({n: g[n] for n in names}) / gn

    def f1(x):  # DL(x)[ghat]; its Hessian is D^3 L(x)[ghat]
        (gx,) = torch.autograd.grad(f(x), x, create_graph=True)
        return gx @ ghat

    def f2(x):  # D^2 L(x)[ghat, ghat]; its Hessian is D^4 L(x)[ghat, ghat]
        (hx,) = torch.autograd.grad(f1(x), x, create_graph=True, allow_unused=True)
        return (hx @ ghat) if hx is not None else x.sum() * 0

    out = h_norm
    for fn, power in ((f1, 1.0), (f2, 0.5)):
        try:
            out += gn * norm2(hessian(fn, x0)) ** power
        except RuntimeError:  # the derivative vanishes identically (no graph to differentiate)
            pass
    return out


def grid_start(scale: float, factor: float = 1.0 / 16) -> float:
    """``eta0 = 2^-m``, the largest power of two with ``eta0 * scale <= factor``.

    Powers of two keep the grid ``eta0 * 2^-k`` exact in binary floating point.
    """
    if not (scale > 0 and math.isfinite(scale)):
        return factor
    return 2.0 ** math.floor(math.log2(factor / scale))


def dense_derivatives(task: Task, params=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense ``g (d,)``, ``H (d, d)``, ``T (d, d, d)`` of ``task.loss`` at ``params`` (small tasks
    only).

    Coordinates are the parameters flattened in block order (block 0's tensors first), matching
    ``block_dims`` = :meth:`Task.block_sizes`. Computed with ``torch.func`` in float64; for tests
    and references.
    """
    p = {k: v.detach() for k, v in (task.params if params is None else params).items()}
    names = [n for b in task.block_names for n in task.blocks[b]]
    like = {n: p[n] for n in names}
    flat0 = tree.flatten(like).to(torch.float64)

    def f(x):
        q = dict(p)
        q.update(tree.unflatten(x, like))
        return task.loss(q)

    g = torch.func.grad(f)(flat0)
    H = torch.func.hessian(f)(flat0)
    T = torch.func.jacfwd(torch.func.hessian(f))(flat0)
    return g.numpy().copy(), H.numpy().copy(), T.numpy().copy()


def flat_order(task: Task) -> list[str]:
    return [n for b in task.block_names for n in task.blocks[b]]
