"""``crosscurv report``: every generated result of the suite into one folder.

Stages, each streamed as it runs: ``derive`` (``theory.md``), ``scaling`` (``scaling.md``), the
three controlled studies (``runs/<task>``, through :func:`crosscurv.experiments.runs.run` with
:data:`STUDY_THREADS`), Table 1 and figures (``table1.md``), the motivation study
(``motivation.md``), the studies over seeds from ``sweeps/`` (``studies.md``; nothing run) and the
index ``README.md``. A complete study with the same settings is reused, an interrupted one
resumed; ``--fresh`` recomputes the studies and the motivation runs (not the sweeps).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from crosscurv.experiments.reports.pages import write_index, write_table1

__all__ = ["build_report", "STUDIES", "STUDY_THREADS"]

STUDIES = ("mlp", "fl", "lora")
#: Intra-op threads of the report's studies. Float32 reductions are summed in an order that depends
#: on the thread count; with one thread it is fixed, so the records are the same on every machine of
#: the same kind whatever its core count or the user's OMP_NUM_THREADS (the sweeps of ``make
#: studies`` use one too).
STUDY_THREADS = 1


def _say(msg: str) -> None:
    print(f"[report] {msg}", flush=True)


@contextlib.contextmanager
def _study_threads(n: int = STUDY_THREADS):
    """Run the enclosed studies with ``n`` intra-op threads (restored afterwards)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _reusable(summary: dict, task: str, preset: str) -> str | None:
    """Why a run's summary cannot stand for the study (``None``: it can): complete or diverged, the
    preset, its learning rate and K, seed 0 and :data:`STUDY_THREADS` threads (runs written before
    the thread count was recorded are taken as they are)."""
    from crosscurv.experiments.runs import RunDescription, RunDescriptionError
    from crosscurv.experiments.tasks import preset_settings

    # a rerun of a diverged run diverges again
    if summary.get("status") not in ("complete", "diverged"):
        return f"status {summary.get('status')!r}"
    try:
        have = RunDescription.from_summary(summary)
    except RunDescriptionError as exc:
        return str(exc)
    ps = preset_settings(task, preset)
    want = {"preset": preset, "lr": ps.get("lr"), "iters": ps.get("iters"), "seed": 0}
    for key, value in want.items():
        if getattr(have, key) != value:
            return f"{key} {getattr(have, key)!r}, the study needs {value!r}"
    if have.threads not in (None, STUDY_THREADS):
        return f"threads {have.threads!r}, the study needs {STUDY_THREADS}"
    return None


def _run_study(task: str, preset: str, run_dir: Path, fresh: bool, device: str) -> tuple[int,
                                                                                         float]:
    """Run (or reuse/resume) one study with :data:`STUDY_THREADS` threads; returns (exit code,
    seconds)."""
    t0 = time.perf_counter()
    summary = run_dir / "summary.json"
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    if summary.is_file():
        try:
            s = json.loads(summary.read_text())
        except json.JSONDecodeError:
            s = {}
        why = _reusable(s, task, preset) if isinstance(s, dict) else "unreadable summary"
        if why is None:
            _say(f"{task}: {s.get('status')} run found in {run_dir}, reused (use --fresh to "
                 "recompute)")
            return 0, 0.0
        _say(f"{task}: the run in {run_dir} is not this study ({why})")
    from crosscurv.experiments import runs
    from crosscurv.numeric.protocol import SettingsChangedError

    study = runs.RunDescription(task, preset=preset, device=device, threads=STUDY_THREADS)

    def run(resume: bool):
        progress = runs.Progress()
        try:
            return runs.run(study, str(run_dir), resume=resume, progress=progress)[0]
        finally:
            progress.close()

    with _study_threads():
        if (run_dir / "checkpoint.pt").is_file():
            _say(f"{task}: resuming the interrupted run in {run_dir}")
            try:
                result = run(resume=True)
            # only a change of settings starts over; any other error is reported
            except SettingsChangedError as exc:
                _say(f"{task}: could not resume ({exc}); starting over")
                shutil.rmtree(run_dir)
                result = run(resume=False)
        else:
            if run_dir.exists():
                shutil.rmtree(run_dir)  # no checkpoint: nothing that could be continued
            _say(f"{task}: running preset {preset!r} into {run_dir} ({STUDY_THREADS} thread)")
            result = run(resume=False)
    return result.exit_code, time.perf_counter() - t0


def _motivation_stage(out: Path, preset: str, fresh: bool, command) -> int:
    """``motivation.md`` and its figures: ``crosscurv motivation`` reuses the complete runs (and
    verdicts) in ``out/runs/motivation`` and computes the others, with :data:`STUDY_THREADS`
    threads."""
    runs_dir = out / "runs" / "motivation"
    if fresh and runs_dir.exists():
        shutil.rmtree(runs_dir)
    with _study_threads():
        return command(["motivation", "--preset", preset, "--out", str(runs_dir), "--report", str(
            out)])


#: the sweep folders under ``reports/sweeps`` that ``make studies`` writes
SWEEPS_DIR = "sweeps"


def _studies_stage(out: Path):
    """``studies.md`` from the sweeps in ``out/sweeps`` (seeds* and edge-*; regime-* and
    reference-*, the regime map; threads*); ``None`` when there are none."""
    from crosscurv.experiments.studies import write_studies_report

    sweeps = out / SWEEPS_DIR

    def folders(pattern):
        return sorted(p for p in sweeps.glob(pattern) if (p / "runs").is_dir())

    seeds, threads = folders("seeds*") + folders("edge-*"), folders("threads*")
    regime = folders("regime-*") + folders("reference-*")
    if not seeds:
        return None
    rel = lambda p: os.path.relpath(p, out.parent)  # noqa: E731
    command = "crosscurv studies --seeds " + " ".join(rel(p) for p in seeds)
    if regime:
        command += " --regime " + " ".join(rel(p) for p in regime)
    if threads:
        command += " --threads-compare " + " ".join(rel(p) for p in threads)
    command += f" --out {rel(out)}"
    return write_studies_report(out, seeds=seeds, regime=regime, threads=threads, command=command)


def build_report(
    out: Path,
    preset: str = "default",
    tasks: tuple = STUDIES,
    *,
    scaling: bool = True,
    derive: bool = True,
    quick_scaling: bool = False,
    fresh: bool = False,
    device: str = "auto",
    motivation: bool = True,
    studies: bool = True,
    command: Callable[[list], int] | None = None,
) -> int:
    """Run every stage into ``out``; returns 0 when every stage succeeded.

    ``motivation=False`` skips the motivation study; ``studies=False`` skips the aggregation of
    ``out/sweeps``. The derivation, scaling and motivation stages are ``crosscurv`` sub-commands:
    ``command(argv)`` runs one and returns its exit code (``crosscurv report`` passes the command
    line's entry point); without it, those stages cannot run (``derive``, ``scaling`` and
    ``motivation`` must be false).
    """
    if command is None and (derive or scaling or motivation):
        raise ValueError("build_report needs command= to run the derive, scaling and motivation "
                         "stages")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    failures: list[str] = []
    t_all = time.perf_counter()
    if derive:
        _derive_stage(out, command, timings, failures)
    if scaling:
        _scaling_stage(out, command, quick_scaling, timings, failures)
    runs = _runs_stage(out, tasks, preset, fresh, device, timings, failures)
    figures, table_md, comparison = _table_stage(out, runs, timings)
    motivation_md = None
    if motivation:
        motivation_md = _motivation_report_stage(out, preset, fresh, command, timings, failures)
    studies_result = None
    if studies:
        studies_result = _studies_report_stage(out, timings, failures)
    _say(f"stage 7/{STAGES}: index")
    write_table1(out, runs, studies_result, table_md, comparison)
    timings["total"] = time.perf_counter() - t_all
    write_index(out, preset, runs, figures, table_md, comparison, timings, failures,
                motivation_md=motivation_md, studies_result=studies_result, threads=STUDY_THREADS)
    _say(f"wrote {out / 'README.md'}, {out / 'table1.md'} and {len(figures) * 2} figures in "
         f"{timings['total']:.0f} s")
    for f in failures:
        _say(f"FAILED: {f}")
    return 1 if failures else 0


#: the stages of :func:`build_report`, for its progress lines
STAGES = 7


def _derive_stage(out: Path, command, timings: dict, failures: list) -> None:
    """Stage 1: ``crosscurv derive`` into ``out`` (theory.md)."""
    _say(f"stage 1/{STAGES}: symbolic derivations")
    t0 = time.perf_counter()
    rc = command(["derive", "--out", str(out)])
    timings["derive"] = time.perf_counter() - t0
    if rc != 0:
        failures.append(f"derive exited {rc}")


def _scaling_stage(out: Path, command, quick: bool, timings: dict, failures: list) -> None:
    """Stage 2: ``crosscurv scaling`` into ``out`` (scaling.md); exit 3 is a finding, not a
    failure."""
    _say(f"stage 2/{STAGES}: error-scaling study" + (" (quick)" if quick else ""))
    t0 = time.perf_counter()
    rc = command(["scaling", "--out", str(out)] + (["--quick"] if quick else []))
    timings["scaling"] = time.perf_counter() - t0
    if rc == 3:  # a finding, not a failure: an order with no point in the asymptotic window
        _say("scaling: an order has no point in the asymptotic window (a finding: see scaling.md)")
    elif rc != 0:
        failures.append(f"scaling exited {rc} (an observed order outside its tolerance: see "
                        "scaling.md)")


def _runs_stage(out: Path, tasks, preset: str, fresh: bool, device: str, timings: dict,
                failures: list) -> list:
    """Stage 3: the controlled studies in ``out/runs/<task>``; returns the loaded runs."""
    from crosscurv.experiments.reports.table import load_run

    _say(f"stage 3/{STAGES}: controlled studies {', '.join(tasks)} (preset {preset}, "
         f"{STUDY_THREADS} thread)")
    runs = []
    for task in tasks:
        run_dir = out / "runs" / task
        rc, secs = _run_study(task, preset, run_dir, fresh, device)
        if secs:
            timings[f"run {task}"] = secs
        if rc not in (0, 3):  # 3 = diverged: records kept and reported
            failures.append(f"run {task} exited {rc}")
        if (run_dir / "records.csv").is_file():
            runs.append(load_run(run_dir))
    return runs


def _table_stage(out: Path, runs: list, timings: dict) -> tuple[dict, str, str]:
    """Stage 4: each run's gap figure and winner timeline, Table 1 and the paper comparison."""
    from crosscurv.experiments.reports.plotting import gap_figure, winner_timeline
    from crosscurv.experiments.reports.table import paper_comparison, render_table

    _say(f"stage 4/{STAGES}: Table 1 and figures")
    t0 = time.perf_counter()
    figures = {}
    for run in runs:
        title = f"{run.task}: {run.summary.get('settings', {}).get('pattern', {}).get('name', '')}"
        g = gap_figure(run.columns, out / "figures" / f"gap_{run.task}.png", title,
                       lr=run.summary.get("settings", {}).get("lr"))
        w = winner_timeline(run.columns, out / "figures" / f"winners_{run.task}.png", title)
        figures[run.task] = (g.relative_to(out), w.relative_to(out))
    table_md = render_table(runs, "github") if runs else "(no runs)"
    comparison = paper_comparison(runs, "github") if runs else "(no runs)"
    timings["table and figures"] = time.perf_counter() - t0
    return figures, table_md, comparison


def _motivation_report_stage(out: Path, preset: str, fresh: bool, command, timings: dict,
                             failures: list) -> str | None:
    """Stage 5: the motivation study; returns ``"motivation.md"`` when it wrote the report."""
    _say(f"stage 5/{STAGES}: motivation study (Figure 1; complete runs in "
         f"{out / 'runs' / 'motivation'} reused)")
    t0 = time.perf_counter()
    rc = _motivation_stage(out, preset, fresh, command)
    timings["motivation"] = time.perf_counter() - t0
    if rc != 0:
        failures.append(f"motivation exited {rc}")
    elif (out / "motivation.md").is_file():
        return "motivation.md"
    return None


def _studies_report_stage(out: Path, timings: dict, failures: list):
    """Stage 6: studies.md from ``out/sweeps``; a sweep folder that cannot be read is a failure
    reported with the rest of the report standing."""
    _say(f"stage 6/{STAGES}: studies over seeds and the regime map (from {out / SWEEPS_DIR}, "
         "if present)")
    t0 = time.perf_counter()
    studies_result = None
    try:
        studies_result = _studies_stage(out)
    # a sweep folder that cannot be read is reported, the rest of the report stands
    except Exception as exc:
        failures.append(f"studies: {exc}")
    if studies_result is None and not failures:
        _say(f"no sweeps in {out / SWEEPS_DIR} (`make studies` computes them); stage skipped")
    timings["studies aggregation"] = time.perf_counter() - t0
    return studies_result
