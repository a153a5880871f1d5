"""The cubic tilt of a task: ``L(theta) + sigma/6 (u.(theta - theta^0))^3``.

It leaves the gradient and Hessian at ``theta^0`` (hence ``C_S``) unchanged and
adds ``sigma u^{(x)3}`` to the third-derivative tensor, which moves the ``eta^3``
coefficient (:mod:`crosscurv.experiments.problems.cubic_guard` uses it against cancellation;
:meth:`crosscurv.experiments.problems.problem.Problem.tilted` builds the tilted instance).
"""

from __future__ import annotations

import torch

from crosscurv.numeric.task import Task

__all__ = ["tilt_task"]


def tilt_task(task: Task, sigma: float, u: dict) -> Task:
    """``L(theta) + sigma/6 (u.(theta - theta^0))^3`` with ``theta^0 = task.params``.

    The tilt vanishes to second order at ``theta^0``: gradient and Hessian there are unchanged, the
    third-derivative tensor gains ``sigma u^{(x)3}``.
    """
    base = task.loss
    p0 = {k: v.detach().clone() for k, v in task.params.items()}
    uu = {k: u[k].detach().to(p0[k]) for k in p0}
    sigma = float(sigma)

    def loss(p: dict) -> torch.Tensor:
        """The base loss plus a cubic tilt along ``u`` centred at ``theta^0``."""
        t = sum((uu[k] * (p[k] - p0[k])).sum() for k in p0)
        return base(p) + sigma * t**3 / 6

    info = dict(task.info, tilt_sigma=sigma)
    return Task(dict(task.params), loss, task.blocks, task.name, info, task.default_pattern)
