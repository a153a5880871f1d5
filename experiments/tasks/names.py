"""The names of the built-in tasks and of their presets, and the error for an unknown one, without
importing torch: a command checks a task name and ``--preset`` with them before it builds a task
(:mod:`crosscurv.experiments.tasks.builtin` defines the tasks, keyed by :data:`TASK_NAMES`, and what
each preset sets)."""

from __future__ import annotations

from crosscurv.theory.errors import UnknownTaskError

__all__ = ["TASK_NAMES", "PRESETS", "UnknownTaskError"]

#: The built-in tasks, in the order of :data:`crosscurv.experiments.tasks.builtin.TASKS`.
TASK_NAMES = ("mlp", "fl", "lora")

#: The presets every built-in task has: ``smoke``, ``default``, ``edge``, ``paper``.
PRESETS = ("smoke", "default", "edge", "paper")
