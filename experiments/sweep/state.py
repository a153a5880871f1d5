"""What a sweep does with a run folder it finds: start, resume, reuse, or refuse.

No folder or nothing final: start; a final summary (``complete`` or ``diverged``) with the requested
settings: reuse; a checkpoint and no final status: resume (``crosscurv run --resume``); records
without checkpoint or final status: clear them (:func:`clear_for_restart`) and start; a final
summary with other settings: refuse (a failed run, the folder left as it is).
"""

from __future__ import annotations

import json
import os

from crosscurv.numeric.records import (CHECKPOINT_FILE, RECORDS_FILE, SUMMARY_FILE, RecordsError,
                                       read_summary)

__all__ = ["FINAL_STATUSES", "NEW", "RESUME", "REUSE", "CONFLICT", "RESTART", "read_run_summary",
           "run_action", "settings_difference", "clear_for_restart"]

#: summary statuses that no rerun would change
FINAL_STATUSES = ("complete", "diverged")

NEW, RESUME, REUSE, CONFLICT, RESTART = "new", "resume", "reuse", "conflict", "restart"


def read_run_summary(run_dir: str) -> dict | None:
    """``summary.json`` of a run folder (``crosscurv.numeric.records.read_summary``), ``None`` if
    absent or torn."""
    path = os.path.join(run_dir, SUMMARY_FILE)
    if not os.path.isfile(path):
        return None
    try:
        summary = read_summary(path)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecordsError):
        return None
    return summary if isinstance(summary, dict) else None


def settings_difference(point, settings: dict) -> str | None:
    """The first requested setting of ``point`` that ``settings`` (a summary's) does not match: the
    point's :class:`~crosscurv.experiments.runs.RunDescription` against the summary's (settings the
    point leaves to the run are not compared; nor is the task of a factory, which records its own
    name)."""
    from crosscurv.experiments.runs import RunDescription
    from crosscurv.theory.errors import InputError

    try:
        recorded = RunDescription.from_summary({"settings": settings})
    except InputError as exc:
        return f"settings that describe no run ({exc})"
    asked = point.description()
    for key in ("seed", "task", "preset", "lr", "pattern", "iters", "dtype"):
        want, have = getattr(asked, key), getattr(recorded, key)
        if (key == "task" and ":" in point.task) or (want is None and key != "seed"):
            continue
        if want != have:
            return f"{key} {have!r}, requested {want!r}"
    return None


def run_action(point, run_dir: str) -> tuple[str, str | None]:
    """``(action, reason)``: :data:`NEW`, :data:`RESUME`, :data:`REUSE`, :data:`RESTART` or
    :data:`CONFLICT`."""
    if not os.path.isdir(run_dir):
        return NEW, None
    summary = read_run_summary(run_dir)
    if summary is not None and summary.get("status") in FINAL_STATUSES:
        diff = settings_difference(point, summary.get("settings", {}))
        if diff is not None:
            return (CONFLICT, f"{run_dir} holds a {summary['status']} run with other settings "
                              f"({diff})")
        return REUSE, None
    if os.path.exists(os.path.join(run_dir, CHECKPOINT_FILE)):
        return RESUME, None
    if os.path.exists(os.path.join(run_dir, RECORDS_FILE)):
        return (RESTART, f"{run_dir} holds records of an interrupted run without its checkpoint: "
                         "started afresh")
    return NEW, None


#: What an interrupted run without its checkpoint leaves that a fresh start would refuse to
#: overwrite.
_RESTART_FILES = (RECORDS_FILE, SUMMARY_FILE, "run.log")


def clear_for_restart(run_dir: str) -> None:
    """Remove the records, summary and log of a run that :func:`run_action` found unresumable
    (:data:`RESTART`), so that ``crosscurv run`` starts it afresh in the same folder."""
    for name in _RESTART_FILES:
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            os.remove(path)
