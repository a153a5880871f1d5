"""The protocol's checks of its scalar inputs and the error they raise, without importing torch.

A command line or a run description checks ``--lr`` and ``--iters`` with these before it builds a
task, so bad input is answered in one line in a fraction of the seconds torch takes to import;
:func:`crosscurv.numeric.protocol.run_protocol` applies the same checks (and re-exports them).
"""

from __future__ import annotations

import math

from crosscurv.theory.errors import ProtocolError

__all__ = ["ProtocolError", "check_lr", "check_iters"]


def check_lr(lr) -> float:
    """``lr`` as a float; a :class:`ProtocolError` unless it is a finite number > 0."""
    try:
        val = float(lr)
    except (TypeError, ValueError):
        raise ProtocolError(f"learning rate must be a number, got {lr!r}") from None
    if not math.isfinite(val) or val <= 0:
        raise ProtocolError(f"learning rate must be a finite number > 0, got {val}")
    return val


def check_iters(iters) -> int:
    """``iters`` itself; a :class:`ProtocolError` unless it is an integer >= 1."""
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ProtocolError(f"iterations must be an integer >= 1, got {iters!r}")
    return iters
