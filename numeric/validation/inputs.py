"""The inputs of step validation: a user's step and the checks of what it returns.

A step is ``step(params, lr) -> new params`` on dicts of float64 tensors keyed like the task's
parameters (``step(params, lr, state)`` with an optimizer state).  Bad input raises
:class:`ValidationInputError` with one line naming the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from crosscurv.theory.errors import InputError, ValidationInputError
from crosscurv.theory.patterns import DelayPattern, as_pattern

from .. import tree
from ..task import Task

__all__ = ["ValidationInputError", "UserStep", "declared_pattern", "check_step_output", "call_step"]


@dataclass
class UserStep:
    """What a ``validate-step`` factory provides.

    Attributes:
        task: the :class:`crosscurv.numeric.Task` the step acts on (float64).
        step: ``step(params, lr) -> new params``; ``params`` is a dict of
            float64 tensors keyed like ``task.params`` (a fresh copy: the step
            may modify it in place), ``lr`` a Python float; the result must be
            a dict with the same names, shapes, dtype and device.
        pattern: the declared delay pattern (``DelayPattern``), or ``None``.
        name: a label for reports.
    """

    task: Task
    step: Callable
    pattern: DelayPattern | None = None
    name: str = "step"


def declared_pattern(task: Task, spec) -> DelayPattern | None:
    if spec is None:
        return None
    return as_pattern(spec, task.n_blocks, task.block_names)


def check_step_output(out, params: Mapping, lr: float, where: str = "step") -> dict:
    """A detached copy of a step's result, checked against the input ``params`` (training
    code often returns tensors that alias the model's parameters).  Raises
    :class:`ValidationInputError`: not a mapping, other names, a non-tensor, other shapes, dtypes or
    device, or non-finite values.
    """
    if not isinstance(out, Mapping):
        raise ValidationInputError(
            f"{where}(params, lr) must return a dict of tensors, got {type(out).__name__}"
        )
    missing = [k for k in params if k not in out]
    extra = [str(k) for k in out if k not in params]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(extra))
        raise ValidationInputError(
            f"{where}(params, lr) returned different names: " + "; ".join(parts)
        )
    res = {}
    for k, p in params.items():
        v = out[k]
        if not isinstance(v, torch.Tensor):
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} as {type(v).__name__}, not a tensor"
            )
        if tuple(v.shape) != tuple(p.shape):
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} with shape {tuple(v.shape)}, the parameter "
                f"has {tuple(p.shape)}"
            )
        if v.dtype != p.dtype:
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} as {str(v.dtype).replace('torch.', '')}, "
                f"the parameter is {str(p.dtype).replace('torch.', '')}"
            )
        if v.device != p.device:
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} on {v.device}, the parameter is on {p.device}"
            )
        if not bool(torch.isfinite(v).all()):
            raise ValidationInputError(
                f"{where}(params, lr) returned non-finite values in {k!r} (lr={lr:.4g})"
            )
        res[k] = v.detach().clone()  # a copy: a step may return live parameters or views of them
    return res


def call_step(
    step: Callable, params: Mapping, lr: float, where: str = "step", opt_state=None
) -> dict:
    """``step(copy of params, lr)`` (``step(params, lr, state)`` with an optimizer state), checked
    and copied.

    With ``opt_state`` (an :class:`~crosscurv.numeric.optimizers.OptimizerState`) the step receives
    a fresh copy as a dict ``{"step": k, buffer name: {param: tensor}}`` (``torch.optim``'s buffer
    names, :data:`crosscurv.numeric.optimizers.STATE_BUFFERS`) and may return ``new_params`` or
    ``(new_params, new_state)``; the parameters are compared.
    """
    inp = tree.clone(params)
    try:
        if opt_state is None:
            out = step(inp, float(lr))
        else:
            st = opt_state.clone()
            out = step(inp, float(lr), {"step": st.step, **st.buffers})
            if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Mapping):
                out = out[0]
    except InputError:
        raise
    except Exception as exc:  # user code: report in one line
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise ValidationInputError(
            f"{where}(params, lr) raised {type(exc).__name__}: {msg}"
        ) from exc
    return check_step_output(out, params, lr, where)
