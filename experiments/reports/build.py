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
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

__all__ = ["build_report", "STUDIES", "STUDY_THREADS"]

STUDIES = ("mlp", "fl", "lora")
#: Intra-op threads of the report's studies. Float32 reductions are summed in an order that depends
#: on the thread count; with one thread it is fixed, so the records are the same on every machine of
#: the same kind whatever its core count or the user's OMP_NUM_THREADS (the sweeps of ``make
#: studies`` use one too).
STUDY_THREADS = 1


def _say(msg: str) -> None:
    print(f"[report] {msg}", flush=True)


def _machine() -> dict:
    import torch

    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return info


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
    _write_table1(out, runs, studies_result, table_md, comparison)
    timings["total"] = time.perf_counter() - t_all
    _write_index(out, preset, runs, figures, table_md, comparison, timings, failures,
                 motivation_md=motivation_md, studies_result=studies_result)
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


def _write_table1(out: Path, runs: list, studies_result, table_md: str, comparison: str) -> None:
    """``out/table1.md``: the findings on Table 1, the provenance, seed 0 of each study, the paper's
    numbers beside ours, then every seed."""
    from crosscurv.experiments.reports.headline import findings
    from crosscurv.experiments.reports.one_step_along_jc import replay_drift

    seeds_part = ""
    if studies_result is not None and studies_result.seeds_table:
        seeds_part = ("\n\n## Over seeds (`make studies`)\n\nRuns covered: "
            + studies_result.coverage
                      + " Mean [min, max] over the seeds, the paper's value beside each (details, "
                        "winner timelines and the regime map: [studies.md](studies.md)).\n\n"
                      + studies_result.seeds_table)
    seed_rows = studies_result.seed_rows if studies_result is not None else None
    replayed = sorted(out.glob("runs/*")) + sorted(out.glob("sweeps/seeds*/runs/*"))
    drift = [d for d in map(replay_drift, replayed) if d is not None]
    drift_note = (f" The replayed JC losses match the records within {max(drift):.2g} (relative, "
                  f"the largest over the {len(drift)} runs replayed): float32 rounding drift, the "
                  "same trajectory." if drift else "")
    (out / "table1.md").write_text(
        "# Table 1, redone\n\n" + "\n".join(findings(out, runs, seed_rows)[:3])
        + "\n\nGenerated by `make report` (`crosscurv report`) from `runs/<task>` and `sweeps/`. "
        "Below: seed 0 of each study, the paper's numbers beside ours, then every seed. The "
        "baseline rows are what an estimate must beat: the majority winner (known only afterwards) "
        "and the one-step sign of eta^2 C_S (`one_step.csv` beside the records, written by "
        "`python -m crosscurv.experiments.reports.one_step_along_jc RUN_DIR`)." + drift_note
        + "\n\n## Seed 0 of each study\n\n" + table_md
        + "\n\n## Next to the paper's numbers\n\n" + comparison + seeds_part + "\n"
    )


def _intervals(values) -> str:
    """Winner runs of a signed series: ``JC k=1-14, GS k=15-300``."""
    import numpy as np

    sign = np.sign(np.asarray(values, dtype=float))
    names = {1.0: "JC", -1.0: "GS", 0.0: "tie"}
    out, start = [], 0
    for i in range(1, len(sign) + 1):
        if i == len(sign) or sign[i] != sign[start]:
            a, b = start + 1, i
            out.append(f"{names.get(float(sign[start]), '?')} k={a}" + (f"-{b}" if b > a else ""))
            start = i
    if len(out) > 8:
        return ", ".join(out[:8]) + f", ... ({len(out)} intervals)"
    return ", ".join(out)


def _findings(run, settings: dict) -> list[str]:
    """Facts read off the records: winner intervals, the step-size regime, bound coverage."""
    import numpy as np

    cols = run.columns
    lines = [f"- observed winner: {_intervals(cols['gap'])}"]
    for est in ("cumulative", "recursive", "jc_only"):
        if est in cols:
            lines.append(f"- {est} predicts: {_intervals(cols[est])}")
    const = run.summary.get("constants", {})
    lr, L = settings.get("lr"), const.get("L")
    if lr is not None and L is not None:
        regime = (
            "small: the expansions' regime"
            if lr * L < 1
            else "not small: (I - eta H) amplifies, so propagated (cumulative, jc_only) "
            "estimates can drift"
        )
        lines.append("- eta x L (largest curvature seen along the run, a-posteriori) = "
            f"{lr * L:.3g}, {regime}")
    from crosscurv.experiments.studies.regime import regime_series

    series = regime_series(cols, lr)
    if series is not None:
        es, cross = series
        top = int(np.nanargmax(es))
        lines.append(f"- eta x sharpness_k (the regime indicator per iteration): largest "
                     f"{es[top]:.3g} at k = {int(cols['k'][top])}; "
                     + ("never reaches 2 (the edge of stability)" if cross is None
                        else f"first reaches 2 (the edge of stability) at k = {cross}"))
    cov = run.summary.get("bound_bk_coverage")
    if cov:
        lines.append(
            f"- Theorem 3 bound covers |gap| at {cov.get('covered')}/{cov.get('K')} iterations"
            f" (largest |gap|/bound {cov.get('max_ratio', float('nan')):.3g})"
        )
    return lines


def _hvp_line(summary: dict) -> str | None:
    """How the run computed its Hessian-vector products (summary ``hvp``, settings ``offload``)."""
    hv = summary.get("hvp") or {}
    if not hv.get("used"):
        return None
    engine = f" ({hv['engine']})" if hv.get("engine") else ""
    offload = (summary.get("settings") or {}).get("offload")
    tail = ("" if offload is None else "; carried vectors offloaded between uses: "
        f"{'yes' if offload else 'no'}")
    return f"- Hessian-vector products: {hv['used']}{engine}{tail}"


#: float64 against float32, CPU seconds per iteration, one thread (``crosscurv run TASK --dtype
#: float64 --iters 6`` against the same with float32; docs/reproducibility.md)
FLOAT64_COST = {"mlp": 1.9, "fl": 3.2, "lora": 2.0}


def _reproducibility_lines(runs, studies_result) -> list[str]:
    """What makes the committed studies reproduce, and the measured agreement of 1 and 2 threads."""
    threads = sorted({str(r.summary.get("settings", {}).get("threads", "not recorded"))
        for r in runs})
    lines = [
        "## Reproducibility",
        "",
        f"- The studies run in float32 with {STUDY_THREADS} intra-op thread per run (this report's "
        f"runs: threads {', '.join(threads) or '-'}). `crosscurv run` records the count in "
        "`summary.json` and refuses to resume with another.",
        "- With one thread every reduction is summed in one fixed order. So a run gives the same "
        "records bit for bit on another machine of the same kind, whatever its cores or "
        "`OMP_NUM_THREADS`.",
        "- The measured gap is the segment integral of the gradient (no cancellation) where that "
        "is the more precise measurement, else `loss_s - loss_jc`. Either way it carries an error "
        "bound (`gap_err`); an iteration within it is undecided (docs/protocol.md).",
        "- Float64 studies were rejected for their cost: "
        + ", ".join(f"{t} {r:g}x" for t, r in FLOAT64_COST.items())
        + " the CPU time per iteration of float32 (`crosscurv run TASK --dtype float64 --iters 6`, "
        "one thread).",
        "",
    ]
    if studies_result is not None and studies_result.threads_table:
        lines += [
            "How far the same study with another thread count agrees (the measured proxy for "
            "another machine with another thread setting; a 1-thread rerun is the control), from "
            "[studies.md](studies.md):",
            "",
            studies_result.threads_table,
            "",
        ]
    return lines


def _write_index(out, preset, runs, figures, table_md, comparison, timings, failures, *,
    motivation_md=None,
                 studies_result=None) -> None:
    from crosscurv.experiments.reports.headline import write_headline

    machine = _machine()
    seed_rows = studies_result.seed_rows if studies_result is not None else None
    bullets, rest = write_headline(out, runs, seed_rows,
                                   command=f"crosscurv report --preset {preset}")
    lines = [
        "# crosscurv reports",
        "",
        *bullets,
        "",
        "Generated by `make report` (`crosscurv report --preset %s`). Everything here is"
        " regenerated by that command; nothing is edited by hand. The findings above, the table"
        " and the figures below are also [headline.md](headline.md), which the documentation's"
        " Results page includes." % preset,
        *rest,
    ]
    lines += _contents_lines(out, motivation_md, studies_result)
    lines += _runs_lines(preset, runs, figures, machine)
    lines += ["## Table 1", "", table_md, "", "## Ours next to the paper's Table 1", "",
        comparison, ""]
    if studies_result is not None and studies_result.seeds_table:
        lines += ["## Table 1 over seeds", "", f"Runs covered: {studies_result.coverage} Mean "
            "[min, max] over the "
                  "seeds; `paper`: the paper's value ([studies.md](studies.md) has the "
                  "winner timelines and the "
                  "regime map).", "", studies_result.seeds_table, ""]
    lines += [
        "The paper's numbers come from its own runs at K = 500 with T5-base weights, the full"
        " CIFAR-10/MNIST pipelines and a GPU; ours come from the preset above on the machine above."
        " Differences in K, data and model size make the numbers comparable in kind, not equal.",
        "",
    ]
    lines += _reproducibility_lines(runs, studies_result)
    lines += _timings_lines(runs, studies_result, timings, failures)
    (out / "README.md").write_text("\n".join(lines) + "\n")


def _contents_lines(out: Path, motivation_md, studies_result) -> list[str]:
    """The index of the reports: each file, what it holds and the command that writes it."""
    lines = [
        "## Contents",
        "",
        "- [theory.md](theory.md): the paper's expansions derived and checked symbolically "
        "(SymPy).",
        "- [scaling.md](scaling.md): observed orders of the one-step, recursion, cumulative and"
        " order-invariance remainders, with log-log figures.",
        "- [table1.md](table1.md): Table 1 redone, next to the paper's numbers, and over seeds.",
        "- `runs/<task>/records.csv`, `runs/<task>/summary.json`: the per-iteration records "
        "of each study.",
    ]
    if motivation_md:
        lines.append(f"- [{motivation_md}]({motivation_md}): the motivation study (the paper's "
            "Figure 1 with the "
                     "practical implementations); its runs in `runs/motivation/`.")
    # written by `python -m crosscurv.experiments.studies.optimizers.runner report`
    if (out / "optimizers.md").is_file():
        lines.append("- [optimizers.md](optimizers.md): the optimizer studies (LoRA+ step-size "
                     "ratios, heavy ball on FL, Adam on LoRA), generated by `python -m "
                     "crosscurv.experiments.studies.optimizers.runner report`; records in "
                     "`optimizers/runs/`.")
    if (out / "contest.md").is_file():  # written by `make contest-study`
        lines.append("- [contest.md](contest.md): where the winner is in doubt inside the regime "
                     "(both schemes win a share): the settings at which Table 1 can fail; "
                     "`make contest-study`.")
    if studies_result is not None:
        lines.append("- [studies.md](studies.md): Table 1 over seeds, winner timelines over seeds, "
                     "the regime map (agreement and MAE against the measured `eta * sharpness`) "
                     "and the thread comparison; computed by `make studies` (the sweeps) and "
                     "aggregated by this command from:")
        for name, rel, n_done, n_left in studies_result.sweeps:
            lines.append(f"  - [{name}]({rel}): {n_done} finished runs"
                         + (f", {n_left} not finished (left out)" if n_left else ""))
    return lines


def _runs_lines(preset: str, runs: list, figures: dict, machine: dict) -> list[str]:
    """The machine, then per study its settings, what it found and its two figures."""
    lines: list[str] = []
    lines += [
        "",
        "## Machine",
        "",
        "| item | value |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in machine.items()]
    lines += ["", "## Studies (preset `%s`)" % preset, ""]
    for run in runs:
        s = run.summary.get("settings", {})
        info = s.get("task_info", s.get("info", {}))
        lines += [f"### {run.task}", ""]
        pat = s.get("pattern", {})
        pairs = pat.get("pairs") or []
        shown = "{" + ", ".join(f"{i}<-{j}" for i, j in pairs) + "}" if len(
            pairs) <= 6 else f"{len(pairs)} pairs"
        lines += [
            f"- status: {run.summary.get('status', '?')}, K = {run.iters}, lr = {s.get('lr')}, "
            f"dtype = {s.get('dtype')}, device = {s.get('device')}, threads = "
            f"{s.get('threads', 'not recorded')}, seed = {s.get('seed')}, pattern "
            f"`{pat.get('name')}` = {shown} (update order "
            f"{', '.join(map(str, pat.get('order', [])))}), blocks {s.get('blocks')}",
        ]
        for key in ("data", "data_source", "model", "weights", "sizes", "split"):
            if key in info:
                lines.append(f"- {key}: {info[key]}")
        line = _hvp_line(run.summary)
        if line:
            lines.append(line)
        other = {k: v for k, v in info.items() if k not in ("data", "data_source", "model",
            "weights", "sizes", "split", "hvp_method")}
        if other:
            lines.append(f"- details: `{json.dumps(other, default=str)}`")
        lines += _findings(run, s)
        if run.task in figures:
            g, w = figures[run.task]
            lines += ["", f"![gap {run.task}]({g})", "", f"![winners {run.task}]({w})", ""]
    return lines


def _timings_lines(runs: list, studies_result, timings: dict, failures: list) -> list[str]:
    """What each stage took here, what the runs took when computed, and the failures."""
    lines: list[str] = []
    lines += [
        "## Timings (this machine, this run)",
        "",
        "| stage | seconds |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:.1f} |" for k, v in timings.items()]
    recorded = [(r.task, (r.summary.get("timing") or {}).get("elapsed_s_total")) for r in runs]
    recorded = [(t, v) for t, v in recorded if isinstance(v, (int, float))]
    if recorded:
        lines += ["", "When they were computed, the studies' runs took "
                  + ", ".join(f"{t} {v:.0f} s" for t, v in recorded)
                  + f" ({sum(v for _, v in recorded) / 60:.1f} min in all; `summary.json` timing, "
                    f"wall seconds); a reused run costs nothing here, `--fresh` recomputes them."]
    if studies_result is not None and studies_result.timing_table:
        lines += ["", "The sweeps of `make studies` (not run by this command; wall seconds per run "
                      "from each `summary.json`):", "", studies_result.timing_table]
    if failures:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in failures]
    return lines
