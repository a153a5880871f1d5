"""Sweeps: grids of ``crosscurv run`` runs executed as Ray tasks, and their aggregate.

* :mod:`~crosscurv.experiments.sweep.spec`: the grid (command line or TOML file);
* :mod:`~crosscurv.experiments.sweep.grid`: its expansion into named runs;
* :mod:`~crosscurv.experiments.sweep.state`: start, resume or reuse a run folder;
* :mod:`~crosscurv.experiments.sweep.worker`: one run in a Ray task (:func:`crosscurv.experiments.runs.run`);
* :mod:`~crosscurv.experiments.sweep.ray_backend`: Ray start-up and task submission;
* :mod:`~crosscurv.experiments.sweep.aggregate`, :mod:`~crosscurv.experiments.sweep.figures`:
  ``sweep.csv``, ``sweep.md`` and the agreement figure;
* :mod:`~crosscurv.experiments.sweep.runner`: :func:`run_sweep`, all of it.

Ray is imported only when runs are executed.
"""

from crosscurv.experiments.sweep.grid import RunPoint, expand
from crosscurv.experiments.sweep.runner import SWEEP_FAILED_EXIT_CODE, SweepResult, run_sweep
from crosscurv.experiments.sweep.spec import SweepError, SweepSpec, spec_from_mapping, spec_from_toml

__all__ = ["SweepSpec", "SweepError", "spec_from_toml", "spec_from_mapping", "RunPoint", "expand", "run_sweep",
           "SweepResult", "SWEEP_FAILED_EXIT_CODE"]
