"""The one-step column beside a run's records: ``RUN/one_step.csv`` (:data:`SIDECAR`), read back.

:mod:`crosscurv.experiments.reports.one_step_along_jc` writes it (``k, one_step, loss_jc``:
Theorem 1's ``eta^2 C_S(theta_JC^{k-1})`` and the replayed JC loss); :func:`read_one_step` aligns
its column with the records' ``k`` for :func:`crosscurv.experiments.reports.table.load_run`,
:func:`replay_drift` compares the replayed loss with the recorded one.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["SIDECAR", "FIELDS", "read_one_step", "replay_drift"]

#: the file beside ``records.csv`` that holds the one-step column
SIDECAR = "one_step.csv"
FIELDS = ("k", "one_step", "loss_jc")


def read_one_step(run_dir: str | os.PathLike, ks) -> np.ndarray | None:
    """``one_step`` aligned with the records' ``k`` (1-D float array, NaN where the file has no
    row), or ``None`` when the run has no :data:`SIDECAR` or it is unreadable."""
    path = Path(run_dir) / SIDECAR
    if not path.is_file():
        return None
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = {int(r["k"]): float(r["one_step"]) for r in csv.DictReader(fh)}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return np.array([rows.get(int(k), math.nan) for k in ks])


def replay_drift(run_dir: str | os.PathLike) -> float | None:
    """The largest relative difference of the replayed ``loss_jc`` (:data:`SIDECAR`) from the
    recorded one, or ``None`` without the file."""
    path = Path(run_dir) / SIDECAR
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        replayed = {int(r["k"]): float(r["loss_jc"]) for r in csv.DictReader(fh)}
    with open(Path(run_dir) / "records.csv", newline="", encoding="utf-8") as fh:
        recorded = {int(r["k"]): float(r["loss_jc"]) for r in csv.DictReader(fh)}
    common = [k for k in replayed if k in recorded and recorded[k]]
    return max((abs(replayed[k] - recorded[k]) / abs(recorded[k]) for k in common), default=None)
