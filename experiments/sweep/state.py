"""What a sweep does with a run folder it finds: start, resume, reuse, or refuse.

* no folder, or no checkpoint and no final summary: start the run afresh;
* ``summary.json`` with a final status (``complete``, or ``diverged``: the
  run is deterministic, a rerun would diverge again) and the requested
  settings: reuse it without running anything;
* a checkpoint and no final status (the run was interrupted, or killed hard
  and its summary still says ``running``): resume it (``crosscurv run
  --resume``, which checks every setting against the checkpoint);
* a final summary whose settings differ from the request: refuse (reported
  as a failed run, the folder is left as it is).
"""

from __future__ import annotations

import json
import os

from crosscurv.numeric.records import CHECKPOINT_FILE, SUMMARY_FILE, RecordsError, read_summary

__all__ = ["FINAL_STATUSES", "NEW", "RESUME", "REUSE", "CONFLICT", "read_run_summary", "run_action",
           "settings_difference"]

#: summary statuses that no rerun would change
FINAL_STATUSES = ("complete", "diverged")

NEW, RESUME, REUSE, CONFLICT = "new", "resume", "reuse", "conflict"


def read_run_summary(run_dir: str) -> dict | None:
    """``summary.json`` of a run folder (``crosscurv.numeric.records.read_summary``), ``None`` if absent or torn."""
    path = os.path.join(run_dir, SUMMARY_FILE)
    if not os.path.isfile(path):
        return None
    try:
        summary = read_summary(path)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecordsError):
        return None
    return summary if isinstance(summary, dict) else None


def settings_difference(point, settings: dict) -> str | None:
    """The first requested setting of ``point`` that ``settings`` (a summary's) does not match."""
    checks = [("seed", point.seed, settings.get("seed"))]
    if ":" not in point.task:  # a factory's task records its own name, not the spec
        checks.append(("task", point.task, settings.get("task")))
    if point.preset is not None:
        checks.append(("preset", point.preset, settings.get("preset")))
    if point.lr is not None:
        checks.append(("lr", float(point.lr), settings.get("lr")))
    if point.pattern is not None:
        checks.append(("pattern", point.pattern, settings.get("pattern_spec")))
    if point.iters is not None:
        checks.append(("iters", point.iters, settings.get("iters")))
    if point.dtype is not None:
        checks.append(("dtype", point.dtype, settings.get("dtype")))
    for key, want, have in checks:
        if want != have:
            return f"{key} {have!r}, requested {want!r}"
    return None


def run_action(point, run_dir: str) -> tuple[str, str | None]:
    """``(action, reason)``: :data:`NEW`, :data:`RESUME`, :data:`REUSE` or :data:`CONFLICT`."""
    if not os.path.isdir(run_dir):
        return NEW, None
    summary = read_run_summary(run_dir)
    if summary is not None and summary.get("status") in FINAL_STATUSES:
        diff = settings_difference(point, summary.get("settings", {}))
        if diff is not None:
            return CONFLICT, f"{run_dir} holds a {summary['status']} run with other settings ({diff})"
        return REUSE, None
    if os.path.exists(os.path.join(run_dir, CHECKPOINT_FILE)):
        return RESUME, None
    return NEW, None
