"""The numbers of an ``--optimizer`` spec (``momentum:BETA``, ``adam:B1,B2,EPS``):
:func:`spec_number`."""

from __future__ import annotations

import math

from crosscurv.theory.errors import OptimizerError

__all__ = ["spec_number"]


def spec_number(text: str, what: str, spec: str) -> float:
    """``float(text)``, finite; :class:`OptimizerError` naming ``what`` in ``spec`` otherwise."""
    try:
        x = float(text)
    except ValueError:
        raise OptimizerError(
            f"{what} in optimizer {spec!r} must be a number, got {text.strip()!r}"
        ) from None
    if not math.isfinite(x):
        raise OptimizerError(f"{what} in optimizer {spec!r} must be finite, got {text.strip()!r}")
    return x
