"""A step written outside torch (NumPy callables) as a :class:`~.inputs.UserStep`."""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from ..task import Task
from .inputs import UserStep, ValidationInputError, declared_pattern

__all__ = ["numpy_user_step"]


def numpy_user_step(params: Mapping, loss: Callable, grad: Callable, step: Callable,
                    blocks: Mapping | None = None, pattern=None,
                    name: str = "numpy step") -> UserStep:
    """A step written outside torch, as a :class:`UserStep`: NumPy callables on ``{name: float64
    array}``.

    ``params``: a point the loss is defined at; ``loss(params) -> float``; ``grad(params) -> {name:
    ndarray}``; ``step(params, lr) -> {name: ndarray}`` (it may modify ``params``); ``blocks``:
    ``{block: [param names]}`` (default one block per parameter); ``pattern`` as for
    :func:`as_user_step`.  The task's backward calls ``grad`` and has no second derivative, so the
    curvature products are central differences of ``grad`` (:class:`CurvatureRoute`).
    """
    import numpy as np
    from torch.autograd.function import once_differentiable

    names = list(params)
    bad = [n for n in names if np.asarray(params[n]).dtype != np.float64]
    if bad:
        raise ValidationInputError(
            f"parameter(s) {', '.join(bad)} are not float64 arrays; step validation runs in float64"
        )

    def to_np(p):
        return {n: p[n].detach().cpu().numpy().copy() for n in names}

    class _Loss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            ctx.save_for_backward(*tensors)
            value = loss(dict(zip(names, (t.detach().numpy().copy() for t in tensors))))
            return torch.tensor(float(value), dtype=torch.float64)

        @staticmethod
        @once_differentiable
        def backward(ctx, g_out):
            g = grad(dict(zip(names, (t.detach().numpy().copy() for t in ctx.saved_tensors))))
            return tuple(
                g_out * torch.as_tensor(np.asarray(g[n], dtype=np.float64)).reshape(t.shape)
                for n, t in zip(names, ctx.saved_tensors)
            )

    def torch_step(p, lr):
        out = step(to_np(p), lr)
        if not isinstance(out, Mapping):
            raise ValidationInputError(
                f"{name}: step returned a {type(out).__name__}, not a dict of arrays"
            )
        return {
            n: torch.as_tensor(np.asarray(v, dtype=np.float64)) if isinstance(v, np.ndarray) else v
            for n, v in out.items()
        }

    def task_loss(p):
        return _Loss.apply(*(p[n] for n in names))

    task_loss.first_derivatives_only = "the loss is NumPy callables (gradients only, no autodiff)"
    start = {n: torch.as_tensor(np.asarray(params[n], dtype=np.float64)).clone() for n in names}
    task = Task(
        start, task_loss, dict(blocks) if blocks is not None else {n: [n] for n in names}, name=name
    )
    task.check_loss()
    return UserStep(task, torch_step, declared_pattern(task, pattern), name)
