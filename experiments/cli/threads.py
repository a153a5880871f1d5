"""How many intra-op threads a ``crosscurv`` command computes with, and why.

One thread unless told otherwise (float32 reductions depend on the count, so one thread gives the
same records on every machine). Precedence: ``--threads N|auto``
(:mod:`crosscurv.experiments.thread_count`); ``OMP_NUM_THREADS`` set before the command; a Python
caller's own ``torch.get_num_threads()``; else 1. :func:`choose_default` runs in
:func:`crosscurv.experiments.cli.main` before torch is imported, :func:`apply` sets ``--threads``,
:func:`describe` is the line ``crosscurv run`` prints and ``SOURCE`` what ``summary.json`` records.
"""

from __future__ import annotations

import os
import sys

__all__ = ["DEFAULT_THREADS", "MARKER", "SOURCE", "choose_default", "apply", "current", "describe"]

#: Intra-op threads when nothing else decides (the runs' default,
#: :data:`crosscurv.experiments.runs.DEFAULT_THREADS`).
from crosscurv.experiments.runs import DEFAULT_THREADS  # noqa: E402
#: Environment variable holding the ``OMP_NUM_THREADS`` value this module set itself.
MARKER = "CROSSCURV_DEFAULT_THREADS"

#: Why the current thread count was chosen: ``"default"``, ``"--threads"``, ``"OMP_NUM_THREADS"`` or
#: ``"caller"`` (a Python caller's torch setting).
SOURCE = "default"

_WHY = {
    "default": "the default: the same float32 records on every machine, no waiting on shared "
               "cores; set --threads or OMP_NUM_THREADS to change it",
    "--threads": "as asked by --threads",
    "--threads auto": "--threads auto: the fastest on this machine for this task's gradient, "
                      "measured at the start",
    "OMP_NUM_THREADS": "from OMP_NUM_THREADS",
    "caller": "the calling process's torch.set_num_threads",
}


def _users_omp() -> str | None:
    """``OMP_NUM_THREADS`` as the user set it (``None`` when unset or set by this module)."""
    value = os.environ.get("OMP_NUM_THREADS")
    if value is None or (os.environ.get(MARKER) == value):
        return None
    return value


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def choose_default() -> str:
    """Decide the thread count before a command runs (no torch import); returns :data:`SOURCE`."""
    global SOURCE
    from crosscurv.numeric.threads import caller_chooses

    caller_chooses()  # the command's API calls keep the count chosen here
    users = _users_omp()
    if users is not None and "torch" in sys.modules and sys.modules[
            "torch"].get_num_threads() != _int(users):
        SOURCE = "caller"  # the caller changed torch's count after OMP_NUM_THREADS was read
        return SOURCE
    if users is not None:
        SOURCE = "OMP_NUM_THREADS"
        os.environ.pop(MARKER, None)
        return SOURCE
    if "torch" in sys.modules and MARKER not in os.environ:
        SOURCE = "caller"
        return SOURCE
    SOURCE = "default"
    os.environ["OMP_NUM_THREADS"] = os.environ[MARKER] = str(DEFAULT_THREADS)
    if "torch" in sys.modules:  # a caller of main() that let this module decide before
        import torch

        torch.set_num_threads(DEFAULT_THREADS)
    return SOURCE


def apply(threads: int | None, source: str = "--threads") -> None:
    """``--threads N``: use ``N`` intra-op threads (``None``: keep :func:`choose_default`'s choice);
    ``source`` becomes :data:`SOURCE` (``"--threads auto"`` for a measured count)."""
    global SOURCE
    if threads is None:
        return
    import torch

    torch.set_num_threads(int(threads))
    SOURCE = source


def current() -> int:
    """The intra-op thread count torch uses now."""
    import torch

    return int(torch.get_num_threads())


def describe(n: int | None = None, source: str | None = None) -> str:
    """One line: ``1 intra-op thread (the default: ...)`` (default: the current count and
    :data:`SOURCE`)."""
    n = current() if n is None else int(n)
    source = SOURCE if source is None else source
    return f"{n} intra-op thread{'s' if n != 1 else ''} ({_WHY.get(source, source)})"
