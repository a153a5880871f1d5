"""Step identification: which block scheme does a user's step function perform?

Given a :class:`crosscurv.numeric.Task` and a user function ``step(params, lr) -> new
params``, run it from a few seeded states and step sizes ``eta_k = eta0 *
2^-k`` and compare it with the exact steps of :mod:`crosscurv.numeric.steps`
(Definitions 1 and 2 of the paper): JC, full GS in every block order
(``N <= 4``; else the declared order only), the declared pattern, and the
pattern inferred from the step's own second-order term.  A step *matches* a
candidate only when it agrees to round-off at every state and every ``eta``
-- agreeing to ``O(eta^2)`` is not agreeing: by Lemma 1 every scheme agrees
with JC to first order and differs from it at order 2 (``theta^{k+1} = theta
- eta g + eta^2 M_S g + O(eta^3)``).  Otherwise the report names the nearest
candidate and the observed order of the difference in ``eta``
(:func:`crosscurv.numeric.orders.observe_order`).  This is what ``crosscurv
validate-step`` runs.

Everything here runs in float64 on the task's device.  Bad input (a step
returning other names, shapes or dtypes, non-finite values) raises
:class:`ValidationInputError` with one line naming the problem.

Modules: :mod:`.inputs` (the step and the checks of what it returns), :mod:`.factory` (what a
factory may return), :mod:`.numpy_step` (a step in NumPy), :mod:`.states` (the seeded states and
the default ``eta0``), :mod:`.candidates` (the reference schemes and the observed order of each
difference), :mod:`.factors` and :mod:`.freshness` (the fits of the first- and second-order
terms), :mod:`.report` (the verdict in words), :mod:`.identify` (the driver).  Curvature products
for models without double backward: :class:`crosscurv.numeric.hvp_differences.CurvatureRoute`.
"""

from __future__ import annotations

from __future__ import annotations

from .candidates import Candidate, CandidateResult, candidate_patterns
from .factors import StepFactors, infer_step_factors
from .factory import as_user_step
from .freshness import FreshnessFit, freshness_fit
from .identify import identify_step
from .inputs import UserStep, ValidationInputError, check_step_output
from .numpy_step import numpy_user_step
from .report import StepReport
from .states import default_eta0, seeded_optimizer_states, seeded_states

__all__ = ["ValidationInputError", "UserStep", "as_user_step", "numpy_user_step",
           "check_step_output", "seeded_states", "seeded_optimizer_states", "default_eta0",
           "Candidate", "candidate_patterns", "FreshnessFit", "freshness_fit", "StepFactors",
           "infer_step_factors", "CandidateResult", "StepReport", "identify_step"]
