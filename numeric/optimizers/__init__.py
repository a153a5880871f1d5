"""Block-separable optimizers: specs, state, the update rules and the scheme step (beyond the
paper).

Block ``i`` moves by ``-eta_i phi_i(g_i, s_i)``, ``eta_i = lr * f_i`` (``--block-lr``), its state
updated from the same gradient; the rules reproduce ``torch.optim`` operation by operation, one
module per optimizer (:mod:`.sgd`, :mod:`.momentum`, :mod:`.adam`; a new one is a module with the
names of :mod:`.sgd` and an entry in :data:`RULES`).  :mod:`.spec` (``--optimizer``),
:mod:`.blocks` (``--block-lr``, :class:`OptimizerSetup`), :mod:`.state`, :mod:`.scheme` (the
scheme step, ``phi``, ``J_phi``), :mod:`.functional` (the rules as maps on dicts of tensors).
"""

from crosscurv.lazy import lazy_exports

#: public name -> the module of this package that defines it (imported on first use, so that
#: checking an
#: ``--optimizer`` spelling needs no torch)
_EXPORTS = {
    **dict.fromkeys(("OptimizerSetup", "block_factors", "optimizer_setup", "param_lrs",
                     "parse_block_lr"), "blocks"),
    **dict.fromkeys(("FunctionalOptimizer", "clip_tensor", "functional_optimizer"), "functional"),
    **dict.fromkeys(("OPTIMIZERS", "RULES", "STATE_BUFFERS"), "rules"),
    **dict.fromkeys(("direction", "direction_jacobian_apply", "optimizer_scheme_step",
                     "optimizer_update"), "scheme"),
    **dict.fromkeys(("ADAM_DEFAULTS", "OptimizerError", "OptimizerSpec", "parse_optimizer"),
                    "spec"),
    "OptimizerState": "state",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name,
                                               module in _EXPORTS.items()},
                                    submodules=True)
