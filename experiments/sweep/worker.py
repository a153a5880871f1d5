"""The body of one sweep task: one run (:func:`crosscurv.experiments.runs.run`) in the current
process.

A sweep run and the same ``crosscurv run`` typed by hand perform the same run: both go through
:func:`crosscurv.experiments.runs.run` with the same
:class:`~crosscurv.experiments.runs.RunDescription`.  The run's output goes to ``run.log`` in its
folder: the equivalent command line, the progress lines and a last line saying how it ended
(``crosscurv: error: ...`` for bad input, ``crosscurv: diverged at k=...``), with the exit code
``crosscurv run`` would give (0 complete, 2 bad input, 3 diverged, 70 internal error, 130
interrupted).
"""

from __future__ import annotations

import os
import time

__all__ = ["LOG_FILE", "execute_run", "last_error"]

LOG_FILE = "run.log"

#: exit codes of ``crosscurv run`` (crosscurv.experiments.cli.EXIT_CODES) for the outcomes a worker
#: reports
BAD_INPUT, INTERNAL_ERROR, INTERRUPTED = 2, 70, 130


def set_threads(threads: int) -> None:
    """Intra-op thread count of this process (OpenMP/MKL for libraries loaded later, and torch now).
    """
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    # the sweep's choice, not the CLI default (crosscurv.experiments.cli.threads)
    os.environ.pop("CROSSCURV_DEFAULT_THREADS", None)
    import torch

    torch.set_num_threads(int(threads))


def last_error(log_text: str) -> str:
    """The last ``crosscurv: ...`` line of a run's output (its error), or ``""``."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.startswith("crosscurv:")]
    errors = [ln for ln in lines if "error" in ln or "diverged" in ln or "interrupted" in ln]
    return (errors or lines or [""])[-1]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def execute_run(description, out_dir: str, resume: bool, threads: int, log_path: str) -> dict:
    """Run ``description`` into ``out_dir`` with ``threads`` threads, its output appended to
    ``log_path``.

    Returns:
        ``{"exit_code": int, "error": str, "seconds": float, "pid": int, "threads": int}``
        (``error`` is the run's last ``crosscurv:`` line when the exit code is not 0).
    """
    from crosscurv.experiments import runs
    from crosscurv.theory.errors import InputError

    t0 = time.perf_counter()
    set_threads(threads)
    description = description.replace(threads=int(threads))
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log:
        argv = ["run", *description.to_args(), "--out", out_dir] + (["--resume"] if resume else [])
        log.write(f"$ crosscurv {' '.join(argv)}\n")
        log.flush()
        progress = runs.Progress(file=log)
        error = ""
        try:
            result, _ = runs.run(description, out_dir, resume=resume, progress=progress)
            code = result.exit_code
            line = f"{result.status}: {len(result.records)} records in {out_dir}"
            if result.status == "diverged":
                error = line = f"crosscurv: {result.message}"
        except InputError as exc:
            code, error = BAD_INPUT, f"crosscurv: error: {_one_line(exc)}"
            line = error
        except KeyboardInterrupt:
            code, error = INTERRUPTED, "crosscurv: interrupted"
            line = error
        # a bug in crosscurv: reported in the sweep's table, the other runs go on
        except Exception as exc:
            code = INTERNAL_ERROR
            error = line = f"crosscurv: internal error: {type(exc).__name__}: {_one_line(exc)}"
        finally:
            progress.close()
        log.write(line + "\n")
    return {"exit_code": int(code), "error": error, "seconds": time.perf_counter() - t0,
            "pid": os.getpid(), "threads": int(threads)}
