"""Block-separable optimizers as symbolic direction maps (beyond the paper).

Block ``i`` moves by ``-eta f_i phi_i(g_i, s_i)`` (``f_i`` its step-size factor, ``s_i`` its
optimizer state, ``phi_i`` smooth in the gradient); the scheme ``S`` evaluates ``g~_i`` where
exactly the blocks of ``S(i)`` hold their new values; both runs start from the same state.

Kinds (``torch.optim`` conventions), one module each (:data:`KINDS`): :mod:`.sgd` (``phi = g``),
:mod:`.preconditioner` (``phi_i = P_i g_i``), :mod:`.momentum` (``phi(g, m) = beta m + g``),
:mod:`.generic` (``phi_a(g + e) = p_a + J_ab e_b + 1/2 K_abc e_b e_c + O(e^3)``, exact through
``eta^3``) and :mod:`.adam` (not polynomial: plain SymPy expressions).  The checks:
:mod:`.one_step` (Theorem 1), :mod:`.recursion` (Lemma 3, Theorem 2), :mod:`.cumulative`
(Theorem 3), :mod:`.derivation` (``crosscurv derive --optimizers``).  Importing this package never
imports torch.
"""

from .adam import adam_direction, adam_jacobian
from .kinds import KINDS, OPTIMIZER_KINDS
from .model import OptimizerModel, optimizer_model
from .cumulative import OptimizerCumulativeCheck, check_optimizer_cumulative
from .one_step import (AdamOneStepCheck, OptimizerOneStepCheck, check_adam_one_step,
                       check_optimizer_one_step, instance_delay_curvature,
                       optimizer_delay_curvature, optimizer_gap_series)
from .recursion import (OptimizerRecursionCheck, buffer_allowed, check_optimizer_recursions,
                        optimizer_recursion_model)
from .derivation import (ADAM_BLOCKS, OPTIMIZER_TEXT, OptimizerDerivation, derive_optimizers,
                         render_optimizer_markdown, render_optimizer_summary)

__all__ = ["OPTIMIZER_KINDS", "KINDS", "OptimizerModel", "optimizer_model", "adam_direction",
           "adam_jacobian", "OptimizerOneStepCheck", "optimizer_gap_series",
           "optimizer_delay_curvature", "instance_delay_curvature", "check_optimizer_one_step",
           "AdamOneStepCheck", "check_adam_one_step", "OptimizerRecursionCheck", "buffer_allowed",
           "check_optimizer_recursions", "optimizer_recursion_model", "OptimizerCumulativeCheck",
           "check_optimizer_cumulative", "OPTIMIZER_TEXT", "ADAM_BLOCKS", "OptimizerDerivation",
           "derive_optimizers", "render_optimizer_markdown", "render_optimizer_summary"]
