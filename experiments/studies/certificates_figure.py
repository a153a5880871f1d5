"""The certificates study's figure (``reports/figures/certificates.png``): advise's coverage inside
the regime against the safety factor, per half, with the wrong certificates marked, and every
problem's coverage at the code's factor against the goal.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["factor_curves", "certificates_figure"]

#: one colour per half (:data:`crosscurv.experiments.studies.certificates_report.HALVES`)
HALF_COLOURS = {"tune": "#1f77b4", "held-out": "#ff7f0e", "beyond": "#2ca02c", "fresh": "#9467bd"}


def factor_curves(cells_by_factor: dict) -> dict:
    """``{half: [(factor, coverage %, wrong)]}`` from ``{factor: cells}`` (the cells of
    :func:`crosscurv.experiments.studies.certificates_findings.advice_cells` at each factor):
    advise's coverage of the decided iterations inside the regime, pooled over each half's
    problems, and its wrong certified iterations, factors in increasing order."""
    from crosscurv.experiments.studies.certificates_report import HALVES

    out: dict = {}
    for f in sorted(cells_by_factor):
        cells = cells_by_factor[f]
        for h in HALVES:
            sel = [v for (hh, _), v in cells.items() if hh == h]
            if not sel:
                continue
            cert, dec = sum(v["certified"] for v in sel), sum(v["decided_inside"] for v in sel)
            wrong = cert - sum(v["right"] for v in sel)
            out.setdefault(h, []).append((f, 100.0 * cert / dec if dec else math.nan, wrong))
    return out


def certificates_figure(cells_by_factor: dict, code: float, path, goal: float = 50.0) -> Path:
    """Write the figure to ``path`` from ``{factor: cells}`` (``code``, the code's factor, among
    them): left, :func:`factor_curves` (a red ring and the count where a factor certified a wrong
    iteration; the code's factor dashed); right, each problem's coverage at the code's factor,
    lowest at the bottom, coloured by half, the goal dotted."""
    from crosscurv.experiments.reports.plotting import _save, plt

    curves = factor_curves(cells_by_factor)
    probs = sorted(
        ((100.0 * v["certified"] / v["decided_inside"], h, p)
         for (h, p), v in cells_by_factor[code].items() if v["decided_inside"]),
    )
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, max(4.5, 0.17 * len(probs) + 1)),
                                 gridspec_kw={"width_ratios": [1, 1.2]})
    for h, pts in curves.items():
        fs, cov, wrong = zip(*pts)
        ax.plot(fs, cov, "o-", color=HALF_COLOURS.get(h), label=h)
        for f, c, w in pts:
            if w:
                ax.plot([f], [c], "o", ms=12, mfc="none", mec="#d62728")
                ax.annotate(f"{w} wrong", (f, c), textcoords="offset points", xytext=(6, 4),
                            fontsize=8, color="#d62728")
    ax.axvline(code, ls="--", color="0.4", lw=1)
    ax.set_xlabel("safety factor F")
    ax.set_ylabel("coverage of the decided iterations inside the regime (%)")
    ax.set_title(f"advise: coverage against F (the code's: F = {code:g})", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    y = range(len(probs))
    bx.barh(list(y), [c for c, _, _ in probs], color=[HALF_COLOURS.get(h) for _, h, _ in probs])
    bx.set_yticks(list(y), [p for _, _, p in probs], fontsize=7)
    bx.axvline(goal, ls=":", color="0.2", lw=1)
    bx.set_xlim(0, 100)
    bx.set_xlabel(f"coverage inside the regime at F = {code:g} (%)")
    bx.set_title(f"per problem (goal {goal:g}% dotted)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)
