"""``optimizers.md``: the optimizer studies of
:mod:`crosscurv.experiments.studies.optimizers.runner`,
from their records.

Per study, variant and seed, from the copied records only: the measured gap (:func:`measured_gap`)
and winner per iteration (``J``: ``gap > 0``; ``G``: ``gap < 0``; ``.``: ``|gap| <= gap_err``), its
switch points and agreement with plain ``sgd`` of the same seed; the Table 1 rows of the generalized
estimates with ``MAE / mean |gap|``; and findings computed from those numbers.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from functools import partial

import numpy as np
from tabulate import tabulate

from crosscurv.experiments.studies.optimizers.plan import STUDIES, run_dir
from crosscurv.experiments.reports.numbers import number
from crosscurv.experiments.reports.table import load_run, table_rows

#: Infinite values are written ``nan`` here, like missing ones.
_num = partial(number, infinite="nan")

__all__ = ["winners", "error_bars", "switch_points", "study_runs", "render", "write_report"]

EST = ("recursive", "cumulative", "jc_only")
LABEL = {"recursive": "Recursive", "cumulative": "Cumulative", "jc_only": "JC-only"}


def winners(gap, gap_err=None) -> str:
    """``J`` / ``G`` / ``.`` per iteration (module docstring)."""
    gap = np.asarray(gap, dtype=float)
    err = np.zeros_like(gap) if gap_err is None else np.nan_to_num(np.asarray(gap_err, dtype=float))
    out = []
    for g, e in zip(gap, err):
        if not math.isfinite(g) or abs(g) <= e:
            out.append(".")
        else:
            out.append("J" if g > 0 else "G")
    return "".join(out)


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.1f}%"


def error_bars(columns, estimate: str) -> dict:
    """How the record's error bar and certified winner of ``estimate`` fared: ``calibrated``
    (percent of the iterations with a finite ``*_err`` where ``|estimate - gap| <= err``; NaN
    without one), and the certified winners' ``certified``, ``correct``, ``coverage`` and
    ``precision`` (:func:`crosscurv.numeric.metrics.certified_metrics`)."""
    from crosscurv.numeric.metrics import calibration, certified_metrics

    gap, est = columns["gap"], columns[estimate]
    err = columns.get(f"{estimate}_err", [math.nan] * len(gap))
    finite = [(g, e, r) for g, e, r in zip(gap, est, err) if math.isfinite(r)]
    calibrated = calibration(*zip(*finite)) if finite else math.nan
    cert = columns.get(f"{estimate}_cert", [0.0] * len(gap))
    m = certified_metrics(gap, est, cert, columns.get("gap_err"))
    return {"calibrated": calibrated, "certified": m["certified"], "correct": m["correct"],
            "coverage": m["coverage"], "precision": m["precision"]}


def estimate_winners(est) -> str:
    """The winner an estimate predicts (``J``/``G``; ``0`` for an exact zero, ``?`` for a non-finite
    value)."""
    out = []
    for x in np.asarray(est, dtype=float):
        out.append("?" if not math.isfinite(x) else ("J" if x > 0 else ("G" if x < 0 else "0")))
    return "".join(out)


def switch_points(timeline: str) -> list[int]:
    """The iterations ``k`` (1-based) whose decided winner differs from the previous decided one."""
    out, last = [], None
    for k, w in enumerate(timeline, start=1):
        if w not in "JG":
            continue
        if last is not None and w != last:
            out.append(k)
        last = w
    return out


def _agreement(a: str, b: str) -> tuple[int, int]:
    """Iterations where both timelines are decided and equal, out of those where both are decided.
    """
    both = [(x, y) for x, y in zip(a, b) if x in "JG" and y in "JG"]
    return sum(x == y for x, y in both), len(both)


def study_runs(root: str, study, seeds) -> dict:
    """``{(variant label, seed): RunRecords}`` for the runs of ``study`` under ``root`` that have
    records."""
    out = {}
    for v in study.variants:
        for s in seeds:
            path = run_dir(root, study.task, v, s)
            if os.path.isfile(os.path.join(path, "records.csv")):
                out[(v.label, s)] = load_run(path)
    return out


def _status(run) -> str:
    st = run.summary.get("status", "?")
    want = run.summary.get("settings", {}).get("iters")
    return f"{st} {run.iters}/{want}" if st != "complete" else f"complete ({run.iters})"


#: ``MAE / mean |gap|`` at or below :data:`FOLLOWS`: the estimate follows the gap; up to
#: :data:`LOST`: its error is
#: comparable to the gap; above: it does not follow the gap.
FOLLOWS, LOST = 0.5, 1.0


def _verdict(rel: float) -> str:
    if not math.isfinite(rel) or rel > LOST:
        return "does not follow the gap"
    if rel <= FOLLOWS:
        return "follows the gap"
    return "errors comparable to the gap"


def measured_gap(run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(gap, err, plain)``: the record's ``gap`` and ``gap_err``, and where they are the plain
    difference.

    A run records the segment integral where it is the more precise measurement and the losses do
    not refute it, else ``loss_s - loss_jc`` with its rounding bound
    (:func:`crosscurv.numeric.gap.reconcile`); ``plain`` marks the latter iterations.
    """
    from crosscurv.numeric.gap import difference_error

    c = run.columns
    dt = run.summary.get("settings", {}).get("dtype", "float32")
    a, b, gap, err = c["loss_jc"], c["loss_s"], c["gap"], np.nan_to_num(c["gap_err"], nan=np.inf)
    r = np.array([difference_error(s_, j_, dt) for s_, j_ in zip(b, a)])
    plain = (gap == b - a) & (err == r)
    return gap, err, plain


def _study_section(study, runs: dict, seeds, summary: list) -> tuple[list[str], list[str]]:
    """Markdown lines of one study and its findings; appends the study's rows to ``summary``."""
    lines = [f"## {study.title} (`{study.name}`)", "", f"Question: {study.question}.", ""]
    findings: list[str] = []
    if not runs:
        lines += ["No runs yet.", ""]
        return lines, [f"{study.name}: no runs yet."]
    any_run = next(iter(runs.values()))
    s = any_run.summary.get("settings", {})
    lines += [f"Task `{study.task}`, preset `{s.get('preset')}`, pattern "
              f"`{s.get('pattern_spec')}`, "
              f"{s.get('dtype')}, K = {s.get('iters')}; seeds {', '.join(map(str, seeds))}.", ""]
    win, tl, meas = _winners_section(study, runs, seeds, findings)
    est, stats, certs = _estimates_section(study, runs, seeds, tl, meas)
    lines += win + est
    findings += _study_findings(study, runs, seeds, tl, meas, stats)
    summary += _summary_rows(study, runs, seeds, tl, stats, certs)
    return lines, findings


def _winners_section(study, runs: dict, seeds, findings: list):
    """The measured winners per variant and seed: the table, the timelines ``tl[(label, seed)]`` and
    the measured gaps ``meas[(label, seed)]``; appends a finding per run whose gap is in part the
    plain difference."""
    base = study.baseline.label
    rows, tl, meas = [], {}, {}
    for v in study.variants:
        for sd in seeds:
            run = runs.get((v.label, sd))
            if run is None:
                rows.append([v.label, sd, "missing", "", "", "", "", ""])
                continue
            c = run.columns
            gap, err, plain = meas[(v.label, sd)] = measured_gap(run)
            t = winners(gap, err)
            tl[(v.label, sd)] = t
            sw = switch_points(t)
            agree = ""
            if v.label != base and (base, sd) in tl:
                a, n = _agreement(t, tl[(base, sd)])
                agree = f"{a}/{n}"
            ss = run.summary.get("settings", {})
            rows.append([v.label, sd, _status(run), f"{ss.get('lr')}",
                         f"{c['loss_jc'][-1]:.4g} / {c['loss_s'][-1]:.4g}",
                         f"{t.count('J')}/{t.count('G')}/{t.count('.')}", ", ".join(map(str, sw))
                         or "none", agree])
            if plain.any():
                findings.append(
                    f"{study.name}, {v.label}, seed {sd}: at {int(plain.sum())}/{len(plain)} "
                    f"iterations the gap is the plain difference L_S - L_JC (the runs too far "
                    f"apart for the segment rule to be the more precise, or its estimate refuted "
                    f"by the losses; mean abs gap {float(np.mean(np.abs(gap))):.3g}).")
    lines = ["### Measured winners", "",
             "The measured gap is the record's `gap`: the segment integral of the gradient where "
              "that is the more precise measurement and agrees with `L_S - L_JC`, else that "
              "difference (`crosscurv.numeric.gap.reconcile`; see the findings).", "",
             tabulate(rows, headers=["variant", "seed", "status", "lr", "final L_JC / L_S",
                                      "J/G/undecided", "switch points k", f"same winner as {base}"],
                       tablefmt="github",
                       disable_numparse=True), "",
             "Winner per iteration (`J`: JC ahead, `G`: the scheme ahead, `.`: undecided):", "",
             "```"]
    for (label, sd), t in tl.items():
        lines.append(f"{label:>14s} seed{sd}  {t}")
    lines += ["```", ""]
    return lines, tl, meas


def _estimates_section(study, runs: dict, seeds, tl: dict, meas: dict):
    """Table 1 rows of the generalized estimates and their predicted winners; with the per-run
    ``stats[(label, seed, estimate)] = (Correct, MAE / mean |gap|)`` and error bars ``certs``."""
    lines: list = []
    rows = []
    stats: dict = {}
    certs: dict = {}
    for v in study.variants:
        for sd in seeds:
            run = runs.get((v.label, sd))
            if run is None:
                continue
            gap = meas[(v.label, sd)][0]
            mean_gap = float(np.mean(np.abs(gap)))
            for r in table_rows(run, EST):
                e = r["estimate"]
                rel = r["mae"] / mean_gap if mean_gap > 0 else math.nan
                stats[(v.label, sd, e)] = (r["correct"], rel)
                bars = error_bars(run.columns, e)
                certs[(v.label, sd, e)] = bars
                rows.append([v.label, sd, LABEL[e], run.iters, f"{r['correct']:.1f}%",
                             f"{r['jc_hits'][0]}/{r['jc_hits'][1]}",
                             f"{r['s_hits'][0]}/{r['s_hits'][1]}", _num(r["mae"]),
                             _num(r["max_ae"]), r["undecided"], _num(rel), _pct(bars["calibrated"]),
                             f"{bars['correct']}/{bars['certified']}", _pct(bars["coverage"]),
                             _pct(bars["precision"])])
    lines += ["### Table 1 rows of the generalized estimates", "",
              "Against the record's `gap` (what `crosscurv table` prints); undecided iterations "
              "(|gap| <= gap_err) are left out of Correct. Calibrated: share of the iterations "
              "with a finite error bar (the record's `*_err`) where |estimate - gap| <= err; "
              "certified: correct / certified winners (the record's `*_cert`); Coverage: certified "
              "share of the decided iterations; Precision: correct among the certified "
              "(docs/error_estimates.md, 'Optimizer runs').", "",
              tabulate(rows, headers=["variant", "seed", "estimate", "K", "Correct", "JC hits",
                                      "GS hits", "MAE", "Max. AE", "undecided",
                                      "MAE / mean abs gap", "Calibrated", "certified", "Coverage",
                                      "Precision"],
                       tablefmt="github", disable_numparse=True), ""]
    lines += ["Predicted winners of the recursive and cumulative estimates (same alphabet; `?`: "
              "not finite):", "",
              "```"]
    for v in study.variants:
        for sd in seeds:
            run = runs.get((v.label, sd))
            if run is None:
                continue
            lines.append(f"{v.label:>14s} seed{sd}  measured   {tl[(v.label, sd)]}")
            for e in ("recursive", "cumulative"):
                lines.append(f"{'':>14s}        {e:<10s} {estimate_winners(run.columns[e])}")
    lines += ["```", ""]
    return lines, stats, certs


def _study_findings(study, runs: dict, seeds, tl: dict, meas: dict, stats: dict) -> list:
    """The findings against the baseline and of each estimate, per variant and seed."""
    base = study.baseline.label
    findings: list = []
    for v in study.variants[1:]:
        for sd in seeds:
            key, bkey = (v.label, sd), (base, sd)
            if key not in tl or bkey not in tl:
                continue
            a, n = _agreement(tl[key], tl[bkey])
            sw, bsw = switch_points(tl[key]), switch_points(tl[bkey])
            moved = ("the same switch points" if sw == bsw
                     else f"switch points {sw or 'none'} against {bsw or 'none'}")
            findings.append(f"{study.name}, {v.label}, seed {sd}: the measured winner equals plain "
                            f"sgd's at {a}/{n} decided iterations ({_count(tl[key])} against "
                            f"{_count(tl[bkey])}); {moved}.")
    for v in study.variants:
        for sd in seeds:
            got = [stats.get((v.label, sd, e)) for e in EST]
            if any(g is None for g in got):
                continue
            parts = [f"{LABEL[e]} {c:.0f}% correct, MAE/mean abs gap {_num(r)}: {_verdict(r)}"
                     for e, (c, r) in zip(EST, got)]
            findings.append(f"{study.name}, {v.label}, seed {sd}: " + "; ".join(parts) + ".")
            run = runs[(v.label, sd)]
            gap = meas[(v.label, sd)][0]
            g1, c1 = float(gap[0]), float(run.columns["cumulative"][0])
            if abs(g1) > 0 and abs(c1) > 100 * abs(g1):
                findings.append(f"{study.name}, {v.label}, seed {sd}: already at k = 1 (one step "
                                f"from a common point and zero state) the cumulative estimate is "
                                f"{abs(c1 / g1):.3g} times the gap ({c1:.3g} against {g1:.3g}): "
                                f"the linearization fails at the first step.")
                rest, rec = gap[1:], run.columns["recursive"][1:]
                if len(rest):
                    rel = float(np.mean(np.abs(rec - rest)) / np.mean(np.abs(rest)))
                    agree = float(np.mean(np.sign(rec) == np.sign(rest))) * 100
                    findings.append(f"{study.name}, {v.label}, seed {sd}: from k = 2 on (one "
                                    f"tangent step from the measured differences) the recursive "
                                    f"estimate has MAE/mean abs gap {_num(rel)} and the gap's sign "
                                    f"at {agree:.0f}% of the iterations: {_verdict(rel)}.")
    return findings


def _summary_rows(study, runs: dict, seeds, tl: dict, stats: dict, certs: dict) -> list:
    """The summary rows: means over the seeds that have records."""
    base = study.baseline.label
    summary: list = []
    for v in study.variants:
        have = [sd for sd in seeds if (v.label, sd) in runs]
        if not have:
            continue
        row = [study.name, v.label, ",".join(map(str, have))]
        for e in ("recursive", "cumulative"):
            cs = [stats[(v.label, sd, e)][0] for sd in have]
            rs = [stats[(v.label, sd, e)][1] for sd in have]
            row += [f"{np.mean(cs):.1f}%", _num(float(np.median(rs)))]
        for e in ("recursive", "cumulative"):
            got = [certs[(v.label, sd, e)] for sd in have]
            ok, n = sum(b["correct"] for b in got), sum(b["certified"] for b in got)
            row += [f"{ok}/{n} ({_pct(100.0 * ok / n if n else math.nan)})"]
        if v.label == base:
            row += ["(baseline)"]
        else:
            agree = [_agreement(tl[(v.label, sd)], tl[(base, sd)]) for sd in have if (base,
                                                                                      sd) in tl]
            row += [f"{sum(a for a, _ in agree)}/{sum(n for _, n in agree)}" if agree else ""]
        row += ["; ".join(f"s{sd}: {','.join(map(str, switch_points(tl[(v.label, sd)]))) or '-'}"
                          for sd in have)]
        summary.append(row)
    return summary


def _count(t: str) -> str:
    return f"J {t.count('J')}, G {t.count('G')}, undecided {t.count('.')}"


def copy_runs(src_root: str, dst_root: str, seeds) -> list[str]:
    """Copy ``records.csv`` and ``summary.json`` of every planned run (never a checkpoint)."""
    copied = []
    if os.path.abspath(src_root) == os.path.abspath(dst_root):
        return copied
    for st in STUDIES:
        for v in st.variants:
            for sd in seeds:
                src, dst = run_dir(src_root, st.task, v, sd), run_dir(dst_root, st.task, v, sd)
                if not os.path.isfile(os.path.join(src, "records.csv")):
                    continue
                os.makedirs(dst, exist_ok=True)
                for f in ("records.csv", "summary.json"):
                    if os.path.isfile(os.path.join(src, f)):
                        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
                        copied.append(os.path.join(dst, f))
    return copied


def render(root: str, seeds, iters: int, command: str) -> str:
    lines = [
        "# Optimizers beyond the paper: studies",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M %Z')} from the records under "
        f"`{_shown(root)}` (records and summaries only; `crosscurv table DIR` gives the same Table "
        f"1 rows per run).",
        "",
        "Every run is `crosscurv run TASK --preset default --seed S --iters K` with the variant's "
        "flags: JC and the task's pattern (`gs`) from the same start, both with the same optimizer "
        "from zero state; the `recursive`, `cumulative` and `jc_only` columns are the generalized "
        "estimates (docs/optimizers.md, 'Optimizers beyond the paper'). `K` is shorter than the "
        "presets' (300-500) so that all runs fit a shared 2-core CPU; 'switch points' and winners "
        "are over these `K` iterations only.",
        "",
    ]
    findings, body, summary = [], [], []
    for st in STUDIES:
        runs = study_runs(root, st, seeds)
        sec, f = _study_section(st, runs, seeds, summary)
        body += sec
        findings += f
    top = [f"- {row[0]}, {row[1]}: recursive Correct {row[3]}, MAE/gap {row[4]}; the measured "
           f"winner is sgd's at {row[9]} iterations."
           for row in summary if row[9] != "(baseline)"][:5]
    lines[2:2] = top + [""]
    lines += [
        "## Summary",
        "",
        f"Against the measured gap (the record's `gap`, or `L_S - L_JC` where the runs are far "
        f"apart; see each study). Correct: the paper's `Correct_K` (mean over seeds); MAE/gap: "
        f"`MAE / mean |gap|` (median over seeds); an estimate *follows* the gap when this is at "
        f"most {FOLLOWS}, and does not above {LOST:g}. Certified correct: correct / certified "
        f"winners over the seeds (precision), from the records' error bars. Same winner: "
        f"iterations where the measured winner equals plain sgd's, of those both decided (all "
        f"seeds).",
        "",
        tabulate(summary, headers=["study", "variant", "seeds", "Recursive correct",
                                   "Recursive MAE/gap", "Cumulative correct", "Cumulative MAE/gap",
                                   "Recursive certified correct", "Cumulative certified correct",
                                   "same winner as sgd",
                                   "switch points k"], tablefmt="github", disable_numparse=True),
        "",
        "## Findings (computed from the records)",
        "",
    ] + [f"* {f}" for f in findings] + [""] + body
    return "\n".join(lines) + "\n"


def _shown(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def write_report(runs: str, out: str, seeds, iters: int) -> str:
    """Copy the runs into ``OUT/optimizers/runs`` and write ``OUT/optimizers.md``; returns its path.
    """
    dst = os.path.join(out, "optimizers", "runs")
    copy_runs(runs, dst, seeds)
    cmd = (f"python -m crosscurv.experiments.studies.optimizers.runner report --runs {runs} "
           f"--out {out}")
    text = render(dst, seeds, iters, cmd)
    path = os.path.join(out, "optimizers.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path
