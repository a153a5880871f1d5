"""Base class of every user-facing input error in crosscurv.

The CLI prints an ``InputError`` as one line and exits with code 2; every
package raises a subclass (``PatternError``, ``TaskError``, ``DataError``...).
"""


class InputError(ValueError):
    """Bad user input: a malformed pattern, task, file or flag value."""


class OptimizerError(InputError):
    """A bad ``--optimizer`` or ``--block-lr`` spec, or a state that does not fit."""
