"""Error-scaling studies: observed orders of the paper's remainders (Taylor tests), one concept per
module.

:mod:`.study` (the :class:`Study` type), :mod:`.loss_gap` (loss differences without cancellation),
:mod:`.studies` (float64), :mod:`.exact_mp` (exact ``mpmath``), :mod:`.suite` (what ``crosscurv
scaling`` runs), :mod:`.markdown` and :mod:`.figures` (``scaling.md``). ``eta0`` is the largest
power of two with ``eta0 * lam <= factor`` (:func:`crosscurv.experiments.problems.curvature_scale`).
"""

from .exact_mp import one_step_study_mp, protocol_mp
from .loss_gap import GAP_NODES, loss_gap, rounding_scale
from .markdown import render_markdown
from .studies import (one_step_study, order_invariance_study, predicted_coefficients,
                      trajectory_studies)
from .study import (EXPECTED, FLOOR_ULPS, N_POINTS, NO_WINDOW, TOLERANCE, Study, eta_grid,
                    make_study, roundoff_floor)
from .suite import OFFICIAL, PROBLEMS, ProblemResult, scaling_suite

__all__ = [
    "FLOOR_ULPS",
    "N_POINTS",
    "TOLERANCE",
    "NO_WINDOW",
    "EXPECTED",
    "Study",
    "make_study",
    "eta_grid",
    "roundoff_floor",
    "predicted_coefficients",
    "one_step_study",
    "trajectory_studies",
    "order_invariance_study",
    "one_step_study_mp",
    "protocol_mp",
    "loss_gap",
    "rounding_scale",
    "GAP_NODES",
    "OFFICIAL",
    "PROBLEMS",
    "ProblemResult",
    "scaling_suite",
    "render_markdown",
]
