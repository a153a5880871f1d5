"""Sweeps: grids of ``crosscurv run`` runs executed as Ray tasks, and their aggregate.

:mod:`.spec` (the grid), :mod:`.grid` (named runs), :mod:`.state` (start, resume or reuse),
:mod:`.worker` (one run in a Ray task), :mod:`.ray_backend`, :mod:`.aggregate` and :mod:`.figures`
(``sweep.csv``, ``sweep.md``), :mod:`.runner` (:func:`run_sweep`). Ray is imported only to run.
"""

from crosscurv.experiments.sweep.grid import RunPoint, expand
from crosscurv.experiments.sweep.runner import SWEEP_FAILED_EXIT_CODE, SweepResult, run_sweep
from crosscurv.experiments.sweep.spec import (SweepError, SweepSpec, spec_from_mapping,
                                              spec_from_toml)

__all__ = ["SweepSpec", "SweepError", "spec_from_toml", "spec_from_mapping", "RunPoint", "expand",
           "run_sweep", "SweepResult", "SWEEP_FAILED_EXIT_CODE"]
