"""Table 1 of the paper, redone from run directories.

Per run directory and estimate column (cumulative, recursive and, beyond the paper, ``jc_only``):
the Section 5.1 metrics (``Correct_K``, ``JC hits``, ``GS hits``, ``MAE``, ``Max. AE``) and the
undecided iterations (``|gap| <= gap_err``; :mod:`crosscurv.numeric.metrics`), then ``Coverage`` and
``Precision`` of the certified winners (:mod:`crosscurv.numeric.certificate`) and ``Calibrated``
(``|estimate - gap| <= err``; ``n/a`` for older records). The best value per metric within a task is
marked (bold in markdown, ``*`` in plain text), ties included. Baseline rows
(:data:`BASELINE_ROWS`): ``majority`` (the best constant predictor) and ``one_step``
(:mod:`crosscurv.experiments.reports.one_step_along_jc`). :data:`PAPER_TABLE1`: the paper's numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from tabulate import tabulate

from crosscurv.experiments.reports.numbers import number, percent
from crosscurv.experiments.tasks.errors import DataError

__all__ = ["PAPER_TABLE1", "BASELINE_ROWS", "TABLE_ROWS", "RunRecords", "load_run", "table_rows",
           "render_table", "paper_comparison", "COLUMN_NOTES", "SETTINGS", "run_settings",
           "differing_settings", "column_notes"]

ESTIMATE_ROWS = ("cumulative", "recursive", "jc_only")
#: the baselines the estimates must beat (module docstring)
BASELINE_ROWS = ("majority", "one_step")
TABLE_ROWS = ESTIMATE_ROWS + BASELINE_ROWS
ESTIMATE_LABELS = {"cumulative": "Cumulative", "recursive": "Recursive",
                   "jc_only": "JC-only (beyond paper)", "majority": "Baseline: majority winner",
                   "one_step": "Baseline: one-step eta^2 C_S"}
TASK_LABELS = {"mlp": "DNN", "fl": "FL", "lora": "LoRA"}

#: The paper's Table 1 (K = 500): task -> estimate -> metrics.
PAPER_TABLE1 = {
    "mlp": {
        "cumulative": {"correct": 98.0, "jc_hits": (45, 45), "s_hits": (445, 455), "mae": 5.58e-4,
                       "max_ae": 2.09e-3},
        "recursive": {"correct": 100.0, "jc_hits": (45, 45), "s_hits": (455, 455), "mae": 1.15e-4,
                      "max_ae": 4.86e-4},
    },
    "fl": {
        "cumulative": {"correct": 83.4, "jc_hits": (25, 28), "s_hits": (392, 472), "mae": 2.95e-1,
                       "max_ae": 2.28e1},
        "recursive": {"correct": 93.2, "jc_hits": (25, 28), "s_hits": (441, 472), "mae": 1.79e-2,
                      "max_ae": 3.86e-1},
    },
    "lora": {
        "cumulative": {"correct": 97.6, "jc_hits": (74, 75), "s_hits": (414, 425), "mae": 5.31e-2,
                       "max_ae": 4.54e0},
        "recursive": {"correct": 99.6, "jc_hits": (74, 75), "s_hits": (424, 425), "mae": 5.97e-4,
                      "max_ae": 1.01e-1},
    },
}


@dataclass
class RunRecords:
    """One run directory: its columns (1-D float arrays) and its summary."""

    path: Path
    columns: dict
    summary: dict

    @property
    def task(self) -> str:
        s = self.summary.get("settings")
        s = s if isinstance(s, dict) else self.summary
        return str(s.get("task", self.path.name))

    @property
    def iters(self) -> int:
        return int(len(self.columns["k"]))


def load_run(run_dir: str | Path) -> RunRecords:
    """Read ``records.csv`` and ``summary.json`` of a run; :class:`DataError` if malformed."""
    from crosscurv.numeric.records import read_records, read_summary

    run_dir = Path(run_dir)
    rec = run_dir / "records.csv"
    summ = run_dir / "summary.json"
    if not run_dir.is_dir():
        raise DataError(f"run directory {run_dir} does not exist")
    if not rec.is_file():
        raise DataError(f"{run_dir} has no records.csv (not a crosscurv run directory)")
    summary = {}
    if summ.is_file():
        summary = read_summary(str(summ))
    rows = read_records(rec)
    if not rows:
        raise DataError(f"{rec} holds no records")
    cols = {name: np.array([float(r[name]) for r in rows]) for name in rows[0]}
    from crosscurv.experiments.reports.one_step_sidecar import read_one_step

    one_step = read_one_step(run_dir, cols["k"])  # beside the records, never one of their columns
    if one_step is not None:
        cols["one_step"] = one_step
    return RunRecords(run_dir, cols, summary)


def _majority_column(run: RunRecords) -> np.ndarray:
    """The best constant predictor's column: ``+1`` (JC) at every ``k`` if JC wins most decided
    iterations, else ``-1`` (the scheme S)."""
    from crosscurv.numeric.metrics import winner_metrics

    m = winner_metrics(run.columns["gap"], run.columns["gap"], run.columns.get("gap_err"))
    return np.full(run.iters, 1.0 if m["jc_hits"][1] > m["s_hits"][1] else -1.0)


def table_rows(run: RunRecords, estimates: Sequence[str] = ESTIMATE_ROWS) -> list[dict]:
    """Metrics of each estimate column of one run (paper, Section 5.1)."""
    from crosscurv.numeric.metrics import calibration, certified_columns, winner_metrics

    out = []
    cert = certified_columns(_with_certificates(run), [e for e in estimates if e in run.columns])
    for est in estimates:
        if est == "majority":
            m = winner_metrics(run.columns["gap"], _majority_column(run),
                               run.columns.get("gap_err"))
            m["mae"] = m["max_ae"] = math.nan  # a constant names a winner, it estimates no gap
            out.append({"task": run.task, "estimate": est, **m, "coverage": math.nan,
                        "precision": math.nan, "certified": None, "calibrated": math.nan})
            continue
        if est not in run.columns:
            continue
        m = winner_metrics(run.columns["gap"], run.columns[est], run.columns.get("gap_err"))
        c = cert.get(est)
        extra = {"coverage": math.nan, "precision": math.nan, "certified": None,
                 "calibrated": math.nan}
        if c is not None:
            extra = {"coverage": c["coverage"], "precision": c["precision"], "certified": (c[
                "correct"], c["certified"]),
                     "calibrated": calibration(run.columns["gap"], run.columns[est], run.columns[
                     f"{est}_err"])}
        out.append({"task": run.task, "estimate": est, **m, **extra})
    return out


def _with_certificates(run: RunRecords) -> dict:
    """The run's columns with ``*_cert`` recomputed by
    :func:`crosscurv.numeric.certificate.record_certificates` for a plain run (what ``crosscurv
    run`` records now, so records written before the certificate changed show it too); an optimizer
    run's, or one without the columns or a measured sharpness, as recorded."""
    from crosscurv.numeric.certificate import record_certificates

    s = run.summary.get("settings") if isinstance(run.summary.get("settings"), dict) else {}
    opt = s.get("optimizer")
    plain = opt is None or (isinstance(opt, dict) and opt.get("spec") == "sgd" and not s.get(
        "block_lr"))
    need = ("gap", "recursive", "cumulative", "jc_only", "sharpness", "recursive_cert")
    if (not plain or not isinstance(s.get("lr"), (int, float)) or not all(c in run.columns
                                                                          for c in need)
        or not np.isfinite(run.columns["sharpness"]).all()):
        return run.columns
    certs = record_certificates(run.columns, float(s["lr"]), dtype=s.get("dtype"))
    return {**run.columns, **{f"{e}_cert": np.array(v) for e, v in certs.items()}}


def _best_flags(rows: list[dict]) -> list[dict]:
    """Which rows hold the best value of each metric (ties included)."""
    def val(r, key):
        v = r[key]
        return v[0] if isinstance(v, (tuple, list)) else v

    flags = [dict() for _ in rows]
    for key, better in (("correct", max), ("jc_hits", max), ("s_hits", max), ("mae", min), (
            "max_ae", min)):
        vals = [val(r, key) for r in rows]
        finite = [v for v in vals if v == v]
        if not finite:
            continue
        best = better(finite)
        for f, v in zip(flags, vals):
            f[key] = v == best
    return flags


def _fmt(key: str, value, bold: bool, markdown: bool) -> str:
    if key == "correct":
        s = percent(value, missing="nan%")
    elif key in ("jc_hits", "s_hits"):
        s = f"{value[0]}/{value[1]}"
    else:
        s = number(value)
    if bold:
        s = f"**{s}**" if markdown else f"{s}*"
    return s


def render_table(runs: Sequence[RunRecords], fmt: str = "github",
                 settings: Sequence[str] = ()) -> str:
    """Table 1 (markdown ``github`` or plain ``simple``) for several runs; ``settings`` (names of
    :data:`SETTINGS`, e.g. :func:`differing_settings`) add a column each after the task."""
    markdown = fmt in ("github", "pipe")
    body = []
    for run in runs:
        rows = table_rows(run, TABLE_ROWS)
        flags = _best_flags(rows)
        shown = run_settings(run) if settings else {}
        for r, f in zip(rows, flags):
            body.append(
                [
                    TASK_LABELS.get(run.task, run.task),
                    *(shown[name] for name in settings),
                    ESTIMATE_LABELS.get(r["estimate"], r["estimate"]),
                    run.iters,
                ]
                + [_fmt(k, r[k], f.get(k, False), markdown)
                   for k in ("correct", "jc_hits", "s_hits")]
                + (["n/a", "n/a"] if r["estimate"] == "majority"  # a constant estimates no gap
                   else [_fmt(k, r[k], f.get(k, False), markdown) for k in ("mae", "max_ae")])
                + [str(r.get("undecided", 0))]
                + [percent(r.get(k), missing="n/a") for k in ("coverage", "precision",
                                                              "calibrated")]
            )
    head = ["Task", *settings, "Estimate", "K", "Correct ↑", "JC hits ↑", "GS hits ↑", "MAE ↓",
            "Max. AE ↓", "Undecided", "Coverage ↑", "Precision ↑", "Calibrated ↑"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


def paper_comparison(runs: Sequence[RunRecords], fmt: str = "github") -> str:
    """Ours next to the paper's Table 1 for the estimates the paper reports."""
    body = []
    for run in runs:
        paper = PAPER_TABLE1.get(run.task)
        if not paper:
            continue
        ours = {r["estimate"]: r for r in table_rows(run, ("cumulative", "recursive"))}
        for est in ("cumulative", "recursive"):
            if est not in ours:
                continue
            o, p = ours[est], paper[est]
            body.append(
                [
                    TASK_LABELS.get(run.task, run.task),
                    ESTIMATE_LABELS[est],
                    f"{o['correct']:.1f}% (K={run.iters})",
                    f"{p['correct']:.1f}% (K=500)",
                    f"{o['jc_hits'][0]}/{o['jc_hits'][1]}",
                    f"{p['jc_hits'][0]}/{p['jc_hits'][1]}",
                    f"{o['s_hits'][0]}/{o['s_hits'][1]}",
                    f"{p['s_hits'][0]}/{p['s_hits'][1]}",
                    f"{o['mae']:.3g}",
                    f"{p['mae']:.3g}",
                    f"{o['max_ae']:.3g}",
                    f"{p['max_ae']:.3g}",
                ]
            )
    head = ["Task", "Estimate", "Correct (ours)", "Correct (paper)", "JC hits (ours)",
            "JC hits (paper)", "GS hits (ours)", "GS hits (paper)", "MAE (ours)", "MAE (paper)",
            "Max. AE (ours)", "Max. AE (paper)"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


#: What each column of Table 1 says (``crosscurv table --help`` and the footnote under its table).
#: "The gap" is the measured ``L_S^k - L_JC^k`` of an iteration, S the run's pattern (GS in the
#: paper).
COLUMN_NOTES = {
    "K": "iterations compared (the run's records)",
    "Correct": "share of the decided iterations where the estimate's sign names the measured "
               "winner (JC lower when the gap L_S - L_JC is positive, S lower when negative)",
    "JC hits": "h/n: of the n iterations where JC was measured lower, the h where the estimate "
               "said so",
    "GS hits": "h/n: the same for the sequential scheme S (the run's pattern)",
    "MAE": "mean |estimate - gap| over the K iterations",
    "Max. AE": "largest |estimate - gap|",
    "Undecided": "iterations whose |gap| is within its measurement error gap_err: no measured "
                 "winner, left out of Correct and the hits",
    "Coverage": "share of the decided iterations where the estimate's winner is certified (the "
                "estimate exceeds its certificate's error bar, docs/error_estimates.md, and the "
                "run is below the edge of stability)",
    "Precision": "share of the certified winners that are the measured winner",
    "Calibrated": "share of the iterations where |estimate - gap| is within the estimate's "
                  "error bar",
    "Baselines": "majority winner: always the scheme measured lower most often (known only "
                 "afterwards); one-step: the sign of eta^2 C_S at the JC iterate before k "
                 "(Theorem 1), from RUN_DIR/one_step.csv (--one-step)",
    "↑ / ↓": "higher / lower is better; the best value per task in bold (markdown) or with * "
             "(plain); n/a: records without the error columns",
}

#: Settings a comparison of runs can differ in, as ``crosscurv table`` shows them.
SETTINGS = ("preset", "pattern", "lr", "seed", "optimizer", "dtype")


def run_settings(run: RunRecords) -> dict:
    """``{setting: text}`` of :data:`SETTINGS` from a run's ``summary.json`` (``?`` where it records
    none; the pattern spelled with the task's block names)."""
    from crosscurv.theory.errors import InputError
    from crosscurv.theory.patterns import DelayPattern, spelling

    s = run.summary.get("settings")
    s = s if isinstance(s, dict) else {}
    out = {name: "?" for name in SETTINGS}
    if s.get("preset") is not None:
        out["preset"] = str(s["preset"])
    pattern = s.get("pattern")
    if isinstance(pattern, dict):
        try:
            names = list(s.get("blocks") or {}) or None
            out["pattern"] = spelling(DelayPattern.from_dict(pattern), names)
        except (KeyError, TypeError, ValueError, InputError):
            out["pattern"] = str(pattern.get("name", "?"))
    elif s.get("pattern_spec") is not None:
        out["pattern"] = str(s["pattern_spec"])
    for name in ("lr", "seed", "dtype"):
        if s.get(name) is not None:
            out[name] = repr(s[name]) if isinstance(s[name], float) else str(s[name])
    opt = s.get("optimizer")
    out["optimizer"] = str(opt.get("spec", "sgd") if isinstance(opt, dict) else (opt or "sgd"))
    return out


def differing_settings(runs: Sequence[RunRecords]) -> list[str]:
    """The settings of :data:`SETTINGS` whose values differ between ``runs`` (none for one run)."""
    values = [run_settings(r) for r in runs]
    return [name for name in SETTINGS if len({v[name] for v in values}) > 1]


def column_notes(width: int = 100) -> str:
    """The footnote under ``crosscurv table``: a wrapped line per column of :data:`COLUMN_NOTES`."""
    import textwrap

    return "\n".join(textwrap.fill(f"{name}: {text}", width=width, subsequent_indent="    ")
                     for name, text in COLUMN_NOTES.items())
