"""The documented import path of step validation: :mod:`crosscurv.numeric.validation` re-exported.

``from crosscurv.numeric.step_identification import as_user_step, identify_step`` keeps working; the
code lives in the package :mod:`crosscurv.numeric.validation` and, for the curvature products of
models without double backward, :mod:`crosscurv.numeric.hvp_differences`.
"""

from __future__ import annotations

from .hvp_differences import CurvatureRoute
from .validation import *  # noqa: F403
from .validation import __all__ as _validation_all

__all__ = list(_validation_all) + ["CurvatureRoute"]
