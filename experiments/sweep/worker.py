"""The body of one sweep task: a ``crosscurv run`` in the current process.

Runs go through the command line's entry point :func:`crosscurv.experiments.cli.main`
(its flags are the stable interface), so a sweep run and a run typed by hand
do exactly the same thing.  Its output (summary table, progress lines, the
one-line error) goes to ``run.log`` in the run folder.
"""

from __future__ import annotations

import contextlib
import os
import time

__all__ = ["LOG_FILE", "execute_run", "last_error"]

LOG_FILE = "run.log"


def set_threads(threads: int) -> None:
    """Intra-op thread count of this process (OpenMP/MKL for libraries loaded later, and torch now)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.pop("CROSSCURV_DEFAULT_THREADS", None)  # the sweep's choice, not the CLI default (crosscurv.experiments.cli.threads)
    import torch

    torch.set_num_threads(int(threads))


def last_error(log_text: str) -> str:
    """The last ``crosscurv: ...`` line of a run's output (its error), or ``""``."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.startswith("crosscurv:")]
    errors = [ln for ln in lines if "error" in ln or "diverged" in ln or "interrupted" in ln]
    return (errors or lines or [""])[-1]


def execute_run(argv: list[str], threads: int, log_path: str) -> dict:
    """``crosscurv.experiments.cli.main(argv)`` with ``threads`` threads, output appended to ``log_path``.

    Returns:
        ``{"exit_code": int, "error": str, "seconds": float, "pid": int, "threads": int}``
        (``error`` is the run's last ``crosscurv:`` line when the exit code is not 0).
    """
    t0 = time.perf_counter()
    set_threads(threads)
    from crosscurv.experiments.cli import main

    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ crosscurv {' '.join(argv)}\n")
        log.flush()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            code = main(list(argv))
    error = ""
    if code != 0:
        with open(log_path, "r", encoding="utf-8", errors="replace") as fh:
            fh.seek(start)
            error = last_error(fh.read()) or f"exit code {code}"
    return {"exit_code": int(code), "error": error, "seconds": time.perf_counter() - t0,
            "pid": os.getpid(), "threads": int(threads)}
