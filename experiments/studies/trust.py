"""Calibration, coverage and precision of the error estimates, per task, learning rate and estimate.

Per built-in task and learning rate, one run (:func:`crosscurv.experiments.runs.run`, seed 0, one
thread) in ``OUT/runs/TASK_lrLR`` (existing runs are read, not rerun); from its records:
``Calibrated`` (``|estimate - gap| <= err``), ``Coverage`` / ``Precision`` of the certified winners
(:func:`crosscurv.numeric.metrics.certified_metrics`) overall, before and after the first ``eta *
max(lambda_max, sharpness) >= 2``, and the regime. Writes ``OUT/trust.md`` and
``OUT/trust_regime.png`` (:func:`regime_figure`)::

    python -m crosscurv.experiments.studies.trust --out reports/trust --tasks mlp,fl --iters 100
"""

from __future__ import annotations

import math
import os
import sys
from typing import Mapping, Sequence

from crosscurv.experiments.reports.numbers import percent

__all__ = ["run_rows", "render", "binned", "regime_figure", "trust_study"]

ESTIMATES = ("recursive", "cumulative", "jc_only")


def _split_at_crossing(columns, lr):
    from crosscurv.experiments.studies.regime import regime_series

    series = regime_series(columns, lr)
    if series is None:
        return None
    return series[1]


def run_rows(columns, lr: float) -> list[dict]:
    """One row per estimate of one run's columns (``{name: list}``), see the module docstring."""
    from crosscurv.numeric.metrics import calibration, certified_metrics

    K = len(columns["k"])
    cross = _split_at_crossing(columns, lr)
    cut = K if cross is None else cross - 1  # records before the first crossing: k = 1..cross-1
    lam = [x for x in columns.get("lambda_max", []) if x == x]
    hv = [x for x in columns.get("sharpness_hvps", []) if x == x]
    rows = []
    for e in ESTIMATES:
        def part(a, b):
            sl = slice(a, b)
            if b is not None and b <= a:
                return None
            return certified_metrics(columns["gap"][sl], columns[e][sl], columns[f"{e}_cert"][sl],
                                     columns["gap_err"][sl])
        rows.append({
            "estimate": e, "K": K, "cross": cross,
            "max_eta_lambda": lr * max(lam) if lam else math.nan,
            "hvps": sum(hv) / len(hv) if hv else math.nan,
            "calibrated": calibration(columns["gap"], columns[e], columns[f"{e}_err"]),
            "all": part(0, None), "before": part(0, cut), "after": part(cut, None)
            if cross is not None else None,
        })
    return rows


def binned(columns, lr: float, estimate: str, edges) -> list[dict]:
    """Coverage and precision of ``estimate``'s certificates per bin of ``eta * sharpness_k``
    (``max(lambda_max, sharpness)``, :func:`crosscurv.experiments.studies.regime.regime_series`);
    ``edges`` ascending.

    Returns one dict per bin: ``lo, hi`` and :func:`crosscurv.numeric.metrics.certified_metrics` of
    its iterations (``None`` for an empty bin).
    """
    import numpy as np

    from crosscurv.experiments.studies.regime import regime_series
    from crosscurv.numeric.metrics import certified_metrics

    series = regime_series(columns, lr)
    out = []
    if series is None:
        return out
    s = series[0]
    for lo, hi in zip(edges, edges[1:]):
        idx = np.flatnonzero((s >= lo) & (s < hi))
        pick = lambda name: [columns[name][i] for i in idx]  # noqa: E731
        m = (certified_metrics(pick("gap"), pick(estimate), pick(f"{estimate}_cert"),
                               pick("gap_err")) if idx.size else None)
        out.append({"lo": lo, "hi": hi, "metrics": m})
    return out


def regime_figure(runs: list, path: str) -> str:
    """Precision and coverage of the certified winners against ``eta * sharpness_k`` (log bins), one
    panel per estimate, one line per run ``(task, lr, columns)``; the edge of stability dashed.
    Written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    edges = list(np.logspace(-4, 2, 13))
    fig, axes = plt.subplots(2, len(ESTIMATES), figsize=(4 * len(ESTIMATES), 6), sharex=True,
                             sharey=True)
    for j, e in enumerate(ESTIMATES):
        for task, lr, cols in runs:
            bins = [b for b in binned(cols, lr, e, edges) if b["metrics"] and b["metrics"][
                "decided"]]
            x = [np.sqrt(b["lo"] * b["hi"]) for b in bins]
            axes[0, j].plot(x, [b["metrics"]["precision"] for b in bins], "o-",
                            label=f"{task} lr {lr:g}")
            axes[1, j].plot(x, [b["metrics"]["coverage"] for b in bins], "o-",
                            label=f"{task} lr {lr:g}")
        axes[0, j].set_title(e)
        for i in (0, 1):
            axes[i, j].set_xscale("log")
            axes[i, j].axvline(2.0, ls="--", c="k", lw=0.8)
            axes[i, j].set_ylim(-5, 105)
        axes[1, j].set_xlabel(r"$\eta\,\mathrm{sharpness}_k$")
    axes[0, 0].set_ylabel("precision of certified (%)")
    axes[1, 0].set_ylabel("coverage of decided (%)")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _pct(x) -> str:
    return percent(x, missing="n/a")


def _cp(m) -> str:
    if m is None:
        return "-"
    return (f"{_pct(m['coverage'])} / {_pct(m['precision'])} ({m['correct']}/{m['certified']} of "
            f"{m['decided']})")


def render(results: list) -> str:
    """``trust.md`` from ``[(task, lr, rows)]``."""
    lines = ["# Error estimates: calibration, coverage and precision", "",
             "Generated by `python -m crosscurv.experiments.studies.trust` "
             "(`numeric/error_estimates.py`, `docs/error_estimates.md`). One run per task and "
             "learning rate, seed 0. Calibrated: share of iterations with `|estimate - gap| <= "
             "err`. Coverage / Precision: certified share of the decided iterations / correct "
             "among the certified (correct/certified of decided), over all iterations, before the "
             "first `k` with `eta * sharpness >= 2` and after it. HVPs: mean products per "
             "iteration spent on the converged extremes.", "",
             "| Task | lr | K | max eta*lambda_max | first k >= 2 | HVPs/iter | Estimate | "
             "Calibrated | Coverage / Precision (all) | before the edge | after the edge |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for task, lr, rows in results:
        for r in rows:
            lines.append(f"| {task} | {lr:g} | {r['K']} | {r['max_eta_lambda']:.3g} | "
                         f"{'never' if r['cross'] is None else r['cross']} | {r['hvps']:.2f} | "
                         f"{r['estimate']} | {_pct(r['calibrated'])} | {_cp(r['all'])} | "
                         f"{_cp(r['before'])} | {_cp(r['after'])} |")
    return "\n".join(lines) + "\n"


def trust_study(out: str, tasks: Sequence[str] = ("mlp", "fl", "lora"), preset: str = "default",
                iters: int = 100, lrs: Mapping[str, Sequence[float]] | None = None) -> str:
    """Run each task at each learning rate (``lrs[task]``, default the preset's; runs kept in
    ``OUT/runs/<task>_lr<lr>`` are reused), one intra-op thread, and write ``OUT/trust.md`` with the
    figure ``OUT/trust_regime.png``; returns the path of ``trust.md``."""
    import torch

    torch.set_num_threads(1)
    from crosscurv.experiments import runs
    from crosscurv.experiments.tasks import preset_settings
    from crosscurv.numeric.records import RECORDS_FILE, read_records, records_columns

    lrs = lrs or {}
    results, columns = [], []
    for name in tasks:
        for lr in lrs.get(name, [preset_settings(name, preset)["lr"]]):
            d = os.path.join(out, "runs", f"{name}_lr{lr:g}")
            if not os.path.exists(os.path.join(d, RECORDS_FILE)):
                run = runs.RunDescription(name, preset=preset, lr=lr, iters=iters, threads=1)
                res, _ = runs.run(run, d)
                print(f"{name} lr {lr:g}: {res.message}", file=sys.stderr, flush=True)
            cols = records_columns(read_records(os.path.join(d, RECORDS_FILE)))
            results.append((name, lr, run_rows(cols, lr)))
            columns.append((name, lr, cols))
    os.makedirs(out, exist_ok=True)
    regime_figure(columns, os.path.join(out, "trust_regime.png"))
    with open(os.path.join(out, "trust.md"), "w", encoding="utf-8") as fh:
        fh.write(render(results) + "\n![precision and coverage against eta * "
                                   "sharpness](trust_regime.png)\n")
    return os.path.join(out, "trust.md")


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import trust

    sys.exit(trust())
