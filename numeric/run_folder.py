"""Whether a run folder can be resumed, checked from its files without importing torch.

:func:`check_resumable` refuses in one line (:class:`ResumeError`) a folder that is missing, has no
checkpoint, or whose summary, records header or checkpoint archive cannot be read; ``crosscurv run
--resume`` checks it before it imports torch.
"""

from __future__ import annotations

import json
import os
import zipfile

from crosscurv.theory.errors import ResumeError

from .records import CHECKPOINT_FILE, RECORDS_FILE, SUMMARY_FILE, is_older_header

__all__ = ["ResumeError", "one_line", "unreadable_checkpoint", "check_resumable", "check_summary",
           "check_records_header", "check_checkpoint_archive"]


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line, at most 160 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def unreadable_checkpoint(path: str) -> str:
    """The start of the line that refuses the checkpoint file ``path``."""
    return f"{path} is not a readable crosscurv checkpoint"


def check_summary(path: str) -> None:
    """``summary.json`` at ``path``, where it exists, is a JSON object with ``settings``."""
    if not os.path.exists(path):
        return
    try:
        with open(path, "r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResumeError(
            f"{path} is not a readable crosscurv summary ({type(exc).__name__})") from None
    if not isinstance(data, dict) or "settings" not in data:
        raise ResumeError(f"{path} is not a crosscurv summary")


def check_records_header(path: str) -> None:
    """``records.csv`` at ``path``, where it holds anything, starts with a text header of this
    version's columns (records of an older crosscurv cannot be continued)."""
    try:
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            return
        with open(path, "r", encoding="utf-8") as fh:
            header = fh.readline().strip()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResumeError(
            f"{path} is not a readable crosscurv records file ({type(exc).__name__})") from None
    if is_older_header(header):
        raise ResumeError(f"{path} was written by an older crosscurv (no converged extremes and "
                          "error estimates); it cannot be continued: rerun it")


def check_checkpoint_archive(path: str) -> None:
    """The checkpoint at ``path`` is a whole zip archive, as ``torch.save`` writes it (its central
    directory read, no member decompressed)."""
    try:
        with zipfile.ZipFile(path) as archive:
            archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ResumeError(
            f"{unreadable_checkpoint(path)} ({type(exc).__name__}: {one_line(exc)})") from None


def check_resumable(folder: str) -> None:
    """:class:`ResumeError` unless ``folder`` holds a checkpoint whose archive, summary and records
    header can be read (module docstring)."""
    folder = str(folder)
    if not os.path.isdir(folder):
        raise ResumeError(f"nothing to resume: {folder} does not exist")
    checkpoint = os.path.join(folder, CHECKPOINT_FILE)
    if not os.path.exists(checkpoint):
        raise ResumeError(f"nothing to resume: {folder} has no {CHECKPOINT_FILE}")
    check_summary(os.path.join(folder, SUMMARY_FILE))
    check_checkpoint_archive(checkpoint)
    check_records_header(os.path.join(folder, RECORDS_FILE))
