"""Log-log figures of the error-scaling study (matplotlib PNG).

One figure per quantity (``one_step``, ``recursion``, ``cumulative`` with ``jc_only``,
``cumulative_vs_K``, ``order_invariance``): ``|error|`` against ``eta`` (or ``K``) for every
problem, filled markers for the points kept, hollow ones for the points dropped below the round-off
floor, and a dotted reference line of the expected slope through each problem's smallest kept point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["FIGURES", "scaling_figure", "write_figures"]

#: file stem -> (quantities drawn, title, x label)
FIGURES = {
    "scaling_one_step": (("one_step", "one_step_apriori"),
                         "One-step remainder (L_S - L_JC) - eta^2 C_S  (Theorem 1)", "eta"),
    "scaling_recursion": (("recursion",), "Recursion remainder gap - recursive at eta K = T  "
                                          "(Theorem 2)", "eta"),
    "scaling_cumulative": (("cumulative", "jc_only"),
                           "Cumulative error at fixed T = eta K  (Theorem 3)", "eta"),
    "scaling_cumulative_vs_K": (("cumulative_vs_K",),
                                "Cumulative error against K at fixed eta  (Theorem 3)", "K"),
    "scaling_order_invariance": (("order_invariance",),
                                 "Full GS in two block orders: L_GS(o1) - L_GS(o2)", "eta"),
}

_COLORS = ["#7954C5", "#008E9B", "#E07A1F", "#C0392B", "#2E86C1"]
_STYLES = {"one_step": "-", "one_step_apriori": "--", "recursion": "-", "cumulative": "-",
           "jc_only": "--", "cumulative_vs_K": "-", "order_invariance": "-"}
_LABELS = {"one_step_apriori": " (a-priori grid, ReLU kinks)", "jc_only": " (JC-only)"}


def scaling_figure(studies: Mapping[str, Mapping], quantities: Sequence[str], path: Path,
                   title: str, xlabel: str) -> Path:
    """Draw ``|error|`` against the grid variable for each problem.

    Args:
        studies: ``{problem: {quantity: Study}}``.
        quantities: which studies of each problem to draw (missing ones skipped).
        path: PNG file (parent folders are created).
        title, xlabel: axis texts.
    """
    fig, ax = plt.subplots(figsize=(7.0, 4.8))
    for c, (problem, qs) in enumerate(studies.items()):
        color = _COLORS[c % len(_COLORS)]
        for q in quantities:
            st = qs.get(q)
            if st is None:
                continue
            xs = [pt["x"] for pt in st.points]
            ys = [abs(pt["error"]) if pt["error"] != 0 else float("nan") for pt in st.points]
            label = f"{problem}{_LABELS.get(q, '')}: order {st.fitted:.2f}"
            ax.plot(xs, ys, _STYLES.get(q, "-"), color=color, lw=1.2, label=label)
            kept = [(x, y) for x, y, pt in zip(xs, ys, st.points) if pt["kept"]]
            drop = [(x, y) for x, y, pt in zip(xs, ys, st.points) if not pt["kept"]]
            if kept:
                ax.plot(*zip(*kept), "o", color=color, ms=5)
            if drop:
                ax.plot(*zip(*drop), "o", mfc="none", color=color, ms=5)
            if kept and q != "one_step_apriori":
                x0, y0 = kept[-1]
                ref = [y0 * (x / x0) ** st.expected for x in xs]
                ax.plot(xs, ref, ":", color="grey", lw=0.9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("|error|")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    # a study whose every point is below its floor has no labelled line
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    ax.text(0.99, 0.01, "dotted: expected slope; hollow: below the round-off floor",
            transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="grey")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_figures(studies: Mapping[str, Mapping], folder: Path) -> list[Path]:
    """All :data:`FIGURES` into ``folder`` (``folder/scaling_*.png``)."""
    out = []
    for stem, (quantities, title, xlabel) in FIGURES.items():
        out.append(scaling_figure(studies, quantities, Path(folder) / f"{stem}.png", title, xlabel))
    return out
