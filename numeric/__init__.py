"""Numeric half of crosscurv: the paper's quantities by torch autograd (HVPs, never a dense Hessian).

The public surface, by what a user asks (every other function lives in the
module named after its concept, e.g. :func:`crosscurv.numeric.hvp.hvp_batch`,
:mod:`crosscurv.numeric.estimates`, :mod:`crosscurv.numeric.point`):

* your model as a task: :class:`Task`, :func:`task_from_module`,
  :func:`partition_by_rule`; :class:`Chain` (a loss written stage by stage in
  block order, which makes scheme steps cheaper);
* quantities at a point: :func:`grad`, :func:`block_grad`, :func:`hvp`,
  :func:`cross_curvature_table` (``c_ij``, ``C_S``, ``C_cross``),
  :func:`masked_product` (``M_S v``), :func:`one_step_estimate`,
  :func:`one_step_gap`;
* exact steps: :func:`scheme_step`, :func:`jacobi_step`, :func:`gauss_seidel_step`;
* trajectories: :func:`run_protocol` (records, :data:`FIELDS`),
  :func:`read_records`, :func:`winner_metrics`;
* checking your own code: :func:`identify_step` (with :func:`as_user_step`),
  :func:`step_from_training_code` (an ``nn.Module`` and a ``torch.optim``
  training step as a step), :func:`compare_records`;
* errors: every one is a :class:`crosscurv.theory.errors.InputError` (one line, exit
  code 2 on the command line); those a caller of this surface may catch are
  :class:`TaskError`, :class:`RecordsError` and :class:`ProtocolError`
  (patterns raise :class:`crosscurv.theory.PatternError`).

Every function that takes a pattern takes a :class:`crosscurv.theory.DelayPattern` or
its command-line spelling (``"gs"``, ``"gs:3,1,2"``, ``"2<-1"``...).
"""

from .task import Task, TaskError, partition_by_rule, task_from_module
from .chain import Chain
from .hvp import block_grad, grad, hvp
from .curvature import CrossCurvature, cross_curvature_table, masked_product
from .one_step import one_step_estimate, one_step_gap
from .steps import gauss_seidel_step, jacobi_step, scheme_step
from .protocol import ProtocolError, ProtocolResult, run_protocol
from .records import FIELDS, RecordsError, read_records
from .metrics import winner_metrics
from .step_identification import as_user_step, identify_step
from .training_step import step_from_training_code
from .record_comparison import compare_records

__all__ = [
    "Task", "Chain", "task_from_module", "partition_by_rule",
    "grad", "block_grad", "hvp", "cross_curvature_table", "CrossCurvature", "masked_product",
    "one_step_estimate", "one_step_gap",
    "scheme_step", "jacobi_step", "gauss_seidel_step",
    "run_protocol", "ProtocolResult", "FIELDS", "read_records", "winner_metrics",
    "identify_step", "as_user_step", "step_from_training_code", "compare_records",
    "TaskError", "RecordsError", "ProtocolError",
]
