"""The one-step check of Theorem 1 at a point ``theta``: the exact one-step gap beside its
expansion.

For each named pattern ``S`` (JC skipped):

* ``measured = L(theta - eta g_S) - L(theta - eta g)``, the exact ``S`` and JC steps from ``theta``
  (:func:`crosscurv.numeric.steps.scheme_step`), without cancellation
  (:func:`crosscurv.numeric.gap.loss_gap`);
* ``eta2 = eta^2 C_S`` (Theorem 1) and ``eta3 = eta2 + eta^3 c3`` (the next order,
  :func:`crosscurv.numeric.one_step.one_step_coefficients`);
* ``floor = 2 eps sum_i |g_i| |theta_i|``, the rounding of the two steps' coordinates as the loss
  sees them.

``measured`` is NaN where the loss raises outside its domain at the ``S`` step or between the two
steps (:func:`crosscurv.numeric.trajectory.outside_domain`): the check then says nothing of it.

advise runs it at ``theta^0`` before its trajectory, the pattern search when it certifies; the
rows are read by :func:`crosscurv.numeric.advice_text.check_failures`.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import torch

from crosscurv.theory.patterns import DelayPattern

from .trajectory.runner import outside_domain

__all__ = ["one_step_check"]


def one_step_check(task, named: Iterable[tuple[str, DelayPattern]], theta: Mapping, lr: float,
                   k: int = 0, method: str = "auto") -> dict:
    """``{name: {"k", "measured", "eta2", "eta3", "c3", "floor"}}`` for every non-JC ``(name,
    pattern)`` of ``named`` at ``theta`` (module docstring); floats, ``k`` the iteration it is
    recorded at."""
    from .gap import loss_gap
    from .hvp import grad
    from .one_step import one_step_coefficients
    from .steps import scheme_step

    _, g = grad(task.loss, theta)
    jc = {n: theta[n] - lr * g[n] for n in theta}
    eps = torch.finfo(next(iter(theta.values())).dtype).eps
    floor = 2 * eps * float(sum((g[n].double().abs() * theta[n].double().abs()).sum()
                                for n in theta))
    out = {}
    for name, p in named:
        if p.is_jacobi:
            continue
        try:
            with torch.no_grad():
                s_step = scheme_step(task, theta, p, lr, grad_at_params=g)
            measured = loss_gap(task, s_step, jc)
        except Exception as exc:  # a step (or the segment between them) outside the loss's domain
            if not outside_domain(exc):
                raise
            measured = math.nan
        coef = one_step_coefficients(task, theta, p, g=g, method=method)
        eta2 = lr * lr * coef[2]
        out[name] = {"k": k, "measured": measured, "eta2": eta2,
                     "eta3": eta2 + lr**3 * coef[3], "c3": coef[3], "floor": floor}
    return out
