"""The trajectory runner: one loop over the iterations of a run, with one checkpoint, resume,
extension, settings comparison and records file for every kind of run (``crosscurv run``'s protocol,
``crosscurv advise``).

* :mod:`.settings`: the options shared by the runs (:class:`RunOptions`), the settings a run
  records and their comparison on resume (:class:`SettingsChangedError`);
* :mod:`.folder`: the run folder, its checkpoint and the checkpoint cadence;
* :mod:`.runner`: the loop (:class:`Run`), which hands each iteration's record to the observers.
"""

from .folder import CHECKPOINT_SECONDS, Cadence, RunFolder
from .runner import (UNDEFINED, Diverged, Outcome, RecordsKind, Run, diverged_outside_domain,
                     outside_domain, raised_text)
from .settings import (RunOptions, SettingsChangedError, check_resume_settings, first_difference,
                       jsonable, run_settings, theta_digest, with_threads)

__all__ = [
    "CHECKPOINT_SECONDS",
    "Cadence",
    "RunFolder",
    "Diverged",
    "diverged_outside_domain",
    "UNDEFINED",
    "outside_domain",
    "raised_text",
    "Outcome",
    "RecordsKind",
    "Run",
    "RunOptions",
    "SettingsChangedError",
    "check_resume_settings",
    "first_difference",
    "jsonable",
    "run_settings",
    "theta_digest",
    "with_threads",
]
