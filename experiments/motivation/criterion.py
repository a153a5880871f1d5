"""The one-step cross-curvature criterion evaluated along the practical runs.

At a point ``theta`` of the simultaneous run (with its optimiser state) and the minibatch objective
``L_B`` of the next step (no dropout), Theorem 1 says that the exact plain-gradient steps satisfy

    L_B(theta_S^+) - L_B(theta_JC^+) = eta^2 C_S + O(eta^3),   C_S = g^T M_S g,

with ``g = grad L_B(theta)`` and ``M_S`` the Hessian blocks ``H_ij``, ``(i, j) in S`` (Lemma 1;
:func:`crosscurv.numeric.masked_product`).

Optimizer-aware form (the practical steps use momentum, clipping or Adam): a step ``theta^+ = theta
- eta d(g)`` whose direction ``d`` depends on the gradient through the optimiser state. In the
sequential sweep block ``i`` sees the gradient at the partially updated state, ``g_i - eta (M_S d)_i
+ O(eta^2)``, so its direction changes by ``-eta J (M_S d)`` with ``J = dd/dg`` (the Jacobian of the
direction in the gradient at this state), and

    L_B(theta_S^+) - L_B(theta_JC^+) = eta^2 C_opt + O(eta^3),   C_opt = g^T J M_S d.

Plain SGD (``d = g``, ``J = I``) gives back ``C_S``; momentum and weight decay (``d = mu b + g + wd
theta``, ``J = I``) give ``g^T M_S d``; clipping and Adam give a non-trivial ``J``, applied here as
one ``torch.func.jvp`` of the optimiser's direction map. Cost: one gradient, one or two masked
products (one HVP per distinct fresh set each), and the two practical steps.
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from crosscurv.numeric import grad, masked_product, one_step_gap
from crosscurv.numeric.float64_sums import dot64
from crosscurv.theory.patterns import parse_pattern

__all__ = ["probe_point", "to_float64"]


def to_float64(obj):
    """``obj`` with every floating tensor (in nested dicts, lists, tuples) cast to float64 (probes
    run in float64)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(torch.float64) if obj.is_floating_point() else obj
    if isinstance(obj, dict):
        return {k: to_float64(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_float64(v) for v in obj)
    return obj


def probe_point(task, params: Mapping, lr: float, optimizer, opt_state, seq_step: Callable,
                sim_step: Callable, gs_step: Callable | None = None,
                extra_grad: Callable | None = None, method: str = "reverse") -> dict:
    """The criterion and the measured next-step differences at ``params``.

    Args:
        task: :class:`crosscurv.numeric.Task` whose ``loss`` is the deterministic minibatch
            objective ``L_B`` (including any weight-decay penalty) and whose blocks and
            ``default_pattern`` give the sequential scheme ``S``.
        params: the point (the simultaneous run's parameters). lr: the step size ``eta``.
        optimizer, opt_state: the practical optimiser
            (:class:`crosscurv.numeric.optimizers.FunctionalOptimizer`) and its state at ``params``;
            its ``direction(params, grads, state)`` is ``d``.
        seq_step, sim_step: ``params -> new params``: the practical steps from this state on this
            minibatch (sequential, simultaneous).
        gs_step: optional exact-GS practical step (``mlp``). extra_grad: ``g -> g_opt``, the part of
            ``g`` the optimiser receives (default identity; the ``fl`` task's penalty is added by
            the optimiser itself, so there ``g_opt = g - wd theta``).
        method: HVP method (``"reverse"``: double backward works for every panel).

    Returns:
        the ``probes.csv`` row without ``k``: ``lr, C_S, C_opt, est_plain, est, meas_seq, meas_gs,
        meas_plain, meas_plain_8`` (the last: exact plain steps at ``lr / 8``).
    """
    pattern = parse_pattern(task.default_pattern, task.n_blocks, task.block_names)
    _, g = grad(task.loss, params)
    mg = masked_product(task, params, pattern, g, method)
    c_s = dot64(g, mg)
    g_opt = extra_grad(g) if extra_grad is not None else g

    def direction(gg):
        return optimizer.direction(params, gg, opt_state)

    d = {k: v.detach() for k, v in direction(g_opt).items()}
    md = masked_product(task, params, pattern, d, method)
    _, jmd = torch.func.jvp(direction, (g_opt,), ({k: md[k] for k in g_opt},))
    c_opt = dot64(g, jmd)

    with torch.no_grad():
        base_sim = float(task.loss(sim_step(params)).to(torch.float64))
        meas_seq = float(task.loss(seq_step(params)).to(torch.float64)) - base_sim
        meas_gs = float("nan") if gs_step is None else float(task.loss(gs_step(params)).to(
            torch.float64)) - base_sim
    meas_plain = one_step_gap(task, params, pattern, lr)
    meas_plain_8 = one_step_gap(task, params, pattern, lr / 8)
    return {"lr": float(lr), "C_S": c_s, "C_opt": c_opt, "est_plain": lr * lr * c_s, "est": lr * lr
            * c_opt,
            "meas_seq": meas_seq, "meas_gs": meas_gs, "meas_plain": meas_plain,
            "meas_plain_8": meas_plain_8}
