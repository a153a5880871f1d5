"""Figure 1's layout: per panel both training-loss curves and ``Delta L = L_seq - L_sim`` on a right
axis.

Blue: the sequential implementation (GS-like, FedAlt, alternating); orange: the simultaneous one
(JC, FedSim); green dash-dotted on the right axis: their difference (the paper's colours). ``mlp``
adds exact GS (purple, dashed) and its difference to JC (purple dotted, right axis). The curves are
the first seed's; the other seeds' differences are drawn thin. When a sequential run diverges, the
left axis stays on the finite curves and the right axis turns symmetric-logarithmic, both flagged on
the panel.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .analysis import eval_series

__all__ = ["figure1", "criterion_figure", "SEQ", "SIM", "DIFF", "GS"]

SEQ, SIM, DIFF, GS = "#1f77b4", "#ff7f0e", "#2ca02c", "#7b3fb0"
TITLES = {"mlp": "(a) 8-layer MLP, MNIST", "fl": "(b) federated ResNet-18, CIFAR-10",
          "lora": "(c) T5 LoRA, sentiment"}


def _symlog_ticks(values) -> tuple[float, list]:
    """``(linthresh, ticks)`` for a symmetric-log axis over ``values``: at most ~4 decades labelled
    per side."""
    nz = np.abs(values[np.isfinite(values) & (values != 0)])
    if not nz.size:
        return 1e-12, [0.0]
    lt = 10.0 ** np.floor(np.log10(np.percentile(nz, 25)))
    lo, hi = int(round(np.log10(lt))), int(np.ceil(np.log10(nz.max())))
    step = max(1, (hi - lo) // 3)
    pos = [10.0**e for e in range(lo, hi + 1, step)]
    return lt, [-p for p in pos[::-1]] + [0.0] + pos


def _panel(ax, panel: str, runs: Sequence[Mapping]) -> None:
    first = runs[0]
    labels = first["summary"]["labels"]
    ks, seq, sim, diff = (np.asarray(a, dtype=float) for a in eval_series(first["records"]))
    ax.plot(ks, sim, color=SIM, lw=1.6, label=labels["sim"])
    ax.plot(ks, seq, color=SEQ, lw=1.6, label=labels["seq"])
    gs = np.asarray([r["eval_gs"] for r in first["records"] if math.isfinite(r["eval_sim"])],
                    dtype=float)
    has_gs = np.isfinite(gs).any()
    if has_gs:
        ax.plot(ks, gs, color=GS, lw=1.2, ls="--", label=labels.get("gs") or "exact GS")
    top = max(float(np.nanmax(sim[np.isfinite(sim)])), float(np.nanmax(gs[np.isfinite(gs)]))
              if has_gs else 0.0)
    notes = []
    if not np.isfinite(seq).all() or np.nanmax(np.abs(seq)) > 3 * top:
        ax.set_ylim(0, 1.15 * top)
        notes.append(f"{labels['seq'].split(' (')[0]} leaves the axis: max loss "
                     f"{np.nanmax(seq):.2g}")
    ax.set_xlabel(first["summary"]["step_unit"])
    ax.set_ylabel("training loss")
    ax.set_title(TITLES.get(panel, panel), fontsize=10)
    ax.grid(alpha=0.3)
    right = ax.twinx()
    all_d = []
    for j, run in enumerate(runs):
        kk, _, _, dd = (np.asarray(a, dtype=float) for a in eval_series(run["records"]))
        seed = run["summary"]["seed"]
        right.plot(kk, dd, color=DIFF, ls="-." if j == 0 else ":", lw=1.6 if j == 0 else 0.8,
                   alpha=1.0 if j == 0 else 0.6, label=r"$\Delta L$ seed %d" % seed if j < 3
                   else None)
        all_d.append(dd[np.isfinite(dd)])
    if has_gs:
        right.plot(ks, gs - sim, color=GS, ls=":", lw=1.0, label=r"exact GS $-$ JC")
        all_d.append((gs - sim)[np.isfinite(gs - sim)])
    right.axhline(0.0, color=DIFF, lw=0.6, alpha=0.6)
    d = np.concatenate(all_d) if all_d else np.zeros(1)
    nz = np.abs(d[d != 0])
    if nz.size and nz.max() / max(np.percentile(nz, 50), 1e-300) > 1e3:
        lt, ticks = _symlog_ticks(d)
        right.set_yscale("symlog", linthresh=lt)
        right.set_yticks(ticks)
        notes.append("right axis symmetric-log")
    if notes:
        ax.set_title(TITLES.get(panel, panel) + "\n(" + "; ".join(notes) + ")", fontsize=9)
    right.set_ylabel(r"$\Delta L = L_{seq} - L_{sim}$", color=DIFF)
    right.tick_params(axis="y", colors=DIFF, labelsize=8)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3,
              frameon=False)


def figure1(runs: Mapping[str, Sequence[Mapping]], path) -> Path:
    """The panels of ``runs`` (``{panel: [loaded runs, first seed first]}``) side by side; saved as
    PNG."""
    names = list(runs)
    fig, axes = plt.subplots(1, len(names), figsize=(5.4 * len(names), 4.6), dpi=110, squeeze=False)
    for ax, panel in zip(axes[0], names):
        _panel(ax, panel, runs[panel])
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def criterion_figure(runs: Mapping[str, Sequence[Mapping]], path) -> Path:
    """Per panel: the optimizer-aware estimate ``eta^2 C_opt`` against the measured next-step
    difference (all seeds)."""
    names = list(runs)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), dpi=110, squeeze=False)
    for ax, panel in zip(axes[0], names):
        est = np.asarray([p["est"] for r in runs[panel] for p in r["probes"]], dtype=float)
        meas = np.asarray([p["meas_seq"] for r in runs[panel] for p in r["probes"]], dtype=float)
        estp = np.asarray([p["est_plain"] for r in runs[panel] for p in r["probes"]], dtype=float)
        measp = np.asarray([p["meas_plain"] for r in runs[panel] for p in r["probes"]], dtype=float)
        ax.scatter(measp, estp, s=14, color="#888888", label=r"$\eta^2 C_S$ vs exact plain steps")
        ax.scatter(meas, est, s=14, color=DIFF, label=r"$\eta^2 C_{opt}$ vs practical steps")
        allv = np.concatenate([est, meas, estp, measp])
        v = np.abs(allv[np.isfinite(allv) & (allv != 0)])
        lim = float(v.max()) * 1.5 if v.size else 1.0
        lt, ticks = _symlog_ticks(allv)
        ax.set_xscale("symlog", linthresh=lt)
        ax.set_yscale("symlog", linthresh=lt)
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.tick_params(labelsize=7)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.axhline(0, color="black", lw=0.5)
        ax.axvline(0, color="black", lw=0.5)
        ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.5, ls="--")
        ax.set_xlabel("measured next-step difference (seq - sim)")
        ax.set_ylabel("one-step estimate")
        ax.set_title(TITLES.get(panel, panel) + ": criterion", fontsize=9)
        ax.legend(fontsize=6, loc="upper left")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
