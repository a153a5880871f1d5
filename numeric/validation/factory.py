"""The factory contract of ``crosscurv validate-step``: what a factory returns, as a
:class:`~.inputs.UserStep`."""

from __future__ import annotations

from typing import Mapping

import torch

from ..task import Task
from .inputs import UserStep, ValidationInputError, declared_pattern
from .numpy_step import numpy_user_step

__all__ = ["as_user_step"]


def as_user_step(obj, name: str = "step", pattern=None) -> UserStep:
    """Normalise what a factory returned into a :class:`UserStep`.

    Accepted forms (the factory contract):

    * a tuple/list ``(task, step)`` or ``(task, step, pattern)``;
    * a mapping with keys ``"task"``, ``"step"`` and optionally ``"pattern"``;
    * any object with attributes ``.task`` and ``.step`` (and optionally
      ``.pattern``), e.g. a dataclass or a :class:`UserStep`;
    * a mapping of NumPy callables with keys ``"params"``, ``"loss"``, ``"grad"``, ``"step"`` and
      optionally ``"blocks"``, ``"pattern"`` (:func:`numpy_user_step`).

    ``pattern`` may be a CLI spec (``"gs:B,A"``, ``"2<-1"``) or a
    :class:`DelayPattern`; the argument ``pattern`` (e.g. ``--pattern``)
    overrides the factory's declaration.

    Raises:
        ValidationInputError: anything else, a task that is not a
            :class:`crosscurv.numeric.Task`, a step that is not callable, or a task whose
            parameters are not float64.
    """
    declared = None
    numpy_keys = ("params", "loss", "grad", "step")
    if isinstance(obj, Mapping) and "task" not in obj and all(k in obj for k in numpy_keys):
        given = {k: obj[k] for k in numpy_keys + ("blocks",) if k in obj}
        declared = pattern if pattern is not None else obj.get("pattern")
        return numpy_user_step(**given, name=name, pattern=declared)
    if isinstance(obj, (tuple, list)):
        if len(obj) not in (2, 3):
            raise ValidationInputError(
                f"factory returned a {type(obj).__name__} of length {len(obj)}; expected (task, "
                "step) or (task, step, pattern)"
            )
        task, step = obj[0], obj[1]
        declared = obj[2] if len(obj) == 3 else None
    elif isinstance(obj, Mapping):
        if "task" not in obj or "step" not in obj:
            raise ValidationInputError(
                "factory returned a mapping without 'task' and 'step' keys (keys: "
                f"{sorted(map(str, obj))})"
            )
        task, step, declared = obj["task"], obj["step"], obj.get("pattern")
    elif hasattr(obj, "task") and hasattr(obj, "step"):
        task, step, declared = obj.task, obj.step, getattr(obj, "pattern", None)
    else:
        raise ValidationInputError(
            f"factory returned {type(obj).__name__}; expected (task, step), (task, step, pattern) "
            "or an object with .task and .step"
        )
    if not isinstance(task, Task):
        raise ValidationInputError(
            f"factory's task is a {type(task).__name__}, not a crosscurv.numeric.Task"
        )
    if not callable(step):
        raise ValidationInputError(
            f"factory's step is a {type(step).__name__}, not callable as step(params, lr)"
        )
    if task.dtype != torch.float64:
        raise ValidationInputError(
            f"task {task.name!r} has {str(task.dtype).replace('torch.', '')} parameters; step "
            "validation runs in float64 (build the task's parameters and data in float64)"
        )
    task.check_loss()
    if pattern is not None:
        declared = pattern
    return UserStep(task, step, declared_pattern(task, declared), name)
