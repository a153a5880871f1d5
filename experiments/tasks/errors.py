"""User-facing error types of ``experiments`` (printed as one line, exit code 2)."""

from crosscurv.theory.errors import InputError


class DataError(InputError):
    """Data or model weights are missing or malformed (a local path that does not exist...),
    or the library that builds the model cannot be imported."""
