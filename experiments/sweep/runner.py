"""``run_sweep``: every grid point as a run (:func:`crosscurv.experiments.runs.run`) on Ray, then
the aggregate.

Layout of ``OUT``::

    OUT/sweep.json          the grid, the Ray set-up and timings OUT/sweep.csv           one row per
    run (crosscurv.experiments.sweep.aggregate) OUT/sweep.md            per-run table, mean [min,
    max] over seeds OUT/sweep_agreement.png Correct_K against the learning rate per estimate
    OUT/runs/<name>/        records.csv, summary.json, checkpoint.pt, run.log

Rerunning a sweep into the same ``OUT`` needs ``resume=True`` (``--resume``): complete runs are
reused, interrupted ones resumed, the others started (:mod:`crosscurv.experiments.sweep.state`).
``sweep.csv`` is rewritten after every finished run, so a killed sweep keeps the rows of the runs it
finished.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field

from crosscurv.experiments.sweep import aggregate, state
from crosscurv.experiments.sweep.grid import RunPoint, expand
from crosscurv.experiments.sweep.spec import SweepError, SweepSpec
from crosscurv.experiments.runs import DEFAULT_THREADS

__all__ = ["run_sweep", "SweepResult", "SWEEP_FAILED_EXIT_CODE"]

#: exit code of a sweep in which at least one run did not complete (diverged or failed)
SWEEP_FAILED_EXIT_CODE = 3

RUNS_DIR = "runs"


@dataclass
class SweepResult:
    """What :func:`run_sweep` did.

    Attributes:
        rows: one ``sweep.csv`` row (dict) per grid point, in grid order.
        exit_code: 0 when every run completed, :data:`SWEEP_FAILED_EXIT_CODE` otherwise.
        out: the sweep folder; ``csv``, ``markdown``, ``figure``: the files written
            (``figure`` is ``None`` when no run completed).
        timing: ``ray_start_s`` (0 when Ray was not started here), ``runs_s``
            (first submission to last result), ``total_s``, ``executed`` runs.
    """

    rows: list
    exit_code: int
    out: str
    csv: str
    markdown: str
    figure: str | None
    timing: dict = field(default_factory=dict)

    @property
    def incomplete(self) -> list:
        """Rows of the runs that did not complete (diverged, failed, interrupted)."""
        return [r for r in self.rows if r["status"] != "complete"]


class _Progress:
    """One line per finished run on stderr (through tqdm's bar on a terminal)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.n, self.bar = total, enabled, 0, None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="run", desc="sweep", file=sys.stderr)
            except Exception:  # tqdm missing or broken: plain lines
                self.bar = None

    def done(self, row: dict) -> None:
        self.n += 1
        if not self.enabled:
            return
        best = row.get("cumulative_correct")
        took = f" in {row['seconds']:.1f} s" if row.get("seconds") is not None else ""
        what = row["status"] + (" (reused)" if row["action"] == state.REUSE else "")
        extra = f", cumulative {best:.1f}%" if best is not None and row[
            "status"] == "complete" else ""
        err = f": {row['error']}" if row["status"] != "complete" and row["error"] else ""
        line = f"crosscurv: sweep [{self.n}/{self.total}] {row['name']}: {what}{took}{extra}{err}"
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
            self.bar.update(1)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _check_count(name: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SweepError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def run_sweep(spec: SweepSpec, out: str, *, workers: int | None = None, threads: int | None = None,
              address: str | None = None, resume: bool = False,
              progress: bool = True) -> SweepResult:
    """Run every point of ``spec`` as a Ray task and aggregate the results into ``out``.

    Args:
        spec: the grid. out: sweep folder (created); its runs go to ``out/runs/<name>/``. workers:
        runs at a time (default: the CPU count of this machine, or of
            the cluster with ``address``).
        threads: intra-op threads of each run (default 1, as for ``crosscurv run``:
            :data:`crosscurv.experiments.runs.DEFAULT_THREADS`); each Ray task asks for that many
            CPUs.
        address: a running Ray cluster to join (``ray start --head`` / ``auto``);
            ``None`` starts a local instance for this sweep and stops it after. A Ray instance
            already initialised in this process is used as it is.
        resume: continue a sweep already in ``out`` (reuse complete runs,
            resume interrupted ones); without it ``out`` must hold no runs.
        progress: print one line per finished run on stderr.

    Returns:
        A :class:`SweepResult`.  Runs that diverge, fail or crash their worker are reported in its
        rows; the others finish.

    Raises:
        SweepError: bad grid or options, or ``out`` holds runs and ``resume`` is false.
        KeyboardInterrupt: after cancelling the runs in flight and writing ``sweep.csv``.
    """
    t_start = time.perf_counter()
    workers, threads, out, runs_dir = _check_options(spec, out, workers, threads, resume)
    points = expand(spec)
    if address is not None:
        from crosscurv.experiments.sweep.ray_backend import check_address

        check_address(address)  # an unreachable cluster fails here, before anything is written
    os.makedirs(runs_dir, exist_ok=True)
    rows, todo = _plan(points, runs_dir)
    csv_path, md_path = os.path.join(out, "sweep.csv"), os.path.join(out, "sweep.md")

    def ordered() -> list[dict]:
        return [rows[p.name] for p in points if p.name in rows]

    bar = _Progress(len(points), progress)
    for r in ordered():
        bar.done(r)
    info = {"grid": spec.to_dict(), "runs": len(points), "resume": resume,
            "reused": len(points) - len(todo)}
    ray_start_s, runs_s = 0.0, 0.0
    if todo:
        ray_start_s, runs_s = _execute(todo, rows, ordered, bar, info, out, runs_dir, workers,
                                       threads, address)
    else:
        bar.close()
    final = ordered()
    aggregate.write_csv(csv_path, final)
    aggregate.write_markdown(md_path, final, title=f"Sweep {os.path.basename(out)}")
    figure = agreement(final, os.path.join(out, "sweep_agreement.png"))
    timing = {"ray_start_s": ray_start_s, "runs_s": runs_s,
              "total_s": time.perf_counter() - t_start, "executed": len(todo)}
    info.update(timing=timing, complete=sum(r["status"] == "complete" for r in final))
    _write_info(out, info)
    code = 0 if all(r["status"] == "complete" for r in final) else SWEEP_FAILED_EXIT_CODE
    return SweepResult(final, code, out, csv_path, md_path, str(figure) if figure else None, timing)


def _check_options(spec, out, workers, threads, resume) -> tuple:
    """``(workers, threads, out, runs_dir)`` checked: ``out`` absolute, and holding no runs unless
    ``resume`` (:class:`SweepError`)."""
    if not isinstance(spec, SweepSpec):
        raise SweepError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    workers = _check_count("workers", workers)
    threads = _check_count("threads", threads)
    out = os.path.abspath(str(out))
    runs_dir = os.path.join(out, RUNS_DIR)
    if os.path.exists(out) and not os.path.isdir(out):
        raise SweepError(f"sweep folder {out} exists and is not a directory")
    if not resume and os.path.isdir(runs_dir) and os.listdir(runs_dir):
        raise SweepError(f"{out} already holds a sweep; use --resume to continue it or choose "
                         "another --out")
    return workers, threads, out, runs_dir


def _plan(points, runs_dir: str) -> tuple[dict, list]:
    """``(rows, todo)``: the rows of the runs reused or in conflict, by name, and the ``(point,
    action)`` of the runs to start or resume (a run to restart cleared first)."""
    rows: dict[str, dict] = {}
    todo: list[tuple[RunPoint, str]] = []
    for p in points:
        run_dir = os.path.join(runs_dir, p.name)
        action, reason = state.run_action(p, run_dir)
        if action == state.REUSE:
            rows[p.name] = aggregate.run_row(p, os.path.join(RUNS_DIR, p.name), action, None,
                                             state.read_run_summary(run_dir))
        elif action == state.CONFLICT:
            rows[p.name] = aggregate.run_row(p, os.path.join(RUNS_DIR, p.name), action,
                                             {"exit_code": None, "error": reason}, None)
        else:
            if action == state.RESTART:
                state.clear_for_restart(run_dir)
            todo.append((p, action))
    return rows, todo


def _execute(todo, rows, ordered, bar, info, out, runs_dir, workers, threads, address) -> tuple:
    """The runs of ``todo`` as Ray tasks, each finished run's row into ``rows`` and ``sweep.csv`` at
    once; ``(ray_start_s, runs_s)``. On an interrupt the unfinished runs get rows and ``sweep.csv``
    is written before it propagates; a Ray instance started here is stopped."""
    ray_start_s, runs_s, started = 0.0, 0.0, False
    try:
        from crosscurv.experiments.sweep import ray_backend

        local_cpus = os.cpu_count() or 1
        if address is None:
            workers = workers or min(local_cpus, len(todo))
            threads = threads or DEFAULT_THREADS
        ray = ray_backend.connect(num_cpus=(workers or local_cpus) * (threads or 1),
                                  address=address)
        started, ray_start_s = ray.started, ray.seconds
        cluster_cpus = int(ray.resources.get("CPU", 1))
        threads = threads or DEFAULT_THREADS
        workers = workers or max(1, cluster_cpus // threads)
        info.update(workers=workers, threads=threads, address=address, ray_started=started,
                    ray_start_s=ray_start_s, cluster=ray.resources)
        _write_info(out, info)

        def make_call(item):
            p, action = item
            run_dir = os.path.join(runs_dir, p.name)
            return (p.description(), run_dir, action == state.RESUME, threads,
                    os.path.join(run_dir, "run.log"))

        def on_done(item, outcome):
            p, action = item
            summary = state.read_run_summary(os.path.join(runs_dir, p.name))
            rows[p.name] = aggregate.run_row(p, os.path.join(RUNS_DIR, p.name), action, outcome,
                                             summary)
            aggregate.write_csv(os.path.join(out, "sweep.csv"), ordered())
            bar.done(rows[p.name])

        t_runs = time.perf_counter()
        try:
            ray_backend.run_tasks(todo, make_call, workers, threads, on_done)
        except KeyboardInterrupt:
            for p, action in todo:
                if p.name not in rows:
                    summary = state.read_run_summary(os.path.join(runs_dir, p.name))
                    rows[p.name] = aggregate.run_row(p, os.path.join(RUNS_DIR, p.name), action,
                                                     {"exit_code": 130,
                                                      "error": "sweep interrupted"},
                                                     summary)
            aggregate.write_csv(os.path.join(out, "sweep.csv"), ordered())
            raise
        runs_s = time.perf_counter() - t_runs
    finally:
        bar.close()
        if started:
            import ray as _ray

            _ray.shutdown()
    return ray_start_s, runs_s


def agreement(rows, path):
    from crosscurv.experiments.sweep.figures import agreement_figure

    return agreement_figure(rows, path)


def _write_info(out: str, info: dict) -> None:
    from crosscurv.numeric.records import atomic_write_text, json_safe

    atomic_write_text(os.path.join(out, "sweep.json"), json.dumps(json_safe(info), indent=2,
                                                                  default=str) + "\n")
