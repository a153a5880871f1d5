"""Every error crosscurv raises on purpose: a base and the few kinds a caller tells apart.

::

    InputError(ValueError)        bad input: a malformed pattern, task, file, setting or flag
    |-- RecordsError              a records or summary file missing, malformed or inconsistent
    `-- ResumeError               a run folder that cannot be resumed (nothing there, unreadable)
        `-- SettingsChangedError  ... because it holds a run with other settings or more iterations

The command line prints any of them as one line, ``crosscurv: error: ...``, and exits with code 2. A
caller that starts a run over catches :class:`SettingsChangedError` (``crosscurv report`` does); one
that treats an unreadable file as absent catches :class:`RecordsError`. A diverged run is no error:
it is a result (``status`` ``"diverged"``, exit code 3).

The other names are :class:`InputError` itself, kept where the public API exports them (the first
group) or where the modules that raise them still spell them (the second); ``except`` any of them
catches every input error.
"""

__all__ = ["InputError", "RecordsError", "ResumeError", "SettingsChangedError"]


class InputError(ValueError):
    """Bad user input: a malformed pattern, task, file or flag value (one line, exit code 2)."""


class RecordsError(InputError):
    """A records or summary file is missing, malformed, or inconsistent with a checkpoint."""


class ResumeError(InputError):
    """Nothing to resume, an unreadable run folder, or a checkpoint with different settings."""


class SettingsChangedError(ResumeError):
    """The run folder holds a run with other settings (or more iterations than asked for)."""


# -- names of the public API (crosscurv, .theory, .numeric, .numeric.optimizers)
PatternError = InputError
CoefficientInputError = InputError
ModelError = InputError
TaskError = InputError
ProtocolError = InputError
OptimizerError = InputError

# -- names the raising modules still spell
SpaceError = InputError
StepError = InputError
AdviceError = InputError
ValidationInputError = InputError
HVPError = InputError
DeviceError = InputError
MotivationError = InputError
DataError = InputError
UnknownTaskError = InputError
SweepError = InputError
RunDescriptionError = InputError
GoldenError = InputError
ReportCheckError = InputError
