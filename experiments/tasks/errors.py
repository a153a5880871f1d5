"""User-facing error types of ``experiments`` (printed as one line, exit code 2):
:mod:`crosscurv.theory.errors`."""

from crosscurv.theory.errors import DataError

__all__ = ["DataError"]
