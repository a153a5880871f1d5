"""The regime map: when does each estimate name the winner, against the measured ``eta *
sharpness``?

Every run of a learning-rate grid becomes a :class:`RegimePoint`: ``max_eta_sharpness = max_k eta *
sharpness_k`` (2 is the edge of stability), ``first_cross = min {k : eta * sharpness_k >= 2}``
(``None``: never), and per estimate the Section 5.1 metrics of
:func:`crosscurv.experiments.reports.table.table_rows` plus ``Correct`` before and from the first
crossing. :func:`regime_sentence` states from these numbers under which conditions an estimate
reaches ``Correct_K >= 95`` and where it stops.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from crosscurv.experiments.reports.table import ESTIMATE_ROWS, table_rows

__all__ = ["EDGE", "TARGET", "RegimePoint", "regime_series", "regime_indicators",
           "observed_switches", "regime_point", "regime_points", "regime_sentence",
           "small_step_note", "render_regime_table", "render_crossing_table", "LR_GRID", "MARGIN",
           "predicted_max_eta_lambda", "regime_learning_rate"]

#: the edge of stability of ``eta * lambda``
EDGE = 2.0
#: the agreement an estimate must reach to "name the winner"
TARGET = 95.0
#: ``eta * sharpness`` below which a run is "well inside" the expansions' regime
INSIDE = 0.5


@dataclass
class RegimePoint:
    """One run of a regime grid: its settings, regime indicators and metrics per estimate."""

    task: str
    lr: float
    seed: int
    K: int
    status: str
    source: str  # the sweep folder it came from, "(prefix of NAME)" when cut from a longer run
    max_eta_sharpness: float
    first_cross: int | None
    switches: int
    # estimate -> table_rows dict (+ correct_before, correct_after)
    metrics: dict = field(default_factory=dict)


def _sharpness(columns) -> np.ndarray:
    """Per iteration ``max(lambda_max_k, sharpness_k)`` over the finite ones (NaN where neither is
    finite)."""
    s = np.asarray(columns["sharpness"], dtype=float)
    lam = columns.get("lambda_max")
    if lam is None:
        return s
    lam = np.asarray(lam, dtype=float)
    return np.where(np.isfinite(lam), np.where(np.isfinite(s), np.maximum(lam, s), lam), s)


def regime_series(columns, lr: float | None) -> tuple[np.ndarray, int | None] | None:
    """``(eta * sharpness_k per iteration, first k with eta * sharpness_k >= 2 or None)`` of a run.

    ``sharpness_k`` is ``max(lambda_max_k, sharpness_k)`` where the records hold ``lambda_max``,
    else the power iteration's ``sharpness``; ``None`` without ``lr`` or a finite ``sharpness``.
    """
    if lr is None or "sharpness" not in columns:
        return None
    s = lr * _sharpness(columns)
    finite = np.isfinite(s)
    if not finite.any():
        return None
    over = np.flatnonzero(finite & (s >= EDGE))
    return s, (int(np.asarray(columns["k"])[over[0]]) if over.size else None)


def regime_indicators(columns, lr: float) -> tuple[float, int | None]:
    """``(max_k eta * sharpness_k, first k with eta * sharpness_k >= 2 or None)`` of a run's
    columns.

    NaN sharpness is skipped; no finite sharpness gives ``(nan, None)``.
    """
    series = regime_series(columns, lr)
    if series is None:
        return math.nan, None
    s, cross = series
    return float(np.max(s[np.isfinite(s)])), cross


def _observed(columns) -> list[str]:
    """The observed winner per iteration: ``JC``, ``GS``, ``tie`` or ``undecided``
    (``crosscurv.numeric.metrics``)."""
    from crosscurv.numeric.metrics import UNDECIDED, undecided, winner

    gaps = columns["gap"]
    errs = columns.get("gap_err", np.zeros_like(gaps))
    return [UNDECIDED if undecided(g, e) else winner(g) for g, e in zip(gaps, errs)]


def observed_switches(columns) -> int:
    """How often the observed winner changes between JC and GS (ties and undecided iterations
    skipped).
    """
    seq = [w for w in _observed(columns) if w in ("JC", "GS")]
    return sum(1 for a, b in zip(seq, seq[1:]) if a != b)


def _correct_on(columns, est: str, idx) -> float:
    """``Correct`` of ``est`` over the iterations ``idx`` (NaN when there are none)."""
    from crosscurv.numeric.metrics import evaluate

    idx = np.asarray(idx, dtype=int)
    if idx.size == 0:
        return math.nan
    errs = columns.get("gap_err")
    return evaluate(columns["gap"][idx], columns[est][idx], None if errs is None else errs[
        idx]).correct


def regime_point(srun, source: str, estimates: Sequence[str] = ESTIMATE_ROWS) -> RegimePoint:
    """The :class:`RegimePoint` of a :class:`~crosscurv.experiments.studies.collect.StudyRun`."""
    cols = srun.columns()
    top, cross = regime_indicators(cols, srun.lr)
    metrics = {}
    K = srun.K
    split = K if cross is None else cross - 1  # iterations before the first crossing
    for row in table_rows(srun.run, estimates):
        est = row["estimate"]
        row = dict(row)
        row["correct_before"] = _correct_on(cols, est, range(0, split))
        row["correct_after"] = _correct_on(cols, est, range(split, K))
        metrics[est] = row
    return RegimePoint(srun.task, srun.lr, srun.seed, K, srun.status, source, top, cross,
                       observed_switches(cols), metrics)


def regime_points(regime_sweeps: Sequence, seeds_sweep=None) -> list[RegimePoint]:
    """Every run of the regime sweeps, plus each task's seeds-sweep runs cut to the regime's K.

    The learning rate a regime grid leaves out because the seeds study runs it (the preset's own)
    enters as the first ``K`` records of the seeds runs of the same task and preset whose seeds the
    regime grid uses (``K``: the regime runs' planned iterations). Points are sorted by task,
    learning rate and seed.
    """
    points = []
    plan: dict = {}  # task -> (K, seeds, lrs, preset)
    for sw in regime_sweeps:
        for r in sw.runs:
            points.append(regime_point(r, sw.path.name))
            K, seeds, lrs, presets = plan.setdefault(r.task, (r.planned_K, set(), set(), set()))
            seeds.add(r.seed)
            lrs.add(r.lr)
            presets.add(r.preset)
            plan[r.task] = (max(K, r.planned_K), seeds, lrs, presets)
    if seeds_sweep is not None:
        for r in seeds_sweep.runs:
            if r.task not in plan:
                continue
            K, seeds, lrs, presets = plan[r.task]
            if r.seed not in seeds or r.lr in lrs or r.preset not in presets:
                continue
            if r.K >= K:
                points.append(regime_point(r.prefix(K),
                                           f"{seeds_sweep.path.name} (first {K} records)"))
            elif r.status == "diverged":
                points.append(regime_point(r, f"{seeds_sweep.path.name} (diverged at {r.K + 1})"))
    points.sort(key=lambda p: (p.task, p.lr, p.seed))
    return points


def _fmt_lrs(lrs) -> str:
    lrs = sorted(set(lrs))
    return f"eta = {lrs[0]:g}" if len(lrs) == 1 else f"eta = {lrs[0]:g}-{lrs[-1]:g}"


def regime_sentence(points: Sequence[RegimePoint], estimate: str) -> str:
    """One short sentence, computed from the points of one task: where ``estimate`` reaches
    ``Correct_K >= 95%``.

    The learning rates where every seed, some seeds (``n_ok/n``) or none reach 95% (``x2``: a run
    there crosses ``eta * sharpness = 2``), then the largest ``eta * sharpness`` of a run at 95% and
    the runs beyond it (none at 95%, by construction). The per-run values are in the regime table.
    """
    pts = [p for p in points if estimate in p.metrics and not math.isnan(p.max_eta_sharpness)]
    if not pts:
        return f"{estimate}: no run with a measured sharpness."

    def ok(p):
        c = p.metrics[estimate]["correct"]
        return c == c and c >= TARGET

    by_lr: dict = {}
    for p in sorted(pts, key=lambda p: (p.lr, p.seed)):
        by_lr.setdefault(p.lr, []).append(p)

    def lr(ps, tally=False) -> str:
        text = f"{ps[0].lr:g}" + (f" ({sum(ok(p) for p in ps)}/{len(ps)})" if tally else "")
        return text + (" x2" if any(p.first_cross is not None for p in ps) else "")

    hits = [p for p in pts if ok(p)]
    if not hits:
        best = max(pts, key=lambda p: p.metrics[estimate]["correct"] if p.metrics[estimate][
            "correct"] == p.metrics[
            estimate]["correct"] else -1)
        return (f"{estimate}: >= 95% in none of the {len(pts)} runs; best "
                f"{best.metrics[estimate]['correct']:.1f}% (eta = {best.lr:g}, seed {best.seed}).")
    every, some, none = [], [], []
    for ps in by_lr.values():
        n_ok = sum(ok(p) for p in ps)
        (every if n_ok == len(ps) else none if n_ok == 0 else some).append(ps)
    clauses = []
    if every:
        clauses.append("every seed at eta = " + ", ".join(lr(ps) for ps in every))
    if some:
        clauses.append("some seeds at " + ", ".join(lr(ps, True) for ps in some))
    if none:
        clauses.append("no seed at " + ", ".join(lr(ps) for ps in none))
    top = max(p.max_eta_sharpness for p in hits)
    beyond = [p for p in pts if p.max_eta_sharpness > top]
    stop = (f"never above eta*sharpness {top:.3g} ({len(beyond)} runs go further)" if beyond
            else f"up to the grid's largest eta*sharpness, {top:.3g}")
    return f"{estimate}: >= 95% in " + "; ".join(clauses) + "; " + stop + "."


def small_step_note(points: Sequence[RegimePoint]) -> str:
    """Whether the winner still changes in the runs well inside the regime (``eta * sharpness <
    0.5`` throughout)."""
    inside = [p for p in points if p.max_eta_sharpness == p.max_eta_sharpness
              and p.max_eta_sharpness < INSIDE]
    if not inside:
        low = min((p for p in points if p.max_eta_sharpness == p.max_eta_sharpness),
                  key=lambda p: p.max_eta_sharpness, default=None)
        if low is None:
            return "no run has a measured sharpness."
        return (f"no run stays below eta*sharpness = {INSIDE:g} for its whole length (the lowest "
                f"largest value is {low.max_eta_sharpness:.3g}, eta = {low.lr:g}): the grid does "
                f"not reach well inside the regime.")
    changed = [p for p in inside if p.switches > 0]
    lrs = _fmt_lrs(p.lr for p in inside)
    if not changed:
        return (f"{len(inside)} run(s) stay below eta*sharpness = {INSIDE:g} throughout ({lrs}); "
                "in none of them "
                f"does the observed winner change within K = {max(p.K for p in inside)}.")
    sw = Counter(p.switches for p in changed)
    return (f"{len(inside)} run(s) stay below eta*sharpness = {INSIDE:g} throughout ({lrs}); the "
            f"observed winner changes in {len(changed)} of them ("
            + ", ".join(f"{c} run(s) with {s} switch(es)" for s, c in sorted(sw.items())) + ").")


def _spread(vals, fmt) -> str:
    vals = [v for v in vals if v == v]
    if not vals:
        return "nan"
    mean, lo, hi = sum(vals) / len(vals), min(vals), max(vals)
    return fmt(mean) if lo == hi else f"{fmt(mean)} [{fmt(lo)}, {fmt(hi)}]"


def render_regime_table(points: Sequence[RegimePoint], estimates: Sequence[str] = ESTIMATE_ROWS,
                        fmt: str = "github") -> str:
    """One row per task and learning rate: seeds, regime indicators, and per estimate ``Correct``
    and ``MAE`` as mean [min, max] over the seeds."""
    from tabulate import tabulate

    groups: dict = {}
    for p in points:
        groups.setdefault((p.task, p.lr), []).append(p)
    body = []
    for (task, lr), ps in groups.items():
        crosses = ", ".join("never" if p.first_cross is None else str(p.first_cross) for p in ps)
        statuses = Counter(p.status for p in ps)
        note = "" if set(statuses) == {"complete"} else " (" + ", ".join(f"{c} {s}" for s,
            c in statuses.items()) + ")"
        row = [task, f"{lr:g}", f"{len(ps)} ({', '.join(str(p.seed) for p in ps)}){note}",
               _spread([p.K for p in ps], lambda x: f"{x:g}"),
               _spread([p.max_eta_sharpness for p in ps], lambda x: f"{x:.3g}"), crosses,
               _spread([p.switches for p in ps], lambda x: f"{x:.3g}")]
        for est in estimates:
            row.append(_spread([p.metrics[est]["correct"] for p in ps if est in p.metrics],
                               lambda x: f"{x:.1f}%"))
            row.append(_spread([p.metrics[est]["mae"] for p in ps if est in p.metrics],
                               lambda x: f"{x:.3g}"))
        body.append(row)
    head = ["task", "eta", "seeds", "K", "max eta*sharpness", "first k with eta*sharpness >= 2",
            "winner switches"]
    for est in estimates:
        head += [f"{est} Correct", f"{est} MAE"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


def render_crossing_table(points: Sequence[RegimePoint], estimates: Sequence[str] = ESTIMATE_ROWS,
                          fmt: str = "github") -> str:
    """One row per run: K, largest ``eta * sharpness`` and where, the first ``k`` it reaches 2, and
    per
    estimate ``Correct`` over the iterations before that ``k`` and from it (``-``: none there)."""
    from tabulate import tabulate

    def pct(x):
        return "-" if x != x else f"{x:.1f}%"

    body = []
    for p in points:
        row = [p.task, f"{p.lr:g}", str(p.seed), str(p.K), f"{p.max_eta_sharpness:.3g}",
               "never" if p.first_cross is None else str(p.first_cross)]
        for est in estimates:
            m = p.metrics.get(est)
            row.append("-" if m is None
                       else f"{pct(m['correct_before'])} / {pct(m['correct_after'])}")
        body.append(row)
    head = ["task", "eta", "seed", "K", "max eta*sharpness", "first k with eta*sharpness >= 2"] + [
        f"{e} Correct before / from it" for e in estimates]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


#: the learning-rate grid the default presets are chosen from (a 1-1.5-2-3-5-7 series per decade)
LR_GRID = (0.05, 0.03, 0.02, 0.015, 0.01, 0.007, 0.005, 0.003, 0.002)
#: the margin below the edge the rule asks for: predicted ``max_k eta * lambda_max <= MARGIN *
#: EDGE``
MARGIN = 0.5


def predicted_max_eta_lambda(lambda_max: Sequence[float], lr_ref: float, lr: float,
                             K: int) -> float:
    """``lr * max {lambda_max_ref(k) : k * lr_ref <= K * lr}``: the largest ``eta * lambda_max`` a
    ``K``-iteration run at ``lr`` is predicted to reach from a reference run at ``lr_ref``.

    The reference's ``lambda_max`` is read as a function of the gradient-flow time ``t = eta k`` up
    to ``K lr``, only before its own first ``lr_ref * lambda_max >= 2`` (past the edge sharpness
    self-stabilises near ``2 / lr_ref``).

    Raises:
        ValueError: the reference does not cover ``K * lr`` below the edge, or has no finite
            value there.
    """
    n = int(math.floor(K * lr / lr_ref + 1e-9))
    lam = np.asarray(lambda_max, dtype=float)
    crossed = np.flatnonzero(np.isfinite(lam) & (lr_ref * lam >= EDGE))
    valid = int(crossed[0]) if crossed.size else lam.size  # records k = 1..valid are below the edge
    if n > valid:
        raise ValueError(f"the reference covers t <= {valid * lr_ref:g} below the edge, the run "
                         f"needs t <= {K * lr:g}")
    window = lam[:max(n, 1)]
    window = window[np.isfinite(window)]
    if window.size == 0:
        raise ValueError("no finite lambda_max in the reference over the run's time")
    return float(lr * window.max())


def regime_learning_rate(lambda_max: Sequence[float], lr_ref: float, K: int, grid: Sequence[
    float] = LR_GRID,
                         margin: float = MARGIN, more: Sequence[tuple] = ()) -> tuple[float | None,
                                                                                      dict]:
    """The largest ``lr`` of ``grid`` whose :func:`predicted_max_eta_lambda` over ``K`` iterations
    is at most ``margin * EDGE``, from the reference at ``lr_ref`` or any of ``more`` ``(lambda_max,
    lr_ref)``; a rate no reference covers is not chosen (the presets' rule).

    Returns:
        ``(lr or None, {lr: prediction})``, each covered rate's smallest prediction.
    """
    preds: dict = {}
    for lam, ref in [(lambda_max, lr_ref), *more]:
        for lr in sorted(grid, reverse=True):
            try:
                p = predicted_max_eta_lambda(lam, ref, lr, K)
            except ValueError:
                continue
            preds[lr] = min(p, preds.get(lr, math.inf))
    ok = [lr for lr, p in preds.items() if p <= margin * EDGE]
    return (max(ok) if ok else None), dict(sorted(preds.items(), reverse=True))
