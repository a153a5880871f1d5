"""The search study's figure (``reports/figures/advise_search.png``): per group of rows, the named
patterns' predicted gap ``L_S^K - L_JC^K`` against the measured one, one point per budget.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

__all__ = ["named_points", "search_figure"]


def named_points(grouped: dict) -> dict:
    """``{group: [(predicted, measured, certified, right)]}`` of the named patterns other than JC,
    from ``{group: [row]}`` (the study's rows, :func:`crosscurv.experiments.studies.pattern_search.
    validate_problem`), over the rows whose JC run completed; groups without a point left out."""
    out: dict = {}
    for g, rows in grouped.items():
        pts = []
        for r in rows:
            if r["status"] != "complete":
                continue
            for c in r["classes"]:
                p, m = c["predicted"], c["measured"]
                if c["named"] != "jc" and p is not None and m is not None and math.isfinite(
                        p) and math.isfinite(m):
                    pts.append((float(p), float(m), bool(c["certified"]), bool(c["right"])))
        if pts:
            out[g] = pts
    return out


def search_figure(grouped: dict, path) -> Path:
    """Write the figure to ``path`` from ``{group: [row]}``: one panel per group, symlog axes,
    the diagonal (prediction = measurement) dashed; filled: certified, ring: not certified; red:
    not the best measured."""
    from crosscurv.experiments.reports.plotting import _linthresh, _save, plt

    groups = named_points(grouped)
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(4.2 * max(1, len(groups)), 4.2),
                             squeeze=False)
    for ax, (g, pts) in zip(axes[0], groups.items()):
        p, m, cert, right = (np.array(x) for x in zip(*pts))
        lt = _linthresh(np.concatenate([p, m]))
        for sel, face in ((cert, None), (~cert, "none")):
            for ok, colour in ((right, "#1f77b4"), (~right, "#d62728")):
                k = sel & ok
                if k.any():
                    ax.scatter(p[k], m[k], s=18, c=colour if face is None else "none",
                               edgecolors=colour, linewidths=1)
        lo, hi = float(min(p.min(), m.min())), float(max(p.max(), m.max()))
        ax.plot([lo, hi], [lo, hi], "--", color="0.5", lw=1)
        ax.set_xscale("symlog", linthresh=lt)
        ax.set_yscale("symlog", linthresh=lt)
        ax.set_title(f"{g}: {int(right.sum())} of {len(right)} named the best", fontsize=10)
        ax.set_xlabel("predicted gap vs JC at K")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("measured gap vs JC at K")
    fig.tight_layout()
    return _save(fig, path)
