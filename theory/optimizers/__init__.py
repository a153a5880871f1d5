"""Block-separable optimizers as symbolic direction maps (beyond the paper).

A block-separable optimizer moves block ``i`` by ``-eta f_i phi_i(g_i, s_i)``:
``eta`` is the base step size, ``f_i`` the block's step-size factor (so
``eta_i = eta f_i``), ``s_i`` the block's optimizer state and ``phi_i`` a map
smooth in the gradient.  The scheme ``S`` evaluates block ``i``'s gradient
``g~_i`` where exactly the blocks of ``S(i)`` hold their new values, moves by
``-eta f_i phi_i(g~_i, s_i)`` and updates the block's state with ``g~_i``;
JC uses ``g_i`` at the common iterate.  Both start from the same state.

Kinds (conventions of ``torch.optim``), one module each (:data:`KINDS`; a new kind is a new module
with the names of :mod:`.sgd`):

* :mod:`.sgd`: ``phi(g) = g`` (per-block step sizes through ``f_i``);
* :mod:`.preconditioner`: ``phi_i(g_i) = P_i g_i`` with a fixed block ``P_i``
  (generic entries, not assumed symmetric);
* :mod:`.momentum` (heavy ball, ``torch.optim.SGD(momentum=beta)``, dampening 0,
  no Nesterov): buffer ``m' = beta m + g``, ``phi(g, m) = beta m + g``;
* :mod:`.generic`: ``phi_a(g + e) = p_a + sum_b J_ab e_b + 1/2 sum_bc K_abc e_b e_c
  + O(e^3)`` with generic symbols ``p`` (= ``phi(g)``), ``J`` (the
  block-diagonal Jacobian of ``phi`` in the gradient, not symmetric) and
  ``K``; the truncation is exact for every loss coefficient through
  ``eta^3`` because ``e = g~ - g = O(eta)`` enters the step multiplied by
  ``eta``;
* :mod:`.adam` (``torch.optim.Adam``, bias-corrected): not polynomial in the
  gradient, so it is handled with plain SymPy expressions
  (:func:`adam_direction`, :func:`adam_jacobian`); the other instances are
  ring elements of the :class:`~crosscurv.theory.block_model.BlockModel`'s ring.

The checks of the paper's statements for these maps: :mod:`.one_step` (Theorem 1), :mod:`.recursion`
(Lemma 3, Theorem 2), :mod:`.cumulative` (Theorem 3) and :mod:`.derivation` (all of them, for
``crosscurv derive --optimizers``); :mod:`.model` holds :class:`OptimizerModel`.

Importing this package never imports torch.
"""

from .adam import adam_direction, adam_jacobian
from .kinds import KINDS, OPTIMIZER_KINDS
from .model import OptimizerModel, optimizer_model
from .cumulative import OptimizerCumulativeCheck, check_optimizer_cumulative
from .one_step import (AdamOneStepCheck, OptimizerOneStepCheck, check_adam_one_step, check_optimizer_one_step,
                       instance_delay_curvature, optimizer_delay_curvature, optimizer_gap_series)
from .recursion import OptimizerRecursionCheck, buffer_allowed, check_optimizer_recursions, optimizer_recursion_model
from .derivation import (ADAM_BLOCKS, OPTIMIZER_TEXT, OptimizerDerivation, derive_optimizers, render_optimizer_markdown,
                         render_optimizer_summary)

__all__ = [
    "OPTIMIZER_KINDS",
    "KINDS",
    "OptimizerModel",
    "optimizer_model",
    "adam_direction",
    "adam_jacobian",
    "OptimizerOneStepCheck",
    "optimizer_gap_series",
    "optimizer_delay_curvature",
    "instance_delay_curvature",
    "check_optimizer_one_step",
    "AdamOneStepCheck",
    "check_adam_one_step",
    "OptimizerRecursionCheck",
    "buffer_allowed",
    "check_optimizer_recursions",
    "optimizer_recursion_model",
    "OptimizerCumulativeCheck",
    "check_optimizer_cumulative",
    "OPTIMIZER_TEXT",
    "ADAM_BLOCKS",
    "OptimizerDerivation",
    "derive_optimizers",
    "render_optimizer_markdown",
    "render_optimizer_summary",
]
