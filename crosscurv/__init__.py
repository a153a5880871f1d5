"""crosscurv: the reference verification suite for the cross-curvature theory of block-coordinate
updates (Jacobi, Gauss-Seidel and partially sequential schemes).

One import namespace, three layers (each in the repository folder of its name):

* :mod:`crosscurv.theory` -- delay patterns and the paper's expansions in SymPy
  (never imports torch);
* :mod:`crosscurv.numeric` -- the same quantities by torch autograd on a model
  (Hessian-vector products, never a dense Hessian);
* :mod:`crosscurv.experiments` -- the built-in tasks, studies, reports and the
  ``crosscurv`` command line.

The names a user reaches for are re-exported here and imported on first use, so ``import crosscurv``
is cheap and ``crosscurv derive`` never imports torch::

    import crosscurv
    task = crosscurv.build_task("mlp", "smoke")
    result = crosscurv.run_protocol(task, "gs", lr=0.01, iters=5)
"""

from __future__ import annotations

from crosscurv.lazy import lazy_exports

#: public name -> module that defines it (imported lazily, PEP 562)
_EXPORTS = {
    # delay patterns and the symbolic derivation
    **{name: "crosscurv.theory" for name in (
        "DelayPattern", "as_pattern", "parse_pattern", "jacobi", "gauss_seidel", "chain", "partial",
        "from_pairs", "derive", "DerivationResult", "BlockModel", "delay_curvature",
        "cross_curvature",
        "loss_series", "check_recursions", "check_cumulative", "gap_coefficients",
        "loss_coefficients",
        "InputError", "PatternError",
    )},
    # the numeric surface (crosscurv.numeric.__all__)
    **{name: "crosscurv.numeric" for name in (
        "Task", "Chain", "task_from_module", "partition_by_rule",
        "grad", "block_grad", "hvp", "cross_curvature_table", "CrossCurvature", "masked_product",
        "one_step_estimate", "one_step_gap", "scheme_step", "jacobi_step", "gauss_seidel_step",
        "run_protocol", "ProtocolResult", "FIELDS", "read_records", "winner_metrics",
        "identify_step", "as_user_step", "compare_records",
        "TaskError", "RecordsError", "ProtocolError",
    )},
    # the built-in tasks and TASK specs
    "build_task": "crosscurv.experiments.tasks",
    "load_task": "crosscurv.experiments.tasks.loading",
    # advise and the pattern search (a whole space of delay patterns from one JC run)
    "advise": "crosscurv.numeric.advice",
    "search_patterns": "crosscurv.numeric.pattern_search",
    "SearchResult": "crosscurv.numeric.pattern_search",
    "PatternSpace": "crosscurv.theory.pattern_spaces",
    "parse_space": "crosscurv.theory.pattern_spaces",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
