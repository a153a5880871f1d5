"""``studies.md``: Table 1 over seeds, the regime map and the thread comparison, with their figures.

:func:`write_studies_report` reads sweep folders (:mod:`~crosscurv.experiments.studies.collect`),
computes every number with :mod:`~crosscurv.experiments.studies.seeds`,
:mod:`~crosscurv.experiments.studies.regime` and :mod:`~crosscurv.experiments.studies.threads`,
draws :mod:`~crosscurv.experiments.studies.figures`, and writes ``OUT/studies.md`` and
``OUT/figures/studies_*.png``.  Every sentence that states a finding is
computed from the records; the report says how many runs and seeds each
number covers and which runs had not finished.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from crosscurv.experiments.reports.table import ESTIMATE_ROWS, TABLE_ROWS

__all__ = ["StudiesResult", "write_studies_report", "STUDIES_FILE"]

STUDIES_FILE = "studies.md"


@dataclass
class StudiesResult:
    """What :func:`write_studies_report` wrote and the seeds table (markdown) for the report index.
    """

    path: Path
    figures: list = field(default_factory=list)
    seeds_table: str = ""
    coverage: str = ""
    threads_table: str = ""
    timing_table: str = ""
    # (name, path relative to out, finished runs, unfinished runs)
    sweeps: list = field(default_factory=list)
    # Table 1 over seeds inside the regime (seeds.seed_rows)
    seed_rows: list = field(default_factory=list)


def _rel(path, start) -> str:
    try:
        return os.path.relpath(str(path), str(start))
    except ValueError:
        return str(path)


def _timing_lines(sweeps: Sequence, out: Path) -> list[str]:
    """Per sweep folder and task: runs, threads, wall seconds per run (``summary.timing``), their
    sum.
    """
    from tabulate import tabulate

    body = []
    for sw in sweeps:
        for task in sw.tasks():
            rs = [r for r in sw.runs if r.task == task]
            secs = [r.seconds for r in rs if r.seconds is not None]
            th = sorted({r.threads for r in rs if r.threads is not None})
            if not secs:
                continue
            per_it = [r.seconds / r.K for r in rs if r.seconds is not None and r.K]
            body.append([f"[{sw.path.name}]({_rel(sw.path, out)})", task, str(len(rs)),
                         ",".join(map(str, th)) or "?",
                         f"{min(r.K for r in rs)}-{max(r.K for r in rs)}"
                         if len({r.K for r in rs}) > 1 else str(rs[0].K),
                         f"{sum(secs) / len(secs):.0f} [{min(secs):.0f}, {max(secs):.0f}]",
                         f"{sum(per_it) / len(per_it):.3g}", f"{sum(secs) / 60:.1f}"])
    if not body:
        return []
    head = ["sweep", "task", "runs", "threads per run", "K", "seconds per run, mean [min, max]",
            "seconds per iteration", "run minutes in all"]
    return [tabulate(body, headers=head, tablefmt="github", disable_numparse=True)]


def write_studies_report(out, seeds=None, regime: Sequence = (), threads: Sequence = (),
                         command: str | None = None) -> StudiesResult:
    """Write ``out/studies.md`` and its figures from sweep folders.

    Args:
        out: report folder (created); figures go to ``out/figures``. seeds: a sweep folder, or
            several pooled (:func:`collect.read_sweeps`), with one run per seed of each task (Table
            1 over seeds).
        regime: sweep folders of learning-rate grids (the regime map); the
            seeds sweep's runs enter it cut to the grid's K (:func:`regime.regime_points`).
        threads: sweep folders of runs repeated with another thread count than
            the seeds sweep's (the reproducibility comparison).
        command: the command line to print as the way to regenerate the file.

    Raises:
        DataError: a folder is not a sweep folder or holds no finished run (one line).
    """
    from crosscurv.experiments.studies.collect import read_sweep, read_sweeps
    from crosscurv.experiments.tasks.errors import DataError

    if not seeds and not regime:
        raise DataError("nothing to aggregate: give a seeds sweep folder and/or regime sweep "
                        "folders")
    t0 = time.perf_counter()
    out = Path(out)
    if isinstance(seeds, (str, os.PathLike)):
        seeds = [seeds]
    seeds_sw = read_sweeps(seeds) if seeds else None
    regime_sw = [read_sweep(d) for d in regime]
    threads_sw = [read_sweep(d) for d in threads]
    if threads_sw and seeds_sw is None:
        raise DataError("a thread comparison needs the seeds sweep folder (--seeds) to compare "
                        "against")
    result = StudiesResult(out / "studies_placeholder")
    found_rows: dict = {}  # label -> Table 1 over seeds rows, for the findings at the top
    found_cert: list = []
    points: list = []
    pairs: list = []
    lines = ["# Studies over seeds and the regime map", "", *_intro(command)]
    if seeds_sw is not None:
        lines += _stale_certificate_lines(seeds_sw.runs)
    if seeds_sw is not None:
        lines += _seeds_lines(seeds_sw, regime_sw, out, result, found_rows, found_cert)
    if regime_sw:
        part, points = _regime_lines(regime_sw, seeds_sw, out, result)
        lines += part
    if threads_sw:
        part, pairs = _threads_lines(threads_sw, seeds_sw, out, result)
        lines += part
    every = [*(seeds_sw.parts if seeds_sw is not None else []), *regime_sw, *threads_sw]
    lines += _cost_lines(every, out, result)
    lines += [f"Aggregation took {time.perf_counter() - t0:.1f} s."]
    lines[2:2] = _findings(found_rows, found_cert, points, pairs) + [""]
    out.mkdir(parents=True, exist_ok=True)
    path = out / STUDIES_FILE
    from crosscurv.numeric.records import atomic_write_text

    atomic_write_text(str(path), "\n".join(lines) + "\n")
    result.path = path
    return result


def _intro(command: str | None) -> list[str]:
    """The provenance and what every estimate and an undecided iteration are."""
    return [(("Generated by `" + command + "`. ") if command else "")
            + "Every number and every sentence below is computed from the run records in the sweep "
              "folders named here; nothing is edited by hand. Estimates: recursive (Theorem 2 with "
              "the measured difference), cumulative (Theorem 3), jc_only (the cumulative estimate "
              "from the JC run alone). An iteration whose measured |gap| is within its error bound "
              "`gap_err` is undecided: no measured winner, left out of the hits and of "
              "Correct.", ""]


def _stale_certificate_lines(runs: Sequence) -> list[str]:
    """A line when some runs' recorded ``*_cert`` columns differ from what the current certificate
    (:func:`crosscurv.numeric.certificate.record_certificates`) gives on their records."""
    import numpy as np

    from crosscurv.experiments.reports.table import _with_certificates

    stale = 0
    for r in runs:
        now = _with_certificates(r.run)
        cols = r.run.columns
        if now is not cols and any(
                not np.array_equal(np.asarray(cols[c]), np.asarray(now[c]), equal_nan=True)
                for c in now if c.endswith("_cert") and c in cols):
            stale += 1
    if not stale:
        return []
    return [f"Stale: {stale} of {len(runs)} seeds-study runs hold `*_cert` columns recorded under "
            f"an older certificate. The recorded-certificate columns below show them as recorded; "
            f"Table 1 (table1.md, README.md) recomputes them with the current one.", ""]


def _seeds_lines(seeds_sw, regime_sw, out: Path, result: StudiesResult, found_rows: dict,
                 found_cert: list) -> list[str]:
    """The sections of the seeds study: where certified predictions hold (figure), Table 1 over
    seeds inside the regime and at the edge, their certified winners, crossings and winner
    timelines; fills ``result`` (seeds table, rows, coverage, figures), ``found_rows`` and
    ``found_cert``."""
    from crosscurv.experiments.studies import figures as figs
    from crosscurv.experiments.studies.collect import SweepRuns
    from crosscurv.experiments.studies.regime import regime_point, render_crossing_table
    from crosscurv.experiments.studies.seeds import (certified_rows, describe_coverage,
                                                     render_certified_summary,
                                                     render_certified_table, render_seeds_table,
                                                     seed_groups, seed_rows, split_edge,
                                                     summarize_certified)

    fig_dir = out / "figures"
    lines: list[str] = []
    inside, edge = split_edge(seeds_sw.runs)
    studies = {"default": inside, "edge": edge}
    if regime_sw:
        studies["regime grids"] = [r for sw in regime_sw for r in sw.runs]
    p = figs.certified_regime_figure(studies, fig_dir / "studies_certified_regime.png")
    if p is not None:
        result.figures.append(p)
        lines += ["## Where certified predictions hold", "",
                  "Precision (correct among the certified iterations) and coverage (certified "
                  "share of the decided iterations) of each estimate's certified winner (the "
                  "defect interval, below) against `eta * sharpness_k` (`max(lambda_max, "
                  "sharpness)`), every study's runs pooled per bin: solid the `default` presets, "
                  "dashed the `edge` preset, dotted the learning-rate grids. Goals dotted: "
                  "precision 99%, coverage 80%; the edge of stability dashed.", "",
                  "![precision and coverage of the certified winners against "
                  f"eta*sharpness]({_rel(p, out)})",
                  ""]
    for label, runs, title, intro in (
            ("default", inside, "## Table 1 over seeds (default presets, inside the regime)",
             "The `default` presets' learning rates keep every task below the edge of "
             "stability by the rule "
             "of `crosscurv.experiments.studies.regime.regime_learning_rate` (docs/studies.md)."),
            ("edge", edge, "## Edge-of-stability study (the `edge` preset)",
             "The `edge` preset: the same tasks at the learning rates that drive FL and LoRA past "
             "`eta * lambda_max = 2` (the `default` rates before the regime rule); runs written "
             "before the preset had its name say `preset: default` at these rates.")):
        if not runs:
            continue
        ids = {id(r) for r in runs}  # read_sweeps keeps its parts' run objects
        parts = [p for p in seeds_sw.parts if ids & {id(r) for r in p.runs}] or list(seeds_sw.parts)
        here = {p.path.name for p in parts}
        unfinished = [n for n in seeds_sw.unfinished if "/" not in n or n.split("/", 1)[0] in here]
        sub = SweepRuns(parts[0].path, runs, unfinished, seeds_sw.info, parts)
        folders = ", ".join(f"[{p.path.name}]({_rel(p.path, out)})" for p in parts)
        rows = seed_rows(runs, TABLE_ROWS)
        table = render_seeds_table(rows)
        found_rows[label] = rows
        if label == "default":
            result.seeds_table = table
            result.seed_rows = rows
            result.coverage = describe_coverage(sub)
        lines += [title, "", intro, "",
                  f"Sweep folder(s) {folders} (`sweep.csv`, `sweep.md`, `runs/<name>/records.csv` "
                  f"and `summary.json`). Runs covered: {describe_coverage(sub)} Where the seeds of "
                  f"a task ran to different K, every seed is cut to the smallest (a run's first K "
                  f"records are the records of a K-iteration run with the same settings).", "",
                  "Each cell is the mean over the seeds and [min, max] (one value when every seed "
                  "gives the same); hits are mean h / mean n with the ranges of h and n. `paper`: "
                  "the paper's Table 1 (one run, K = 500, the paper's models, data and GPU), for "
                  "comparison in kind.",
                  "", table, ""]
        cert = certified_rows(runs)
        if cert and label == "default":
            found_cert.extend(summarize_certified(cert))
        if cert:
            lines += ["Certified winners, pooled over the runs of each task (counts summed): the "
                      "defect interval (`crosscurv.numeric.error_estimates.defect_certificates`: "
                      "the range of the signed realised errors `gap - estimate` of the last 10 "
                      "iterations, widened by its own width; certified when the estimate plus that "
                      "interval excludes 0, or the recorded bound certifies, while `eta * "
                      "sharpness_j < 2` for every `j <= k`) before the first crossing of 2 and "
                      "over all iterations, the certificate the records hold (`*_cert`: "
                      "`crosscurv.numeric.certificate` for runs recorded since it, `|estimate| > "
                      "*_err` below the edge before) over all iterations, and the defect "
                      "interval's calibration (share of the iterations where it is defined that it "
                      "holds `gap - estimate`, mean over the runs). Cells: Coverage / Precision "
                      "(correct/certified of decided).", "",
                      render_certified_summary(summarize_certified(cert)), "",
                      "Per run and estimate (`n/a` for the recorded certificate: records without "
                      "the error columns, or nothing "
                      "certified):", "", render_certified_table(cert), ""]
        seed_points = [regime_point(r, "seeds") for rs in seed_groups(runs).values() for r in rs]
        lines += ["The regime along each run (the same K as the table): the largest `eta * "
                  "sharpness_k`, the first `k` where it reaches 2 (the edge of stability), and "
                  "Correct over the iterations "
                  "before that `k` and from it.", "", render_crossing_table(seed_points), ""]
        for (task, *_), rs in seed_groups(runs).items():
            p = figs.seeds_timeline(rs, fig_dir
                / f"studies_seeds_{task}{'' if label == 'default' else '_' + label}.png",
                                    f"{task} (eta = {rs[0].lr:g}, {len(rs)} seeds, {label})")
            result.figures.append(p)
            lines += [f"![winners over seeds, {task}, {label}]({_rel(p, out)})", ""]
    return lines


def _regime_lines(regime_sw, seeds_sw, out: Path, result: StudiesResult) -> tuple[list[str], list]:
    """The regime map: the indicators per run, a paragraph per task and the figures; returns the
    lines and the regime points."""
    from crosscurv.experiments.studies import figures as figs
    from crosscurv.experiments.studies.regime import (regime_points, regime_sentence,
                                                      render_regime_table, small_step_note)

    fig_dir = out / "figures"
    lines: list[str] = []
    points = regime_points(regime_sw, seeds_sw)
    lines += ["## Regime map", "",
              "Learning-rate grids, several seeds each: "
              + ", ".join(f"[{sw.path.name}]({_rel(sw.path, out)}) ({len(sw.runs)} finished runs"
                          + (f", {len(sw.unfinished)} not finished and left out" if sw.unfinished
                             else "")
                          + ")" for sw in regime_sw)
              + (". The preset's own learning rate enters as the first K records of the seeds "
                 "study's runs (a run's first K records are the records of a K-iteration run with "
                 "the same settings)."
                 if seeds_sw is not None else "."),
              "",
              "Regime indicators per run, from the `sharpness` column (the power-iteration "
              "estimate of the eigenvalue of `H_JC^k` largest in magnitude, warm-started, so an "
              "underestimate in the first iterations, and negative where a negative eigenvalue "
              "dominates): the largest `eta * sharpness_k` reached, and the first `k` where it "
              "reaches 2 (the edge of stability). Cells: mean [min, max] over the seeds.", "",
              render_regime_table(points), ""]
    tasks = []
    for p in points:
        if p.task not in tasks:
            tasks.append(p.task)
    for task in tasks:
        ps = [p for p in points if p.task == task]
        lines += [f"### {task}", "", f"- well inside the regime: {small_step_note(ps)}"]
        for est in ESTIMATE_ROWS:
            lines.append(f"- {regime_sentence(ps, est)}")
        crossed = [p for p in ps if p.first_cross is not None]
        if crossed:
            lines.append(f"- before and from the first crossing of 2 (the {len(crossed)} runs that "
                         f"cross), Correct mean: " + "; ".join(
                             f"{est} {_mean([p.metrics[est]['correct_before'] for p in crossed])} "
                             f"before, {_mean([p.metrics[est]['correct_after'] for p in crossed])} "
                             f"from it"
                             for est in ESTIMATE_ROWS if all(est in p.metrics for p in crossed))
                         + ".")
        lines.append("")
    for fn, name, what in ((figs.regime_curvature_figure, "studies_regime_sharpness.png",
                            "against the largest eta*sharpness"),
                           (figs.regime_crossing_figure, "studies_regime_crossing.png",
                            "against the first crossing of 2")):
        p = fn(points, fig_dir / name)
        if p is not None:
            result.figures.append(p)
            lines += [f"![regime map {what}]({_rel(p, out)})", ""]
    return lines, points


def _threads_lines(threads_sw, seeds_sw, out: Path, result: StudiesResult) -> tuple[list[str],
                                                                                    list]:
    """The thread comparison: each thread-count sweep matched with the seeds study; returns the
    lines and the matched pairs."""
    from crosscurv.experiments.studies.threads import match_runs, render_comparison

    pairs: list = []
    lines: list[str] = []
    for sw in threads_sw:
        pairs += match_runs(seeds_sw.runs, sw.runs)
    lines += ["## Reproducibility: the same study with another thread count", "",
              "Runs of the seeds study repeated with another number of intra-op threads: "
              + ", ".join(f"[{sw.path.name}]({_rel(sw.path, out)})" for sw in threads_sw)
              + ". Float32 sums run in an order set by the thread count. So this measures "
                "what another machine with another thread setting would see.", "",
              "Compared over the records both runs hold: the first iteration where any "
              "column differs, the first where the observed winner differs, the winner "
              "counts, and per estimate Correct and the change of MAE.", "",
              "A control (1 vs 1 thread) that differs is not the same computation. The column of "
              "other settings says what the summaries record as different. A setting only one run "
              "records (`block_lr`, `optimizer`) marks another version of the code; another "
              "`theta0_sha256`, another start. Where it says none, the records cannot say why.", ""]
    if pairs:
        result.threads_table = render_comparison(pairs)
        lines += [result.threads_table, ""]
    else:
        lines += ["(no run of these folders matches a seeds-study run with another thread count)",
                  ""]
    return lines, pairs


def _cost_lines(every: list, out: Path, result: StudiesResult) -> list[str]:
    """What the runs cost, per sweep folder and task; fills ``result`` (sweeps, timing table)."""
    result.sweeps = [(s.path.name, _rel(s.path, out), len(s.runs), len(s.unfinished))
                     for s in every]
    timing = _timing_lines(every, out)
    result.timing_table = timing[0] if timing else ""
    if not timing:
        return []
    return ["## What the runs cost", "",
            "Wall seconds of each run (`summary.json` timing, all sessions of a resumed "
            "run), on the machine "
            "that ran them; with two runs at a time on two cores each run gets about one core.", "",
            *timing, ""]


def _mean(vals) -> str:
    vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
    return f"{sum(vals) / len(vals):.1f}%" if vals else "n/a"


_LABEL = {"mlp": "DNN", "fl": "FL", "lora": "LoRA"}


def _by_task(rows, estimate: str) -> str:
    """``DNN 99.0%, FL 99.3%`` (mean Correct over the seeds) of ``estimate`` in Table 1 over "
    "seeds rows."""
    most = max((len(r["seeds"]) for r in rows), default=0)
    return ", ".join(f"{_LABEL.get(r['task'], r['task'])} {r['correct'][0]:.1f}%"
                     + (f" ({len(r['seeds'])} of {most} seeds)" if len(r["seeds"]) < most else "")
                     for r in rows
                     if r["estimate"] == estimate and r["correct"].n)


def _findings(rows: dict, cert: list, points: list, pairs: list) -> list[str]:
    """At most five lines: Table 1 over seeds inside the regime and at the edge, the regime map, the
    certified winners and the thread comparison, each computed from what the sections below show."""
    out = []
    inside = rows.get("default") or []
    if inside:
        K = max(r["K"] for r in inside)
        out.append(f"- Inside the regime (K = {K}): recursive Correct "
                   f"{_by_task(inside, 'recursive')}; "
                   f"the majority winner {_by_task(inside, 'majority')}; the one-step sign "
                   f"{_by_task(inside, 'one_step') or 'n/a'}.")
        jc = ", ".join(f"{_LABEL.get(r['task'], r['task'])} {r['n_jc'][0]:.3g}" for r in inside
                       if r["estimate"] == "recursive")
        out.append(f"- JC has the lower loss in {jc} of {K} iterations (mean over the seeds).")
    edge = rows.get("edge") or []
    if edge:
        out.append("- At the edge of stability (the `edge` preset): recursive Correct "
                   f"{_by_task(edge, 'recursive')}.")
    if points:
        tops = []
        for task in sorted({p.task for p in points}):
            ok = [p.max_eta_sharpness for p in points
                  if p.task == task and "recursive" in p.metrics
                  and p.metrics["recursive"]["correct"] >= 95.0
                  and p.max_eta_sharpness == p.max_eta_sharpness]
            name = _LABEL.get(task, task)
            tops.append(f"{name} {max(ok):.3g}" if ok else f"{name} none")
        out.append("- Regime map: the largest eta*sharpness of a run where recursive reaches 95% "
                   "is "
                   + ", ".join(tops) + ".")
    rec = [c for c in cert
           if c["estimate"] == "recursive" and c["before"]["decided"]]
    if rec and len(out) < 5:
        out.append("- Certified winners of recursive (defect interval, before the edge): "
                   "coverage / precision "
                   + ", ".join(f"{_LABEL.get(c['task'], c['task'])} "
                               f"{c['before']['coverage']:.1f}% / "
                               + ("n/a" if c["before"]["precision"] != c["before"]["precision"]
                                  else f"{c['before']['precision']:.1f}%") for c in rec) + ".")
    return out[:5]
