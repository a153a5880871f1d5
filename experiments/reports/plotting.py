"""Figures of the controlled studies (paper, Figures 2 and 3), matplotlib PNG.

:func:`gap_figure` (measured ``L_S^k - L_JC^k`` against the estimates on a symlog axis, Theorem
3's bound shaded, ``eta * sharpness_k`` below), :func:`winner_timeline` (the winner per ``k`` of
each source) and :func:`run_figure` (one run on one page: ``crosscurv run``'s ``figure.png``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

__all__ = ["gap_figure", "winner_timeline", "run_figure", "ESTIMATES"]

#: estimate columns drawn, with their labels and colours (paper's palette)
ESTIMATES = {
    "recursive": ("Recursive (Thm 2)", "#008E9B"),
    "cumulative": ("Cumulative (Thm 3)", "#7954C5"),
    "jc_only": ("JC-only cumulative", "#E07A1F"),
}


def _save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (parent folders created), close it, return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _linthresh(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values) & (values != 0)])
    if finite.size == 0:
        return 1e-12
    return float(max(np.percentile(finite, 5), finite.max() * 1e-6))


def gap_figure(records: Mapping[str, np.ndarray], path: Path, title: str, s_label: str = "GS",
               lr: float | None = None) -> Path:
    """Measured and estimated signed gaps over ``k`` and, with ``lr``, the regime indicator below
    them.

    Args:
        records: columns ``k, gap, recursive, cumulative, jc_only, bound_bk``
            (and ``sharpness``) as 1-D float arrays of equal length ``K``.
        path: PNG file to write (parent folders are created). title: panel title. s_label: name of
            the sequential scheme in the legend. lr: the run's learning rate ``eta``: adds a panel
            with ``eta * sharpness_k`` (the power-iteration estimate of the largest eigenvalue of
            ``H_JC^k``), the line ``eta * lambda = 2`` and the first iteration that reaches it
            (dotted in both panels).
    """
    k = np.asarray(records["k"])
    gap = np.asarray(records["gap"], dtype=float)
    from crosscurv.experiments.studies.regime import EDGE, regime_series

    regime = regime_series(records, lr)
    if regime is None:
        fig, ax = plt.subplots(figsize=(7.5, 4.0), dpi=120)
    else:
        fig, (ax, rx) = plt.subplots(2, 1, figsize=(7.5, 5.6), dpi=120, sharex=True,
                                     gridspec_kw={"height_ratios": [3, 1.4]})
    bound = np.asarray(records.get("bound_bk", np.full_like(gap, np.nan)), dtype=float)
    overflow = np.flatnonzero(np.isinf(bound))
    bound = np.where(np.isfinite(bound), bound, np.nan)  # an overflowed bound (inf) is not drawn
    stacked = np.concatenate([gap] + [np.asarray(records[c], dtype=float) for c in ESTIMATES
                                      if c in records])
    reach = np.abs(stacked[np.isfinite(stacked)])
    if np.isfinite(bound).any():
        # drawn up to 1e3 times the gaps' reach: beyond it the shading is off the axis anyway (and
        # huge finite values overflow matplotlib's transforms)
        cap = 1e3 * float(reach.max()) if reach.size and reach.max() > 0 else np.inf
        shown = np.minimum(bound, cap)
        ax.fill_between(k, -shown, shown, color="#cccccc", alpha=0.35, lw=0,
                        label="Thm 3 bound $G b_K + L b_K^2/2$")
    ax.plot(k, gap, color="#192D46", lw=2.0, label=f"measured $L_{{{s_label}}}-L_{{JC}}$")
    for col, (label, colour) in ESTIMATES.items():
        if col in records:
            ax.plot(k, np.asarray(records[col], dtype=float), color=colour, lw=1.2, ls="--",
                    label=label)
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_yscale("symlog", linthresh=_linthresh(stacked))
    finite = np.abs(stacked[np.isfinite(stacked)])
    if finite.size:
        # the axis follows the gaps and estimates; the bound (which grows like
        # (1 + eta L)^K) is drawn only as far as they reach, and flagged if it exceeds them
        top = 3.0 * float(finite.max()) or 1.0
        ax.set_ylim(-top, top)
        if np.isfinite(bound).any() and np.nanmax(bound) > top:
            inf = f"; inf from k={int(k[overflow[0]])}" if overflow.size else ""
            ax.text(0.99, 0.02, "bound exceeds the axis (max %.2g%s)" % (np.nanmax(bound), inf),
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="#555555")
    ax.set_ylabel(r"$\Delta L_K$ (symlog)")
    ax.set_title(title + "  (positive: JC lower, negative: %s lower)" % s_label, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    if regime is None:
        ax.set_xlabel("iteration $K$")
    else:
        es, cross = regime
        rx.plot(k, es, color="#192D46", lw=1.2,
                label=r"$\eta\,$sharpness$_k$ (power iteration on $H_{JC}^k$)")
        rx.axhline(EDGE, color="#C0392B", lw=1.0, ls="--",
                   label=r"$\eta\lambda = 2$ (edge of stability)")
        if cross is not None:
            for a in (ax, rx):
                a.axvline(cross, color="#C0392B", lw=0.8, ls=":")
            rx.annotate(f"k={cross}", (cross, EDGE), xytext=(4, -12), textcoords="offset points",
                        color="#C0392B", fontsize=7)
        finite = es[np.isfinite(es)]
        rx.set_ylim(0, max(2.4, 1.1 * float(finite.max())))
        rx.set_ylabel(r"$\eta\,\mathrm{sharpness}_k$")
        rx.set_xlabel("iteration $K$")
        rx.legend(fontsize=7, loc="best")
        rx.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def _winner_codes(values: np.ndarray) -> np.ndarray:
    """1 for JC (positive), -1 for S (negative), 0 for a tie, an undecided gap or non-finite."""
    v = np.asarray(values, dtype=float)
    out = np.sign(v)
    out[~np.isfinite(v)] = 0
    return out


def _draw_winners(ax, records: Mapping[str, np.ndarray], rows: Sequence[str], s_label: str) -> int:
    """The winner rows of ``records`` on ``ax`` (one row per source, JC / S / grey); returns the
    number of undecided iterations of the measured gap (``|gap| <= gap_err``, grey in its row)."""
    names = {"gap": "Obs.", "cumulative": "Cum.", "recursive": "Rec.", "jc_only": "JC-only"}
    codes = np.vstack([_winner_codes(records[s]) for s in rows])
    n_undecided = 0
    # a measured gap within its error bound names no winner
    if "gap" in rows and "gap_err" in records:
        from crosscurv.numeric.metrics import undecided

        mask = np.array([undecided(g, e) for g, e in zip(records["gap"], records["gap_err"])],
                        dtype=bool)
        codes[rows.index("gap"), mask] = 0
        n_undecided = int(mask.sum())
    k = np.asarray(records["k"])
    cmap = ListedColormap(["#1f77b4", "#bbbbbb", "#ff7f0e"])  # S, tie, JC
    ax.imshow(codes, aspect="auto", interpolation="nearest", cmap=cmap, vmin=-1, vmax=1,
              extent=(k[0] - 0.5, k[-1] + 0.5, len(rows) - 0.5, -0.5))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([names.get(r, r) for r in rows])
    handles = [
        plt.Rectangle((0, 0), 1, 1, color="#ff7f0e", label="JC lower"),
        plt.Rectangle((0, 0), 1, 1, color="#1f77b4", label=f"{s_label} lower"),
    ]
    ax.legend(handles=handles, fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 1.35), ncol=2)
    return n_undecided


def winner_timeline(
    records: Mapping[str, np.ndarray],
    path: Path,
    title: str,
    sources: Sequence[str] = ("gap", "cumulative", "recursive", "jc_only"),
    s_label: str = "GS",
) -> Path:
    """Winner at every ``k`` for the observed gap and each estimate (paper, Figure 2)."""
    rows = [s for s in sources if s in records]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.1), dpi=120)
    n_undecided = _draw_winners(ax, records, rows, s_label)
    if n_undecided:
        title = f"{title} ({n_undecided} undecided iterations, grey in Obs.)"
    ax.set_xlabel("iteration $K$")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    return _save(fig, path)


def run_figure(records: Mapping[str, np.ndarray], path, title: str, s_label: str = "S") -> Path:
    """One run on one page: ``L_JC^k`` and ``L_S^k`` (top), the measured gap ``L_S^k - L_JC^k`` with
    the recursive, cumulative and JC-only estimates and their error bars ``*_err`` as bands (middle,
    symlog), and the winner of the measured gap and of each estimate per ``k`` (bottom).

    Args:
        records: columns ``k, loss_jc, loss_s, gap`` and those of the estimates (``*_err``,
            ``gap_err`` where the records have them) as 1-D float arrays of equal length;
            non-finite values are left out of the drawing.
        path: PNG file, replaced whole (written beside it first, then renamed: a run killed while it
            draws leaves the previous figure).
        title: the figure's title; ``s_label``: the name of the scheme ``S`` in the legends.
    """
    import os

    k = np.asarray(records["k"], dtype=float)
    fig, (lx, gx, wx) = plt.subplots(3, 1, figsize=(7.5, 7.4), dpi=100, sharex=True,
                                     gridspec_kw={"height_ratios": [2, 3, 1.2]})
    losses = []
    curves = (("loss_jc", "$L_{JC}$", "#E07A1F"), ("loss_s", f"$L_S$ ({s_label})", "#1f77b4"))
    for col, label, colour in curves:
        v = np.asarray(records[col], dtype=float)
        losses.append(v[np.isfinite(v)])
        lx.plot(k, np.where(np.isfinite(v), v, np.nan), color=colour, lw=1.4, label=label)
    every = np.concatenate(losses)
    if every.size and every.min() > 0 and every.max() > 10 * every.min():  # log only over a decade
        lx.set_yscale("log")
    lx.set_ylabel("loss")
    lx.legend(fontsize=7, loc="best")
    lx.grid(alpha=0.3)
    lx.set_title(title, fontsize=9)

    gap = np.asarray(records["gap"], dtype=float)
    stacked = [gap] + [np.asarray(records[c], dtype=float) for c in ESTIMATES if c in records]
    reach = np.abs(np.concatenate(stacked))
    reach = reach[np.isfinite(reach)]
    top = 3.0 * float(reach.max()) if reach.size and reach.max() > 0 else 1.0
    for col, (label, colour) in ESTIMATES.items():
        if col not in records:
            continue
        est = np.asarray(records[col], dtype=float)
        gx.plot(k, np.where(np.isfinite(est), est, np.nan), color=colour, lw=1.1, ls="--",
                label=label)
        if f"{col}_err" in records:
            # capped at the axis: a bar beyond it is off the drawing anyway
            err = np.minimum(np.asarray(records[f"{col}_err"], dtype=float), top)
            ok = np.isfinite(est) & np.isfinite(err)
            gx.fill_between(k, np.where(ok, est - err, np.nan), np.where(ok, est + err, np.nan),
                            color=colour, alpha=0.15, lw=0)
    gx.plot(k, np.where(np.isfinite(gap), gap, np.nan), color="#192D46", lw=1.8,
            label="measured $L_S-L_{JC}$")
    gx.axhline(0.0, color="black", lw=0.6)
    gx.set_yscale("symlog", linthresh=_linthresh(np.concatenate(stacked)))
    gx.set_ylim(-top, top)
    gx.set_ylabel(r"$L_S^k - L_{JC}^k$ (symlog)")
    gx.text(0.99, 0.02,
            f"positive: JC lower, negative: {s_label} lower; bands: each estimate's error bar",
            transform=gx.transAxes, ha="right", va="bottom", fontsize=7, color="#555555")
    gx.legend(fontsize=7, loc="upper left")
    gx.grid(alpha=0.3)

    rows = [c for c in ("gap", "recursive", "cumulative", "jc_only") if c in records]
    n_undecided = _draw_winners(wx, records, rows, s_label)
    undecided = f" ({n_undecided} undecided: |gap| <= gap_err, grey)" if n_undecided else ""
    wx.set_xlabel("iteration $k$" + undecided)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        fig.savefig(part, format="png")
        os.replace(part, path)
    finally:
        plt.close(fig)
        if part.exists():
            part.unlink()
    return path
