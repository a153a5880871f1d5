"""Figures of the studies over seeds and of the regime map (matplotlib PNG).

:func:`seeds_timeline` (per task the observed winner of each seed at every ``k``, their agreement
and each estimate's share of right seeds), :func:`regime_curvature_figure` (``Correct_K`` and
``MAE`` against the largest ``eta * sharpness``) and :func:`regime_crossing_figure` (against the
first ``k`` where it reaches 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from crosscurv.experiments.reports.plotting import ESTIMATES, _save, plt

__all__ = ["seeds_timeline", "regime_curvature_figure", "regime_crossing_figure", "observed_codes",
           "pooled_certified_bins", "certified_regime_figure", "agreement_codes"]

JC_C, GS_C, UND_C, SPLIT_C = "#ff7f0e", "#1f77b4", "#bbbbbb", "#d62728"


def observed_codes(columns) -> np.ndarray:
    """Observed winner per iteration: ``1`` JC, ``-1`` GS, ``0`` tie or undecided (``|gap| <=
    gap_err``)."""
    from crosscurv.numeric.metrics import undecided

    gap = np.asarray(columns["gap"], dtype=float)
    errs = np.asarray(columns.get("gap_err", np.zeros_like(gap)), dtype=float)
    codes = np.sign(gap)
    codes[~np.isfinite(gap)] = 0
    codes[np.array([undecided(g, e) for g, e in zip(gap, errs)], dtype=bool)] = 0
    return codes


def agreement_codes(codes: np.ndarray) -> np.ndarray:
    """Per column of a seeds x K matrix of observed codes (NaN: no record): ``1`` / ``-1`` every
    decided seed names JC / GS, ``0`` no seed decided, ``2`` the decided seeds disagree."""
    out = np.zeros(codes.shape[1])
    for j in range(codes.shape[1]):
        col = codes[:, j]
        dec = col[np.isfinite(col) & (col != 0)]
        if dec.size == 0:
            out[j] = 0
        elif np.all(dec == dec[0]):
            out[j] = dec[0]
        else:
            out[j] = 2
    return out


def _estimate_hits(runs, est: str, K: int) -> np.ndarray:
    """Fraction of the decided seeds at each ``k`` whose estimate names the observed winner (NaN:
    none decided)."""
    num = np.zeros(K)
    den = np.zeros(K)
    for r in runs:
        cols = r.columns()
        obs = observed_codes(cols)
        est_c = np.sign(np.asarray(cols[est], dtype=float))
        n = len(obs)
        dec = obs != 0
        num[:n] += (dec & (est_c == obs)).astype(float)
        den[:n] += dec.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def seeds_timeline(runs: Sequence, path, title: str, s_label: str = "GS") -> Path:
    """Winner timelines of one task over seeds (module docstring); ``runs``: StudyRuns of that task.
    """
    from matplotlib.colors import ListedColormap

    runs = sorted(runs, key=lambda r: r.seed)
    K = max(r.K for r in runs)
    codes = np.full((len(runs), K), np.nan)
    for i, r in enumerate(runs):
        c = observed_codes(r.columns())
        codes[i, : len(c)] = c
    agree = agreement_codes(codes)
    top = np.vstack([codes, agree[None, :]])
    ests = [e for e in ESTIMATES if all(e in r.columns() for r in runs)]
    hits = np.vstack([_estimate_hits(runs, e, K) for e in ests]) if ests else np.zeros((0, K))
    n_split = int(np.sum(agree == 2))

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8.0, 0.32 * (len(runs) + 1 + len(ests)) + 2.0),
                                 dpi=120,
                                 sharex=True, gridspec_kw={"height_ratios": [len(runs) + 1, max(len(
                                 ests), 1)]})
    cmap = ListedColormap([GS_C, UND_C, JC_C, SPLIT_C]).with_extremes(bad="white")  # -1, 0, 1, 2
    ext = (0.5, K + 0.5, top.shape[0] - 0.5, -0.5)
    ax.imshow(np.ma.masked_invalid(top), aspect="auto", interpolation="nearest", cmap=cmap,
              vmin=-1.5, vmax=2.5, extent=ext)
    ax.set_yticks(range(top.shape[0]))
    ax.set_yticklabels([f"seed {r.seed}" for r in runs] + ["agreement"], fontsize=7)
    ax.axhline(len(runs) - 0.5, color="black", lw=0.8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=JC_C, label="JC lower"),
               plt.Rectangle((0, 0), 1, 1, color=GS_C, label=f"{s_label} lower"),
               plt.Rectangle((0, 0), 1, 1, color=UND_C, label="undecided / tie"),
               plt.Rectangle((0, 0), 1, 1, color=SPLIT_C, label="seeds disagree")]
    ax.legend(handles=handles, fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=4,
              frameon=False)
    ax.set_title(f"{title}: observed winner per seed; seeds disagree at {n_split}/{K} iterations",
                 fontsize=9, loc="left", pad=18)
    if ests:
        im = bx.imshow(np.ma.masked_invalid(hits), aspect="auto", interpolation="nearest",
                       cmap="viridis", vmin=0, vmax=1, extent=(0.5, K + 0.5, len(ests) - 0.5, -0.5))
        bx.set_yticks(range(len(ests)))
        bx.set_yticklabels([ESTIMATES[e][0] for e in ests], fontsize=7)
        cb = fig.colorbar(im, ax=bx, fraction=0.03, pad=0.01)
        cb.set_label("seeds right", fontsize=7)
        cb.ax.tick_params(labelsize=6)
    bx.set_xlabel("iteration $k$")
    fig.tight_layout()
    return _save(fig, path)


def _by_task(points) -> dict:
    out: dict = {}
    for p in points:
        out.setdefault(p.task, []).append(p)
    return out


def _offsets(n: int) -> list:
    return [0.97 + 0.03 * i for i in range(n)]


def _scatter_estimates(a, b, ps: Sequence, x_of) -> None:
    """Per estimate, ``Correct_K`` on ``a`` and ``MAE`` on ``b`` at ``x_of(runs, i)`` (``i``: the
    estimate's index)."""
    for i, est in enumerate(ESTIMATES):
        label, colour = ESTIMATES[est]
        have = [p for p in ps if est in p.metrics]
        x = x_of(have, i)
        a.scatter(x, [p.metrics[est]["correct"] for p in have], s=14, color=colour, label=label,
                  alpha=0.8)
        b.scatter(x, [p.metrics[est]["mae"] for p in have], s=14, color=colour, alpha=0.8)


def _finish(fig, axes, a_b_titles: Sequence, xlabel: str, path) -> Path:
    """The shared layout of the two regime figures: 95% line, Correct and log-MAE axes, legend,
    saved.
    """
    for (a, b), title in a_b_titles:
        a.axhline(95, color="black", lw=0.6, ls=":")
        a.set_ylim(-3, 103)
        a.set_title(title, fontsize=9)
        a.set_ylabel("Correct$_K$ (%)")
        b.set_yscale("log")
        b.set_ylabel("MAE")
        b.set_xlabel(xlabel)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return _save(fig, path)


def regime_curvature_figure(points: Sequence, path) -> Path | None:
    """``Correct_K`` (top) and ``MAE`` (bottom) against the largest ``eta * sharpness`` per run; one
    column per task."""
    tasks = _by_task([p for p in points if p.max_eta_sharpness == p.max_eta_sharpness])
    if not tasks:
        return None
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.3 * len(tasks), 6.2), dpi=120, squeeze=False)
    offsets = _offsets(len(ESTIMATES))  # a small shift per estimate: dots stay visible
    titled = []
    for j, (task, ps) in enumerate(tasks.items()):
        a, b = axes[0][j], axes[1][j]
        _scatter_estimates(a, b, ps, lambda have, i: np.array([p.max_eta_sharpness for p in have])
                           * offsets[i])
        for ax in (a, b):
            ax.axvline(2.0, color="black", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.grid(alpha=0.3, which="both")
        rates = ", ".join(f"{lr:g}" for lr in sorted({p.lr for p in ps}))
        titled.append(((a, b), f"{task}: {len(ps)} runs ($\\eta$ = {rates})"))
    return _finish(fig, axes, titled,
                   r"largest $\eta\,\mathrm{sharpness}_k$ of the run (dashed: 2)", path)


def regime_crossing_figure(points: Sequence, path) -> Path | None:
    """``Correct_K`` and ``MAE`` against the first ``k`` with ``eta * sharpness >= 2`` ("never" at
    the right)."""
    from matplotlib.ticker import MaxNLocator

    tasks = _by_task(points)
    if not tasks:
        return None
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.3 * len(tasks), 6.2), dpi=120, squeeze=False)
    titled = []
    for j, (task, ps) in enumerate(tasks.items()):
        a, b = axes[0][j], axes[1][j]
        K = max(p.K for p in ps)
        never = 1.12 * K
        _scatter_estimates(a, b, ps, lambda have, i: np.array(
            [never if p.first_cross is None else p.first_cross for p in have], dtype=float) + (i
            - 1) * 0.01 * K)
        for ax in (a, b):
            ax.axvline(1.04 * K, color="grey", lw=0.6)
            ticks = [t for t in MaxNLocator(5, integer=True).tick_values(0, K) if 0 <= t <= K]
            ax.set_xticks(ticks + [never], [f"{t:g}" for t in ticks] + ["never"])
            ax.set_xlim(-0.03 * K, 1.2 * K)
            ax.grid(alpha=0.3)
        titled.append(((a, b), f"{task}: {len(ps)} runs, K = {K}"))
    return _finish(fig, axes, titled, r"first $k$ with $\eta\,\mathrm{sharpness}_k \geq 2$", path)


#: bin edges of ``eta * sharpness_k`` in :func:`certified_regime_figure` (log-spaced, 2 is an edge)
CERT_BINS = tuple(float(x) for x in np.concatenate([[0.0], np.logspace(-4, np.log10(2.0), 9), [4.0,
    8.0, 16.0, 1e9]]))


def pooled_certified_bins(runs: Sequence, estimate: str, edges: Sequence[float] = CERT_BINS,
                          kind: str = "defect") -> list[dict]:
    """Coverage and precision of ``estimate``'s certified winners per bin of ``eta * sharpness_k``
    (:func:`crosscurv.experiments.studies.regime.regime_series`), the counts of
    :func:`crosscurv.numeric.metrics.certified_metrics` summed over ``runs``. ``kind``:
    ``"defect"`` (:func:`crosscurv.experiments.studies.seeds.defect_columns`) or ``"bound"``
    (``{estimate}_cert``; runs without it skipped).

    Returns one dict per bin with iterations: ``lo, hi, decided, certified, correct, coverage,
    precision`` (percentages; NaN where nothing is decided or certified).
    """
    from crosscurv.experiments.studies.regime import regime_series
    from crosscurv.experiments.studies.seeds import defect_columns
    from crosscurv.numeric.metrics import certified_metrics

    sums = [[0, 0, 0] for _ in edges[1:]]
    for r in runs:
        cols = r.columns()
        series = regime_series(cols, r.lr)
        if series is None:
            continue
        s = series[0]
        if kind == "defect":
            cert = np.asarray(defect_columns(cols, r.lr, estimate)[1], dtype=float)
        elif f"{estimate}_cert" in cols and np.isfinite(cols[f"{estimate}_cert"]).any():
            cert = cols[f"{estimate}_cert"]
        else:
            continue
        for b, (lo, hi) in enumerate(zip(edges, edges[1:])):
            idx = np.flatnonzero((s >= lo) & (s < hi))
            if idx.size == 0:
                continue
            m = certified_metrics(cols["gap"][idx], cols[estimate][idx], cert[idx],
                                  cols["gap_err"][idx] if "gap_err" in cols else None)
            sums[b][0] += m["decided"]
            sums[b][1] += m["certified"]
            sums[b][2] += m["correct"]
    out = []
    for (lo, hi), (d, c, ok) in zip(zip(edges, edges[1:]), sums):
        if d:
            out.append({"lo": lo, "hi": hi, "decided": d, "certified": c, "correct": ok,
                        "coverage": 100.0 * c / d, "precision": 100.0 * ok / c if c else float(
                        "nan")})
    return out


def certified_regime_figure(studies: dict, path) -> Path | None:
    """Where certified predictions hold: precision (top) and coverage (bottom) of the defect
    interval's certified winners (:func:`pooled_certified_bins`) against ``eta * sharpness_k``, one
    column per estimate, one line per task and study (``studies``: ``{label: runs}``), every study's
    seeds pooled per bin (:func:`pooled_certified_bins`); the edge of stability dashed, the
    precision goal 99% dotted. ``None`` when no run holds certificates."""
    ests = list(ESTIMATES)
    lines = []
    for label, runs in studies.items():
        tasks = list(dict.fromkeys(r.task for r in runs))
        for task in tasks:
            rs = [r for r in runs if r.task == task]
            per = {e: pooled_certified_bins(rs, e) for e in ests}
            if any(per.values()):
                lines.append((f"{task} ({label})", label, per))
    if not lines:
        return None
    fig, axes = plt.subplots(2, len(ests), figsize=(4.3 * len(ests), 6.4), dpi=120, sharex=True,
                             sharey="row", squeeze=False)
    styles = {lab: st for lab, st in zip(studies, ("-", "--", ":", "-."))}
    colours = {}
    for j, e in enumerate(ests):
        for name, label, per in lines:
            bins = per[e]
            if not bins:
                continue
            x = [min(np.sqrt(b["lo"] * b["hi"]), 2 * b["lo"]) if b["lo"] > 0 else b["hi"] / 2
                 for b in bins]
            task = name.split(" ")[0]
            colour = colours.setdefault(task, f"C{len(colours)}")
            axes[0][j].plot(x, [b["precision"] for b in bins], marker="o", ms=3, ls=styles[label],
                            color=colour, label=name)
            axes[1][j].plot(x, [b["coverage"] for b in bins], marker="o", ms=3, ls=styles[label],
                            color=colour)
        axes[0][j].set_title(ESTIMATES[e][0], fontsize=10)
        for i in (0, 1):
            axes[i][j].set_xscale("log")
            axes[i][j].axvline(2.0, color="black", lw=0.8, ls="--")
            axes[i][j].set_ylim(-3, 103)
            axes[i][j].grid(alpha=0.3, which="both")
        axes[0][j].axhline(99, color="black", lw=0.6, ls=":")
        axes[1][j].axhline(80, color="black", lw=0.6, ls=":")
        axes[1][j].set_xlabel(r"$\eta\,\mathrm{sharpness}_k$ (dashed: edge of stability)")
    axes[0][0].set_ylabel("precision of the certified (%)")
    axes[1][0].set_ylabel("coverage of the decided (%)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return _save(fig, path)
