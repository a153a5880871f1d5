"""Figure of a sweep: agreement (``Correct_K``) against the learning rate, per estimate.

One panel per task/preset/pattern/K; x: learning rate (log axis), y: ``Correct_K`` in percent; one
colour per estimate (recursive, cumulative, jc_only), a dot per seed and a line through the seed
means. Only complete runs are drawn (a diverged run's summary holds no metrics: its records run into
the divergence); learning rates where a run did not complete are marked with a grey cross on the
axis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = ["agreement_figure"]


def agreement_figure(rows: Sequence[dict], path) -> Path | None:
    """Write the figure to ``path`` (PNG); ``None`` when no run completed."""
    import numpy as np

    from matplotlib.ticker import NullFormatter

    from crosscurv.experiments.reports.plotting import ESTIMATES, _save, plt

    panels: dict = {}
    for r in rows:
        if r["lr"] is None:
            continue
        key = (r["task"], r["preset"], r["pattern"], r["iters"])
        panels.setdefault(key, []).append(r)
    if not any(r["status"] == "complete" for rs in panels.values() for r in rs):
        return None
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), dpi=120, squeeze=False)
    for ax, (key, rs) in zip(axes[0], panels.items()):
        ok = [r for r in rs if r["status"] == "complete"]
        lrs = sorted({r["lr"] for r in ok})
        for est, (label, colour) in ESTIMATES.items():
            col = f"{est}_correct"
            pts = [(r["lr"], r[col]) for r in ok if r[col] is not None]
            if not pts:
                continue
            x, y = zip(*pts)
            ax.scatter(x, y, s=12, color=colour, alpha=0.6)
            means = [np.mean([v for lr, v in pts if lr == l]) for l in lrs if any(lr == l for lr,
                                                                                  _ in pts)]
            ax.plot([l for l in lrs if any(lr == l for lr, _ in pts)], means, color=colour,
                    label=label, lw=1.4)
        bad = sorted({r["lr"] for r in rs if r["status"] != "complete"})
        if bad:
            ax.scatter(bad, [0] * len(bad), marker="x", color="grey", label="not complete",
                       clip_on=False)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        if lrs:
            ax.set_xticks(lrs, [f"{l:g}" for l in lrs])
        ax.set_ylim(-3, 103)
        ax.axhline(95, color="black", lw=0.6, ls=":")
        task, preset, pattern, iters = key
        ax.set_title(f"{task} {preset or ''} {pattern or ''} K={ok[0]['iters'] if ok else iters}",
                     fontsize=9)
        ax.set_xlabel("learning rate $\\eta$")
        ax.set_ylabel("Correct$_K$ (%)")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return _save(fig, path)
