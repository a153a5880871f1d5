"""``crosscurv report --check``: do the committed runs still come out of the code that made them?

A run folder of ``crosscurv run`` (``summary.json`` + ``records.csv``) records every setting of its
run.  :func:`check_run` rebuilds the run from them (task, preset and every size the summary records,
learning rate, seed, pattern, dtype, HVP engine, optimizer and per-block step sizes; on the CPU;
with the thread count the summary or its sweep records, else 1), recomputes its first ``N``
iterations in memory with :func:`crosscurv.experiments.runs.run` (the run's
:class:`~crosscurv.experiments.runs.RunDescription` read from its summary) and compares them with
the committed records exactly as ``crosscurv validate-records`` does
(:func:`crosscurv.numeric.record_comparison.compare_records` with the tolerances of
:func:`crosscurv.numeric.record_comparison.reference_tolerances`: the committed records are the
reference).

Only the columns both records have are compared: records written before ``sharpness`` and
``gap_err`` existed (eight columns) have neither, and their ``gap`` is the difference of the two
losses in the run's dtype, compared with the tolerance that difference carries
(:mod:`crosscurv.numeric.record_comparison`). The recomputed ``theta^0`` is checked against the
summary's ``theta0_sha256`` first (and the frozen weights' ``task_info["frozen_sha256"]`` where a
task has them): a different start is reported as a disagreement at ``k = 0``, named as "made with
another initializer" when the folder records another ``task_info["init"]`` (or none: folders from
before every CPU drew the same inputs, :mod:`crosscurv.numeric.portable_random`).

:func:`check_runs` checks several folders (by default every protocol run folder under ``reports/``,
sweep runs included: :func:`find_runs`) and stops at the first that disagrees.  Malformed input (a
folder that is no run, an unreadable summary, settings that rebuild no task) raises
:class:`ReportCheckError`, which the command line prints as one line (exit code 2).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from crosscurv.theory.errors import InputError, ReportCheckError

from crosscurv.experiments.reports.perturbed_twins import (  # noqa: F401 (sensitivity and the partings: their old home)
    column_parting, explain_parting, sensitivity, trajectory_parts_at)

__all__ = ["ReportCheckError", "RunCheck", "CheckResult", "find_runs", "run_threads", "check_run",
           "check_runs"]


@dataclass
class RunCheck:
    """The outcome of :func:`check_run` for one run folder.

    Attributes:
        run_dir: the folder. agree: every compared value within tolerance (and the same
        ``theta^0``). iterations: the iterations recomputed and compared (``1..iterations``).
        recorded: the number of committed records. columns: the columns compared; skipped: value
            columns the committed records do not have (not compared).
        threads: intra-op threads of the recomputation, and where that number
            came from (``threads_source``).
        first: ``(k, column, recomputed, committed, allowed)`` of the first
            disagreement (``k = 0``, column ``theta0``: a different start), else ``None``.
        comparison: the :class:`crosscurv.numeric.record_comparison.RecordsComparison`. recomputed:
        the recomputed records ``{column: [values]}`` (``None`` when nothing was recomputed).
        seconds: time of the recomputation. notes: facts worth a reader's attention (settings not
            reproduced...). verdict: which promise held: ``"bitwise"`` (every compared value the
            same bits), ``"within tolerance"`` (every value within the measured-rounding
            tolerances), ``"parts as predicted"`` (beyond them from ``k = parts_at`` on, but within
            them grown by :func:`sensitivity`: as far as a run that differs from the recomputation
            only at rounding parts), or ``"disagree"``.
        parts_at: the first ``k`` beyond the fixed tolerances (verdict ``"parts as predicted"``).
        growth: the measured growth per iteration of how far a run perturbed at rounding parts
            (:func:`sensitivity`, geometric mean over ``k = 1..n``), when it was run and grew.
    """

    run_dir: str
    agree: bool
    iterations: int
    recorded: int
    columns: list
    skipped: list
    threads: int
    threads_source: str
    first: tuple | None = None
    comparison: object = None
    verdict: str = ""
    parts_at: int | None = None
    growth: float | None = None
    recomputed: dict | None = None
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    def line(self) -> str:
        """One line: agreement with what was compared, or the first disagreement and its tolerance.
        """
        how = (f"{self.threads} thread{'s' if self.threads != 1 else ''} "
               f"({self.threads_source}), {self.seconds:.1f} s")
        if self.agree:
            skipped = (f"; not in the committed records: {', '.join(self.skipped)}" if self.skipped
                       else "")
            return (f"{self.run_dir}: agree at k=1..{self.iterations} of {self.recorded} "
                    f"({len(self.columns)} columns{skipped}; {how}): {self.promise()}")
        k, col, new, old, allowed = self.first
        if col == "theta0":
            return f"{self.run_dir}: DISAGREE at k=0: {new} ({how})"
        return (f"{self.run_dir}: DISAGREE at k={k}, column {col}: recomputed {new!r}, committed "
                f"{old!r}, |diff| {abs(new - old):.3e} > tolerance {allowed:.3e} ({how})")

    def promise(self) -> str:
        """Which promise held, in words: bitwise / within tolerance to k = n / parts at k = ... as
        predicted."""
        if self.verdict == "bitwise":
            return "bitwise"
        if self.verdict == "within tolerance":
            return f"within tolerance to k = {self.iterations}"
        if self.verdict == "parts as predicted":
            rate = f", {self.growth:.2f}x per iteration" if self.growth else ""
            return (f"within tolerance to k = {self.parts_at - 1}, parts at k = {self.parts_at}, "
                    f"as the trajectory's own sensitivity predicts (tolerances grown as a run "
                    f"perturbed at rounding parts{rate}, to k = {self.iterations})")
        return "disagree"

    def to_dict(self) -> dict:
        return {
            "run_dir": self.run_dir, "agree": self.agree, "iterations": self.iterations,
            "recorded": self.recorded, "columns": list(self.columns), "skipped": list(self.skipped),
            "threads": self.threads, "threads_source": self.threads_source,
            "first_disagreement": None if self.first is None else dict(
                zip(("k", "column", "recomputed", "committed", "tolerance"), self.first)),
            "seconds": self.seconds, "notes": list(self.notes), "line": self.line(),
            "verdict": self.verdict, "parts_at": self.parts_at, "growth": self.growth,
        }


@dataclass
class CheckResult:
    """The outcome of :func:`check_runs`: one :class:`RunCheck` per folder checked, in order.

    Checking stops at the first disagreement, so ``runs`` may be shorter than ``run_dirs`` (the
    folders that were to be checked).
    """

    runs: list
    run_dirs: list

    @property
    def ok(self) -> bool:
        return all(r.agree for r in self.runs) and len(self.runs) == len(self.run_dirs)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def first_disagreement(self) -> RunCheck | None:
        return next((r for r in self.runs if not r.agree), None)


# -- finding run folders -------------------------------------------------------------------
def _is_protocol_run(path: str) -> bool:
    """``path`` holds ``summary.json`` and a ``records.csv`` whose header is the protocol's."""
    from crosscurv.numeric.records import FIELDS, RECORDS_FILE, SUMMARY_FILE, is_older_header

    rec = os.path.join(path, RECORDS_FILE)
    if not (os.path.isfile(os.path.join(path, SUMMARY_FILE)) and os.path.isfile(rec)):
        return False
    try:
        with open(rec, "r", encoding="utf-8") as fh:
            header = fh.readline().strip().removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return True  # a run folder with a broken records file: check_run says what is wrong
    # an older run: check_run refuses it in one line
    return header == ",".join(FIELDS) or is_older_header(header)


def find_runs(root: str = "reports") -> list[str]:
    """Every ``crosscurv run`` folder under ``root`` (sorted): ``summary.json`` + a protocol
    ``records.csv``.

    Sweep run folders (``sweeps/*/runs/*``) are found like any other; folders of other commands with
    a ``records.csv`` of their own columns (``crosscurv motivation``) are not protocol runs and are
    left out.

    Raises:
        ReportCheckError: ``root`` is not a folder.
    """
    if not os.path.isdir(root):
        raise ReportCheckError(f"{root} is not a folder (give run folders, or --out with the "
                               "reports folder)")
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames.sort()
        if _is_protocol_run(dirpath):
            found.append(dirpath)
    return sorted(found)


# -- rebuilding a run ----------------------------------------------------------------------
def _summary(run_dir: str):
    """``(summary, settings, RunDescription)`` of a run folder (every setting checked by the
    description)."""
    from crosscurv.numeric.records import SUMMARY_FILE, read_summary

    path = os.path.join(run_dir, SUMMARY_FILE)
    summary = read_summary(path)
    settings = summary.get("settings")
    if not isinstance(settings, dict):
        raise ReportCheckError(
            f"summary {path} has no settings object: not a crosscurv run summary")
    from crosscurv.experiments.runs import RunDescription

    try:
        description = RunDescription.from_summary(summary)
    except InputError as exc:
        raise ReportCheckError(f"summary {path}: {str(exc).removeprefix('summary: ')}") from None
    return summary, settings, description


def run_threads(run_dir: str, summary: dict) -> tuple[int, str]:
    """Intra-op threads of the run and where the number comes from.

    The summary's ``settings.threads`` (or top-level ``threads``) when it records one; for a sweep
    run (``OUT/runs/NAME``) the sweep's ``OUT/sweep.json`` ``threads``; otherwise 1 (``"not
    recorded"``).
    """
    import json

    for where, d in (("summary", summary.get("settings", {})), ("summary", summary)):
        t = d.get("threads") if isinstance(d, dict) else None
        if isinstance(t, int) and not isinstance(t, bool) and t >= 1:
            return t, where
    parent = os.path.dirname(os.path.abspath(run_dir))
    sweep = os.path.join(os.path.dirname(parent), "sweep.json")
    if os.path.basename(parent) == "runs" and os.path.isfile(sweep):
        try:
            with open(sweep, encoding="utf-8") as fh:
                t = json.load(fh).get("threads")
        except (OSError, ValueError, AttributeError):
            t = None
        if isinstance(t, int) and not isinstance(t, bool) and t >= 1:
            return t, "sweep.json"
    return 1, "not recorded"


def _build_task(run_dir: str, settings: dict, dtype, notes: list):
    """The task of the recorded settings on the CPU in ``dtype``."""
    import torch

    from crosscurv.experiments.tasks.loading import is_builtin, load_task

    spec = settings["task"]
    cpu = torch.device("cpu")
    if spec.startswith("golden:"):
        from crosscurv.experiments.conformance.golden import load_case

        case_dir = os.path.dirname(os.path.abspath(run_dir))
        if not os.path.isfile(os.path.join(case_dir, "case.json")):
            raise ReportCheckError(f"{run_dir}: golden run without its case.json in {case_dir}")
        _, task = load_case(case_dir)
        return task.to(dtype=dtype) if task.dtype != dtype else task
    if not is_builtin(spec):
        task, _ = load_task(spec, settings.get("preset"), device=cpu, dtype=dtype, seed=settings[
            "seed"],
                            data_path=settings.get("data_path"), model_path=settings.get(
                            "model_path"))
        return task
    from crosscurv.experiments.tasks import PRESETS, TASKS, preset_settings

    if spec not in TASKS:
        raise ReportCheckError(f"{run_dir}: unknown built-in task {spec!r} in its summary")
    preset = settings.get("preset") or "default"
    if preset not in PRESETS:
        raise ReportCheckError(f"{run_dir}: unknown preset {preset!r} in its summary")
    sizes = preset_settings(spec, preset)
    for key in list(sizes):  # the sizes the run recorded win over the preset's current ones
        if key in ("lr", "iters"):
            continue
        if key in settings and settings[key] != sizes[key]:
            if _jsonish(sizes[key]) != _jsonish(settings[key]):
                notes.append(f"{key} {settings[key]!r} as recorded (preset {preset} now has "
                             f"{sizes[key]!r})")
            sizes[key] = settings[key]
    task = TASKS[spec].build(sizes, device=cpu, dtype=dtype, seed=settings["seed"],
                             data_path=settings.get("data_path"), model_path=settings.get(
                             "model_path"))
    task.check_loss()
    return task


def _jsonish(v):
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonish(x) for k, x in v.items()}
    return v


def _pattern(task, settings: dict, spec: str, run_dir: str):
    """The run's pattern from its spelling ``spec`` (its description's), checked against the
    recorded pairs."""
    from crosscurv.theory.patterns import as_pattern

    recorded = settings.get("pattern")
    pattern = as_pattern(str(spec), task.n_blocks, task.block_names)
    if isinstance(recorded, dict) and "pairs" in recorded:
        pairs = sorted(tuple(p) for p in recorded["pairs"])
        if pairs != sorted(tuple(p) for p in pattern.to_dict()["pairs"]):
            raise ReportCheckError(f"{run_dir}: pattern {spec!r} no longer gives the recorded "
                                   f"pairs {pairs}")
    return pattern


# -- checking --------------------------------------------------------------------------------
@dataclass
class _Plan:
    """A run folder read and validated, before anything is recomputed."""

    run_dir: str
    summary: dict
    settings: dict
    description: object  # the RunDescription of the summary: every setting that decides the records
    committed: list
    n: int


def _plan(run_dir: str, iters: int | None) -> _Plan:
    from crosscurv.numeric.records import RECORDS_FILE, read_records

    if iters is not None and (isinstance(iters, bool) or not isinstance(iters, int) or iters < 1):
        raise ReportCheckError(f"--iters must be an integer >= 1, got {iters!r}")
    if not os.path.isdir(run_dir):
        raise ReportCheckError(f"run folder {run_dir} does not exist")
    summary, settings, description = _summary(run_dir)
    committed = read_records(os.path.join(run_dir, RECORDS_FILE))
    if not committed:
        raise ReportCheckError(f"{run_dir}/{RECORDS_FILE} holds no records")
    return _Plan(run_dir, summary, settings, description, committed,
                 len(committed) if iters is None else min(iters, len(committed)))


def check_run(run_dir: str, iters: int | None = None, *, progress: Callable[[int, int], None]
              | None = None) -> RunCheck:
    """Recompute the first ``iters`` records of ``run_dir`` and compare them with the committed
    ones.

    Args:
        run_dir: a ``crosscurv run`` folder (``summary.json`` + ``records.csv``). iters: ``N``; the
            first ``min(N, recorded)`` iterations are recomputed (``None``: all recorded ones).
        progress: ``progress(k, n)`` after each recomputed record.

    Returns:
        a :class:`RunCheck`.

    Raises:
        ReportCheckError (and the one-line errors of the record reader and the task loaders): no run
        folder, unreadable or incomplete summary or records, settings that rebuild no task.
    """
    return _check(_plan(run_dir, iters), progress)


def _start_differs(task, settings: dict) -> str | None:
    """Why the rebuilt start is not the recorded one (``None`` when it is).

    The start is the initial parameters (``theta0_sha256``) and, for tasks with frozen weights,
    their digest (``task_info["frozen_sha256"]``). A record folder made with another initializer
    (``task_info["init"]`` absent or different: folders from before the inputs were drawn the same
    on every CPU) is named as such, not as a changed task.
    """
    from crosscurv.numeric.protocol import theta_digest

    then = settings.get("task_info") or {}
    now = task.info or {}
    digest = settings.get("theta0_sha256")
    theta = digest is not None and theta_digest(task.params) != digest
    frozen = now.get("frozen_sha256") is not None and then.get("frozen_sha256") != now.get(
        "frozen_sha256")
    if not (theta or frozen):
        return None
    what = "initial parameters" if theta else "frozen weights"
    if then.get("init") != now.get("init"):
        recorded = then.get("init") or "none, from before initializers were named"
        return (f"made with another initializer (recorded: {recorded}; this code: "
                f"{now.get('init')}): the rebuilt "
                f"{what} differ; recompute the folder with this code to check it")
    if theta:
        return ("the rebuilt initial parameters differ from the recorded theta0_sha256 (task, "
                "sizes, data or seed changed)")
    return ("the rebuilt frozen weights differ from the recorded frozen_sha256 (model, sizes or "
            "seed changed)")


def _check(plan: _Plan, progress=None) -> RunCheck:
    import torch

    from crosscurv.experiments import runs
    from crosscurv.numeric.record_comparison import (ALL_COLUMNS, compare_records, compared_columns,
                                                     reference_tolerances)
    from crosscurv.numeric.records import FIELDS, records_columns

    run_dir, settings, n = plan.run_dir, plan.settings, plan.n
    reference = records_columns(plan.committed[:n])
    columns = compared_columns(reference, reference)
    threads, source = run_threads(run_dir, plan.summary)
    notes: list = []
    if plan.description.device not in (None, "cpu"):
        notes.append(f"recorded on {plan.description.device}, recomputed on the CPU")
    base = dict(run_dir=run_dir, iterations=n, recorded=len(plan.committed), columns=columns,
                skipped=[c for c in FIELDS[1:] if c not in columns and c in ALL_COLUMNS],
                threads=threads, threads_source=source, notes=notes)
    dtype = {"float32": torch.float32, "float64": torch.float64}[plan.description.dtype]
    # the recorded run, recomputed in memory on the CPU with the threads of the record
    rerun = plan.description.replace(device="cpu", threads=threads, iters=n, offload="off")

    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        task = _build_task(run_dir, settings, dtype, notes)
        # the recorded pairs still come out of the recorded spec
        _pattern(task, settings, plan.description.pattern, run_dir)
        why = _start_differs(task, settings)
        if why is not None:
            return RunCheck(agree=False, first=(0, "theta0", why, None, None),
                            seconds=time.perf_counter() - t0, **base)
        res, _ = runs.run(rerun, None, progress=progress, task=task)
    finally:
        torch.set_num_threads(old_threads)
    base["seconds"] = time.perf_counter() - t0
    if not res.records:
        notes.append(f"the recomputation diverged at k={res.diverged_at}")
        return RunCheck(agree=False, first=(1, "loss_jc", math.nan, reference["loss_jc"][0], 0.0),
                        **base)
    recomputed = records_columns(res.records)
    tolerances = reference_tolerances(reference, plan.description.dtype, columns)
    comp = compare_records(recomputed, reference, tolerances=tolerances, columns=columns)
    first = comp.first
    if first is None and len(res.records) < n:  # the recomputation stopped early (diverged)
        k = len(res.records) + 1
        first = (k, "loss_jc", math.nan, reference["loss_jc"][k - 1], 0.0)
        notes.append(f"the recomputation diverged at k={res.diverged_at}")
    if first is None:
        verdict = "bitwise" if _bitwise(recomputed, reference, columns) else "within tolerance"
        return RunCheck(agree=True, first=None, comparison=comp, recomputed=recomputed,
                        verdict=verdict, **base)
    # k = 1 starts from the recorded theta^0: no trajectory to part
    if len(res.records) < n or first[0] < 2:
        return RunCheck(agree=False, first=first, comparison=comp, recomputed=recomputed,
                        verdict="disagree", **base)
    # beyond the fixed tolerances at k >= 2: is it the trajectory's own sensitivity to rounding?
    curve, used, wide, parted = explain_parting(task, rerun, recomputed, reference, tolerances,
                                                columns, comp, n_records=len(res.records))
    if used == 0:
        notes.append("every run perturbed at rounding diverged: no sensitivity to compare with")
        return RunCheck(agree=False, first=first, comparison=comp, recomputed=recomputed,
                        verdict="disagree", **base)
    if used > 1:
        notes.append(f"growth: the largest of {used} runs perturbed at rounding")
    if parted is not None and "sharpness" in columns:
        notes.append(f"sharpness compared to k = {parted - 1}: from k = {parted} the losses are "
                     f"beyond the fixed tolerances (the trajectories part) and the power "
                     f"iteration's vector carries that history")
    base["seconds"] = time.perf_counter() - t0
    growth = curve[-1] ** (1.0 / (len(curve) - 1)) if len(curve) > 1 and curve[-1] > 1 else None
    if wide.ok:
        return RunCheck(agree=True, first=None, comparison=comp, recomputed=recomputed,
                        verdict="parts as predicted", parts_at=first[0], growth=growth, **base)
    notes.append(f"beyond the fixed tolerances from k = {first[0]}; beyond them grown as a run "
                 f"perturbed at rounding parts at k = {wide.first[0]}")
    return RunCheck(agree=False, first=wide.first, comparison=wide, recomputed=recomputed,
                    verdict="disagree", growth=growth, **base)


def _bitwise(recomputed: dict, reference: dict, columns) -> bool:
    """Every compared value the same float (``nan`` equal to ``nan``)."""
    n = len(recomputed["k"])
    for c in columns:
        for a, b in zip(recomputed[c][:n], reference[c][:n]):
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                return False
    return True


def check_runs(run_dirs: Sequence[str] | None = None, iters: int | None = None, *,
               root: str = "reports",
               log: Callable[[str], None] | None = None, on_run: Callable[[RunCheck], None]
               | None = None) -> CheckResult:
    """:func:`check_run` on each folder (default: :func:`find_runs` of ``root``), stopping at the
    first
    disagreement.

    Every folder's summary and records are read and validated before anything is recomputed, so bad
    input fails at once.

    Args:
        run_dirs: run folders (``None`` or empty: every run under ``root``). iters: ``N`` of
        :func:`check_run`. log: receives progress lines (which run, ``k = i/n``). on_run: receives
        each :class:`RunCheck` as soon as it is done.

    Raises:
        ReportCheckError: no run to check, or one of :func:`check_run`'s input errors.
    """
    dirs = list(run_dirs) if run_dirs else find_runs(root)
    if not dirs:
        raise ReportCheckError(f"no crosscurv run folder (summary.json + records.csv) under {root}")
    plans = [_plan(d, iters) for d in dirs]
    out: list = []
    for i, plan in enumerate(plans, start=1):
        d = plan.run_dir
        if log:
            log(f"[{i}/{len(dirs)}] {d}: recomputing k=1..{plan.n}")
        step = [0]

        def progress(k, total, d=d, i=i):
            if log and (k == total or k - step[0] >= max(1, total // 10)):
                step[0] = k
                log(f"[{i}/{len(dirs)}] {d}: k={k}/{total}")

        rc = _check(plan, progress)
        out.append(rc)
        if on_run:
            on_run(rc)
        if not rc.agree:
            break
    return CheckResult(out, dirs)
