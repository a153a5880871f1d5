"""Step identification: which block scheme does a user's step function perform?

A user's ``step(params, lr) -> new params`` is run from a few seeded states and step sizes
``eta_k = eta0 * 2^-k`` (float64, on the task's device) and compared with the exact steps of
:mod:`crosscurv.numeric.steps`: JC, full GS in every block order (``N <= 4``; else the declared
order), the declared pattern and the pattern inferred from the step's second-order term.  A step
*matches* a candidate only when it agrees to round-off at every state and ``eta`` (every scheme
agrees with JC to first order, Lemma 1); otherwise the report names the nearest candidate and the
observed order of the difference.  This is what ``crosscurv validate-step`` runs; bad input raises
:class:`ValidationInputError` with one line.

Modules: :mod:`.inputs` (the step and its checks), :mod:`.factory`, :mod:`.numpy_step`,
:mod:`.states` (seeded states, default ``eta0``), :mod:`.candidates` (the reference schemes),
:mod:`.factors` and :mod:`.freshness` (the first- and second-order fits), :mod:`.report` (the
verdict in words), :mod:`.identify` (the driver).
"""

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
