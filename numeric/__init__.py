"""Numeric half of crosscurv: the paper's quantities by torch autograd (HVPs, never a dense Hessian)."""

from .task import Task, TaskError, partition_by_rule, task_from_module

__all__ = ["Task", "TaskError", "partition_by_rule", "task_from_module"]
