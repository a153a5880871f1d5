"""Numeric half of crosscurv: the paper's quantities by torch autograd (HVPs, never a dense
Hessian).

The public surface, by what a user asks (every other function lives in the module named after its
concept, e.g. :func:`crosscurv.numeric.hvp.hvp_batch`, :mod:`crosscurv.numeric.estimates`,
:mod:`crosscurv.numeric.point`):

* your model as a task: :class:`Task`, :func:`task_from_module`, :func:`partition_by_rule`;
  :class:`Chain` (a loss written stage by stage in block order, which makes scheme steps cheaper);
* quantities at a point: :func:`grad`, :func:`block_grad`, :func:`hvp`,
  :func:`cross_curvature_table` (``c_ij``, ``C_S``, ``C_cross``), :func:`masked_product` (``M_S
  v``), :func:`one_step_estimate`, :func:`one_step_gap`;
* exact steps: :func:`scheme_step`, :func:`jacobi_step`, :func:`gauss_seidel_step`;
* trajectories: :func:`run_protocol` (records, :data:`FIELDS`), :func:`read_records`,
  :func:`winner_metrics`;
* checking your own code: :func:`identify_step` (with :func:`as_user_step`),
  :func:`step_from_training_code` (an ``nn.Module`` and a ``torch.optim`` training step as a step),
  :func:`compare_records`;
* errors: every one is a :class:`crosscurv.theory.errors.InputError` (one line, exit code 2 on the
  command line); those a caller of this surface may catch are :class:`TaskError`,
  :class:`RecordsError` and :class:`ProtocolError` (patterns raise
  :class:`crosscurv.theory.PatternError`).

Every function that takes a pattern takes a :class:`crosscurv.theory.DelayPattern` or its
command-line spelling (``"gs"``, ``"gs:3,1,2"``, ``"2<-1"``...).
"""

from __future__ import annotations

from crosscurv.lazy import lazy_exports

#: public name -> the module of this package that defines it, imported on first use
#: (:mod:`crosscurv.lazy`), so that a module that needs no torch (:mod:`crosscurv.numeric.records`,
#: reading a run's files) does not import it through this package
_EXPORTS = {
    "Task": "task", "TaskError": "task", "partition_by_rule": "task", "task_from_module": "task",
    "Chain": "chain",
    "block_grad": "hvp", "grad": "hvp", "hvp": "hvp",
    "CrossCurvature": "curvature", "cross_curvature_table": "curvature",
    "masked_product": "curvature",
    "one_step_estimate": "one_step", "one_step_gap": "one_step",
    "gauss_seidel_step": "steps", "jacobi_step": "steps", "scheme_step": "steps",
    "ProtocolError": "protocol_checks", "ProtocolResult": "protocol", "run_protocol": "protocol",
    "RunOptions": "trajectory",
    "FIELDS": "records", "RecordsError": "records", "read_records": "records",
    "winner_metrics": "metrics",
    "as_user_step": "validation", "identify_step": "validation",
    "step_from_training_code": "training_step",
    "compare_records": "record_comparison",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name,
                                               module in _EXPORTS.items()},
                                    submodules=True)
