"""Block-separable optimizers: specs, state, the update rules and the scheme step (beyond the paper).

Block ``i`` moves by ``-eta_i phi_i(g_i, s_i)`` with ``eta_i = lr * f_i`` (the
factors of ``--block-lr NAME=FACTOR,...``, unnamed blocks 1) and its state
``s_i`` updated from the same gradient (:mod:`crosscurv.theory.optimizers` for the
symbolic side).  The update rules reproduce ``torch.optim`` operation by
operation (single-tensor path, no weight decay), one module per optimizer:

* :mod:`.sgd`: ``theta - eta_i g`` (exactly the plain step of :mod:`crosscurv.numeric.steps`);
* :mod:`.momentum`: ``momentum:BETA`` (``torch.optim.SGD(momentum=BETA)``);
* :mod:`.adam`: ``adam[:B1,B2,EPS]`` (``torch.optim.Adam``).

A new optimizer is a new module with the names of :mod:`.sgd` and one entry in
:data:`RULES` (:mod:`.rules`).  The rest of the package: :mod:`.spec` (``--optimizer``),
:mod:`.blocks` (``--block-lr`` and :class:`OptimizerSetup`), :mod:`.state`
(:class:`OptimizerState`), :mod:`.scheme` (the scheme step, ``phi`` and ``J_phi``) and
:mod:`.functional` (:class:`FunctionalOptimizer`: the rules as maps on dicts of tensors, with
weight decay and per-tensor clipping, for training loops outside the protocol).
"""

from .blocks import OptimizerSetup, block_factors, optimizer_setup, param_lrs, parse_block_lr
from .functional import FunctionalOptimizer, clip_tensor, functional_optimizer
from .rules import RULES, STATE_BUFFERS
from .scheme import direction, direction_jacobian_apply, optimizer_scheme_step, optimizer_update
from .spec import ADAM_DEFAULTS, OptimizerError, OptimizerSpec, parse_optimizer
from .state import OptimizerState

#: The optimizers' names (:data:`RULES`).
OPTIMIZERS = tuple(RULES)

__all__ = [
    "OptimizerError",
    "OptimizerSpec",
    "ADAM_DEFAULTS",
    "OPTIMIZERS",
    "OptimizerState",
    "OptimizerSetup",
    "STATE_BUFFERS",
    "RULES",
    "optimizer_setup",
    "parse_optimizer",
    "parse_block_lr",
    "block_factors",
    "param_lrs",
    "optimizer_update",
    "optimizer_scheme_step",
    "direction",
    "direction_jacobian_apply",
    "FunctionalOptimizer",
    "functional_optimizer",
    "clip_tensor",
]
