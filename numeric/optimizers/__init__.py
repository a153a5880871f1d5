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

from crosscurv.lazy import lazy_exports

#: public name -> the module of this package that defines it (imported on first use, so that checking an
#: ``--optimizer`` spelling needs no torch)
_EXPORTS = {
    **dict.fromkeys(("OptimizerSetup", "block_factors", "optimizer_setup", "param_lrs", "parse_block_lr"), "blocks"),
    **dict.fromkeys(("FunctionalOptimizer", "clip_tensor", "functional_optimizer"), "functional"),
    **dict.fromkeys(("OPTIMIZERS", "RULES", "STATE_BUFFERS"), "rules"),
    **dict.fromkeys(("direction", "direction_jacobian_apply", "optimizer_scheme_step", "optimizer_update"), "scheme"),
    **dict.fromkeys(("ADAM_DEFAULTS", "OptimizerError", "OptimizerSpec", "parse_optimizer"), "spec"),
    "OptimizerState": "state",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()},
                                   submodules=True)
