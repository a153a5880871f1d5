"""Intra-op threads of the Python API: the command line's default, one thread.

The entry points that compute trajectories or curvature take a keyword ``threads`` and compute with
that many intra-op threads for the call (:func:`computes_with_threads`). ``threads=None`` is, in
order: the count already in force (inside another such call, or where :func:`caller_chooses`: the
``crosscurv`` command, the benchmarks); ``OMP_NUM_THREADS``; :data:`DEFAULT_THREADS` (1). So a
script and ``crosscurv run`` write the same float32 records.
"""

from __future__ import annotations

import functools
import inspect
import os

__all__ = ["DEFAULT_THREADS", "default_threads", "computes_with_threads", "caller_chooses"]

#: Intra-op threads when nothing else decides (the command line's default).
DEFAULT_THREADS = 1

_depth = 0  # calls of decorated entry points in progress
_chosen = False  # the program chooses the count of this process itself


def caller_chooses(chooses: bool = True) -> None:
    """The calling program chooses torch's intra-op thread count itself (``torch.set_num_threads``;
    the ``crosscurv`` command, a benchmark): API calls with ``threads=None`` keep the count in force
    (``False``: they apply the default again)."""
    global _chosen
    _chosen = bool(chooses)


def default_threads() -> int:
    """``OMP_NUM_THREADS`` when it holds an integer >= 1, else :data:`DEFAULT_THREADS`."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return DEFAULT_THREADS
    return n if n >= 1 else DEFAULT_THREADS


def _check(threads) -> int:
    from .protocol_checks import ProtocolError

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ProtocolError(f"threads must be an integer >= 1 or None, got {threads!r}")
    return threads


def computes_with_threads(fn):
    """Give ``fn`` a keyword ``threads`` (module docstring): the intra-op thread count of a call."""
    sig = inspect.signature(fn)
    param = inspect.Parameter("threads", inspect.Parameter.KEYWORD_ONLY, default=None)
    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))

    @functools.wraps(fn)
    def call(*args, threads: int | None = None, **kwargs):
        global _depth
        if threads is None and (_depth or _chosen):
            n = None  # keep the count in force
        else:
            n = default_threads() if threads is None else _check(threads)
        import torch

        before = torch.get_num_threads()
        if n is not None and n != before:
            torch.set_num_threads(n)
        _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth -= 1
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)

    call.__signature__ = sig.replace(parameters=params[:at] + [param] + params[at:])
    return call
