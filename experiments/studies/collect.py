"""The runs of a sweep folder (``crosscurv sweep --out DIR``) as studies read them.

:func:`read_sweep` reads every run of ``DIR/runs/*`` with a final status (``complete`` or
``diverged``) through :func:`crosscurv.experiments.reports.table.load_run`; unfinished runs are
counted and left out. :class:`StudyRun` adds its settings (a
:class:`crosscurv.experiments.runs.RunDescription`) and :meth:`StudyRun.prefix`, its first ``K``
records (those of a ``K``-iteration run with the same settings).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


from crosscurv.experiments.runs import RunDescription, RunDescriptionError
from crosscurv.experiments.tasks.errors import DataError
from crosscurv.experiments.reports.table import RunRecords, load_run

__all__ = ["StudyRun", "SweepRuns", "read_sweep", "read_sweeps", "FINAL_STATUSES"]

#: summary statuses whose records are final (``crosscurv.experiments.sweep.state.FINAL_STATUSES``)
FINAL_STATUSES = ("complete", "diverged")


@dataclass
class StudyRun:
    """One finished run of a sweep.

    Attributes:
        name: the run folder's name (``mlp-default-lr0.005-seed1-K80``).
        run: its records (1-D float arrays, length ``K``) and summary.
        threads: intra-op threads it ran with (``settings.threads`` when the
            run recorded it, else the sweep's ``--threads``; ``None`` unknown).
    """

    name: str
    run: RunRecords
    threads: int | None = None
    _description: RunDescription | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def settings(self) -> dict:
        s = self.run.summary.get("settings")
        return s if isinstance(s, dict) else {}

    @property
    def description(self) -> RunDescription:
        """The run's settings, read once from its summary
        (:meth:`crosscurv.experiments.runs.RunDescription.from_summary`)."""
        if self._description is None:
            self._description = RunDescription.from_summary(self.run.summary)
        return self._description

    @property
    def task(self) -> str:
        return self.run.task

    @property
    def lr(self) -> float:
        return self.description.lr

    @property
    def seed(self) -> int:
        return self.description.seed

    @property
    def preset(self) -> str | None:
        return self.description.preset

    @property
    def pattern(self) -> str:
        return self.description.pattern

    @property
    def dtype(self) -> str:
        return self.description.dtype

    @property
    def status(self) -> str:
        return str(self.run.summary.get("status", "?"))

    @property
    def K(self) -> int:
        """Records held (``k = 1..K``)."""
        return self.run.iters

    @property
    def planned_K(self) -> int:
        """Iterations the run was set to (more than :attr:`K` when it diverged)."""
        iters = self.description.iters
        return self.K if iters is None else iters

    @property
    def seconds(self) -> float | None:
        """Wall seconds the run took in all its sessions (``summary.timing.elapsed_s_total``)."""
        t = self.run.summary.get("timing") or {}
        v = t.get("elapsed_s_total")
        return float(v) if isinstance(v, (int, float)) else None

    def columns(self, K: int | None = None) -> dict:
        """The records' columns, cut to the first ``K`` rows when ``K`` is given."""
        if K is None:
            return self.run.columns
        return {c: v[:K] for c, v in self.run.columns.items()}

    def prefix(self, K: int) -> "StudyRun":
        """This run's first ``K`` records, as a run with ``iters = K`` (``K`` at most :attr:`K`)."""
        if K > self.K:
            raise DataError(f"run {self.name} holds {self.K} records, fewer than the {K} asked for")
        summary = json.loads(json.dumps(self.run.summary))
        summary.setdefault("settings", {})["iters"] = K
        # the first K records of a run that went further are a complete K-iteration run
        if K < self.K:
            summary["status"] = "complete"
        cut = RunRecords(self.run.path, self.columns(K), summary)
        return StudyRun(self.name, cut, self.threads)


@dataclass
class SweepRuns:
    """The finished runs of one sweep folder and what was left out."""

    path: Path
    runs: list
    # names of runs still running, interrupted or failed
    unfinished: list = field(default_factory=list)
    info: dict = field(default_factory=dict)  # sweep.json
    # the folders pooled by :func:`read_sweeps` (their SweepRuns)
    parts: list = field(default_factory=list)

    def tasks(self) -> list[str]:
        """Tasks in order of first appearance."""
        seen: list[str] = []
        for r in self.runs:
            if r.task not in seen:
                seen.append(r.task)
        return seen


def _read_info(path: Path) -> dict:
    f = path / "sweep.json"
    if not f.is_file():
        return {}
    try:
        info = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        raise DataError(f"{f} is not valid JSON") from None
    return info if isinstance(info, dict) else {}


def read_sweep(path: str | os.PathLike) -> SweepRuns:
    """The finished runs of the sweep folder ``path``, sorted by task, learning rate and seed.

    Raises:
        DataError: ``path`` is not a folder, has no ``runs/`` folder of run
            folders, a finished run's records or summary are malformed, or no
            run has finished.
    """
    from crosscurv.numeric.records import read_summary

    path = Path(path)
    if not path.is_dir():
        raise DataError(f"sweep folder {path} does not exist")
    runs_dir = path / "runs"
    if not runs_dir.is_dir():
        raise DataError(f"{path} is not a sweep folder (no runs/ folder; `crosscurv sweep --out "
                        f"{path}` writes one)")
    info = _read_info(path)
    threads = info.get("threads") if isinstance(info.get("threads"), int) else None
    finished, unfinished = [], []
    for d in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        summ = d / "summary.json"
        if not summ.is_file() or not (d / "records.csv").is_file():
            unfinished.append(d.name)
            continue
        summary = read_summary(str(summ))
        if summary.get("status") not in FINAL_STATUSES:
            unfinished.append(d.name)
            continue
        run = load_run(d)
        try:
            description = RunDescription.from_summary(summary)
        except RunDescriptionError as exc:
            raise DataError(f"{summ}: {exc}") from None
        t = threads if description.threads is None else description.threads
        srun = StudyRun(d.name, run, t)
        srun._description = description
        finished.append(srun)
    if not finished:
        what = f" ({len(unfinished)} still running or interrupted)" if unfinished else ""
        raise DataError(f"{path} holds no finished run{what}")
    finished.sort(key=lambda r: (r.task, r.lr, r.seed, r.name))
    return SweepRuns(path, finished, unfinished, info)


def _identity(r: StudyRun) -> tuple:
    return (r.task, r.preset, r.lr, r.pattern, r.dtype, r.seed)


def read_sweeps(paths) -> SweepRuns:
    """Several sweep folders pooled as one (a study split over folders, e.g. seed 0 at K = 500 in
    one and seeds 1-4 at K = 100 in another). A run that appears in several folders (same task,
    preset, learning rate, pattern, dtype and seed) is taken once, the one with the most records.
    ``parts`` holds each folder's own :class:`SweepRuns`; ``path`` is the first folder's.

    Raises:
        DataError: as :func:`read_sweep`, for any of the folders; or no folder given.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    parts = [read_sweep(p) for p in paths]
    if not parts:
        raise DataError("no sweep folder given")
    best: dict = {}
    for sw in parts:
        for r in sw.runs:
            key = _identity(r)
            if key not in best or r.K > best[key].K:
                best[key] = r
    runs = sorted(best.values(), key=lambda r: (r.task, r.lr, r.seed, r.name))
    unfinished = [f"{sw.path.name}/{n}" if len(parts) > 1 else n for sw in parts
                  for n in sw.unfinished]
    return SweepRuns(parts[0].path, runs, unfinished, parts[0].info, parts)

