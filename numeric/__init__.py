"""Numeric half of crosscurv: the paper's quantities by torch autograd (HVPs, never a dense Hessian)."""

from .task import Task, TaskError, partition_by_rule, task_from_module

__all__ = ["Task", "TaskError", "partition_by_rule", "task_from_module"]

# engine: HVPs, exact steps, block-masked curvature, one-step estimates, device
from .hvp import HVP_METHODS, HVPError, block_grad, grad, hvp, hvp_batch, resolve_method
from .steps import StepError, gauss_seidel_step, jacobi_step, scheme_step, scheme_step_with_grads
from .curvature import CrossCurvature, cross_curvature_table, masked_product, masked_products
from .third import third_derivative
from .one_step import one_step_coefficients, one_step_estimate, one_step_gap
from .device import DeviceError, resolve_device, resolve_dtype

__all__ += [
    "HVP_METHODS", "HVPError", "block_grad", "grad", "hvp", "hvp_batch", "resolve_method",
    "StepError", "gauss_seidel_step", "jacobi_step", "scheme_step", "scheme_step_with_grads",
    "CrossCurvature", "cross_curvature_table", "masked_product", "masked_products",
    "third_derivative", "one_step_coefficients", "one_step_estimate", "one_step_gap",
    "DeviceError", "resolve_device", "resolve_dtype",
]

# trajectories: estimates (Theorems 2-3, JC-only, bound), the controlled protocol, records, metrics
from .estimates import EstimateState, bound_bk, propagate, quadratic_estimate, recursive_estimate
from .protocol import ProtocolError, ProtocolResult, ResumeError, run_protocol
from .records import FIELDS, ESTIMATES, RecordsError, read_records
from .metrics import Metrics, evaluate, winner, winner_metrics

__all__ += [
    "EstimateState", "bound_bk", "propagate", "quadratic_estimate", "recursive_estimate",
    "ProtocolError", "ProtocolResult", "ResumeError", "run_protocol",
    "FIELDS", "ESTIMATES", "RecordsError", "read_records",
    "Metrics", "evaluate", "winner", "winner_metrics",
]

from .hvp import grad_and_hvp, tune_hvp

__all__ += ["grad_and_hvp", "tune_hvp"]

from .point import PointCurvature, masked_product_at

__all__ += ["PointCurvature", "masked_product_at"]
