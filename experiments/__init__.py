"""Experiments, data, presets, CLI and report writers of crosscurv (imports theory and numeric).

Nothing is re-exported here, so that ``crosscurv derive`` starts without
importing torch; the pieces a user reaches for are ``experiments.tasks`` (the
built-in tasks), ``experiments.loading.load_task`` (``TASK`` specs),
``experiments.problems`` and ``experiments.scaling`` (the error-scaling
study), ``experiments.golden`` (conformance cases) and ``experiments.cli``.
"""

__all__: list[str] = []
