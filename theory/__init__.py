"""Symbolic half of crosscurv: delay patterns and the paper's expansions (SymPy).

Importing ``theory`` never imports torch.
"""

from .patterns import (
    DelayPattern,
    PatternError,
    chain,
    from_pairs,
    gauss_seidel,
    jacobi,
    parse_pattern,
    partial,
)
from .block_model import BlockModel, ModelError, block_model
from .series import EPS, ETA, SeriesSpace, TruncatedSeries
from .one_step import (
    CoefficientInputError,
    OneStepUpdate,
    cross_curvature,
    delay_curvature,
    eta3_gap_closed_form,
    gap_coefficients,
    lemma1_coefficients,
    loss_coefficients,
    loss_series,
    one_step_update,
)
from .recursion import RecursionCheck, check_recursions, recursion_model
from .cumulative import CumulativeCheck, check_cumulative, quadratic_model
from .lambdified import exact_value, numeric_function
from .derivation import DerivationResult, derive

__all__ = [
    "DelayPattern",
    "PatternError",
    "chain",
    "from_pairs",
    "gauss_seidel",
    "jacobi",
    "parse_pattern",
    "partial",
    "BlockModel",
    "ModelError",
    "block_model",
    "ETA",
    "EPS",
    "SeriesSpace",
    "TruncatedSeries",
    "CoefficientInputError",
    "OneStepUpdate",
    "cross_curvature",
    "delay_curvature",
    "eta3_gap_closed_form",
    "gap_coefficients",
    "lemma1_coefficients",
    "loss_coefficients",
    "loss_series",
    "one_step_update",
    "RecursionCheck",
    "check_recursions",
    "recursion_model",
    "CumulativeCheck",
    "check_cumulative",
    "quadratic_model",
    "exact_value",
    "numeric_function",
    "DerivationResult",
    "derive",
]
