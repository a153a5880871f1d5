"""Table 1 over seeds: mean and [min, max] of every metric per task and estimate.

Per task of a seeds sweep and estimate, the metrics of each run come from
:func:`crosscurv.experiments.reports.table.table_rows`; over the ``n`` seeds each becomes

    mean = (1/n) sum_s m_s,   [min_s m_s, max_s m_s]

(hits: ``h`` and ``n`` separately; ``n/a`` for runs without a column; a NaN ``Correct_K`` is left
out of its mean and says so), beside :data:`crosscurv.experiments.reports.table.PAPER_TABLE1`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from crosscurv.experiments.reports.table import (ESTIMATE_LABELS, ESTIMATE_ROWS, PAPER_TABLE1,
                                                 TASK_LABELS, table_rows)

__all__ = ["Spread", "seed_groups", "seed_rows", "render_seeds_table", "describe_coverage",
           "is_edge_run", "split_edge", "certified_rows", "render_certified_table",
           "defect_columns", "summarize_certified", "render_certified_summary"]

#: metrics aggregated over seeds (``jc_hits``/``s_hits`` are split into ``h`` and ``n``)
SCALARS = ("correct", "mae", "max_ae", "undecided", "h_jc", "n_jc", "h_s", "n_s", "coverage",
           "precision", "calibrated")


class Spread(tuple):
    """``(mean, min, max, n)`` of one metric over seeds (NaN values left out; ``n`` = values used).
    """

    __slots__ = ()

    def __new__(cls, values: Sequence[float]):
        vals = [float(v) for v in values if not (isinstance(v, float) and math.isnan(v))]
        if not vals:
            return super().__new__(cls, (math.nan, math.nan, math.nan, 0))
        return super().__new__(cls, (math.fsum(vals) / len(vals), min(vals), max(vals), len(vals)))

    mean = property(lambda self: self[0])
    lo = property(lambda self: self[1])
    hi = property(lambda self: self[2])
    n = property(lambda self: self[3])


def seed_groups(runs) -> dict:
    """``{(task, preset, lr, pattern, dtype): [runs]}`` of
    :class:`~crosscurv.experiments.studies.collect.StudyRun` (one group per setting repeated over
    seeds, one run per seed), in the order of the runs.  A run of the :func:`is_edge_run` study
    counts as preset ``edge`` under either name (a seed held twice: the longer run).

    The runs of a group are cut to the group's smallest planned ``K`` (a run's first ``K`` records
    are a ``K``-iteration run's records), so that every seed covers the same iterations; a diverged
    run keeps the records it has.
    """
    groups: dict = {}
    for r in runs:
        preset = "edge" if is_edge_run(r) else r.preset
        group = groups.setdefault((r.task, preset, r.lr, r.pattern, r.dtype), {})
        # the same run under both names of the edge preset
        if r.seed not in group or r.K > group[r.seed].K:
            group[r.seed] = r
    groups = {key: list(members.values()) for key, members in groups.items()}
    for key, members in groups.items():
        K = min(r.planned_K for r in members)
        groups[key] = [r.prefix(K) if r.K > K else r for r in members]
    return groups


def _per_run(run, estimates) -> dict:
    out = {}
    for row in table_rows(run.run, estimates):
        out[row["estimate"]] = {
            "correct": row["correct"], "mae": row["mae"], "max_ae": row["max_ae"],
            "undecided": row.get("undecided", 0),
            "h_jc": row["jc_hits"][0], "n_jc": row["jc_hits"][1],
            "h_s": row["s_hits"][0], "n_s": row["s_hits"][1],
            "coverage": row.get("coverage", math.nan), "precision": row.get("precision", math.nan),
            "calibrated": row.get("calibrated", math.nan),
        }
    return out


def seed_rows(runs, estimates: Sequence[str] = ESTIMATE_ROWS) -> list[dict]:
    """One row per setting group and estimate.

    Each row: ``task, preset, lr, pattern, K`` (records per run: the smallest of the group),
    ``seeds`` (sorted), ``statuses`` (``{status: count}``) and, for each key of :data:`SCALARS`, a
    :class:`Spread` over the seeds; the per-seed values are under ``per_seed`` (``{seed: {key:
    value}}``).
    """
    rows = []
    for (task, preset, lr, pattern, _dtype), members in seed_groups(runs).items():
        per = {r.seed: _per_run(r, estimates) for r in members}
        statuses: dict = {}
        for r in members:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        for est in estimates:
            have = {s: m[est] for s, m in per.items() if est in m}
            if not have:
                continue
            row = {"task": task, "preset": preset, "lr": lr, "pattern": pattern, "estimate": est,
                   "K": min(r.K for r in members), "K_max": max(r.K for r in members),
                   "seeds": sorted(have), "statuses": statuses, "per_seed": have}
            for key in SCALARS:
                row[key] = Spread([have[s][key] for s in sorted(have)])
            rows.append(row)
    return rows


def _num(x, fmt) -> str:
    return "nan" if x != x else fmt(x)


def _spread(sp: Spread, fmt) -> str:
    if sp.n == 0:
        return "nan"
    if sp.lo == sp.hi:
        return _num(sp.mean, fmt)
    return f"{_num(sp.mean, fmt)} [{_num(sp.lo, fmt)}, {_num(sp.hi, fmt)}]"


def _int_range(sp: Spread) -> str:
    return f"{sp.lo:g}" if sp.lo == sp.hi else f"{sp.lo:g}-{sp.hi:g}"


def _hits(h: Spread, n: Spread) -> str:
    """``h/n`` when constant over seeds, else ``mean h/mean n (h a-b, n c-d)``."""
    if h.n == 0:
        return "nan"
    if h.lo == h.hi and n.lo == n.hi:
        return f"{h.mean:g}/{n.mean:g}"
    return f"{h.mean:.1f}/{n.mean:.1f} (h {_int_range(h)}, n {_int_range(n)})"


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _g(x: float) -> str:
    return f"{x:.3g}"


def render_seeds_table(rows: Sequence[dict], fmt: str = "github", paper: bool = True) -> str:
    """Table 1 over seeds (markdown ``github`` or plain ``simple``), the paper's numbers beside
    ours.

    Cells are ``mean [min, max]`` over the seeds (a single value when all seeds agree); hits are
    ``mean h/mean n`` with the ranges of ``h`` and ``n``; the paper's values are from one run at K =
    500.
    """
    from tabulate import tabulate

    body = []
    for r in rows:
        p = PAPER_TABLE1.get(r["task"], {}).get(r["estimate"]) if paper else None
        seeds = r["seeds"]
        cells = [
            TASK_LABELS.get(r["task"], r["task"]),
            ESTIMATE_LABELS.get(r["estimate"], r["estimate"]),
            str(r["K"]) if r["K"] == r["K_max"] else f"{r['K']}-{r['K_max']}",
            f"{len(seeds)} ({_seed_list(seeds)})",
            _spread(r["correct"], _pct) + ("" if r["correct"].n == len(seeds)
                                           else f" ({r['correct'].n} seeds)"),
        ]
        if paper:
            cells.append(_pct(p["correct"]) if p else "-")
        cells.append(_hits(r["h_jc"], r["n_jc"]))
        if paper:
            cells.append(f"{p['jc_hits'][0]}/{p['jc_hits'][1]}" if p else "-")
        cells.append(_hits(r["h_s"], r["n_s"]))
        if paper:
            cells.append(f"{p['s_hits'][0]}/{p['s_hits'][1]}" if p else "-")
        no_gap = r["estimate"] == "majority"  # a constant names a winner, it estimates no gap
        cells.append("n/a" if no_gap else _spread(r["mae"], _g))
        if paper:
            cells.append(_g(p["mae"]) if p else "-")
        cells.append("n/a" if no_gap else _spread(r["max_ae"], _g))
        if paper:
            cells.append(_g(p["max_ae"]) if p else "-")
        cells.append(_spread(r["undecided"], lambda x: f"{x:.3g}"))
        cells += [_spread(r[key], _pct) if key in r and r[key].n else "n/a" for key in ("coverage",
                                                                                        "precision",
                                                                                           "calibrated")]
        body.append(cells)
    if paper:
        head = ["Task", "Estimate", "K", "Seeds", "Correct ↑", "paper", "JC hits ↑", "paper",
                "GS hits ↑", "paper", "MAE ↓", "paper", "Max. AE ↓", "paper", "Undecided",
                "Coverage ↑", "Precision ↑", "Calibrated ↑"]
    else:
        head = ["Task", "Estimate", "K", "Seeds", "Correct ↑", "JC hits ↑", "GS hits ↑", "MAE ↓",
                "Max. AE ↓", "Undecided", "Coverage ↑", "Precision ↑", "Calibrated ↑"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


def _seed_list(seeds) -> str:
    """``0-4`` for consecutive seeds, else ``0, 2, 3``."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def describe_coverage(sweep) -> str:
    """One sentence: per task, the runs and seeds the table covers, at which K, which runs were cut
    to it, and what was left out (unfinished)."""
    parts = []
    for task in sweep.tasks():
        rs = [r for r in sweep.runs if r.task == task]
        K = min(r.planned_K for r in rs)
        cut = sorted(r.seed for r in rs if r.K > K)
        diverged = [r for r in rs if r.status == "diverged" and r.K < K]
        text = f"{task}: {len(rs)} run(s), seeds {_seed_list([r.seed for r in rs])}, K = {K}"
        if cut:
            text += (f" (seed{'s' if len(cut) > 1 else ''} {_seed_list(cut)} cut from "
                     f"{', '.join(sorted({f'K = {r.K}' for r in rs if r.K > K}))})")
        for r in diverged:
            text += f", seed {r.seed} diverged after k = {r.K}"
        parts.append(text)
    text = "; ".join(parts)
    if sweep.unfinished:
        text += f"; not finished (left out): {', '.join(sweep.unfinished)}"
    return text + "."


def is_edge_run(run) -> bool:
    """Whether a seeds-study run belongs to the edge-of-stability study: the ``edge`` preset, or
    (runs made before that preset had its name) a built-in task's ``default`` sizes at the ``edge``
    learning rate."""
    from crosscurv.experiments.tasks import TASKS, preset_settings

    if run.preset == "edge":
        return True
    if run.preset != "default" or run.task not in TASKS:
        return False
    return run.lr == preset_settings(run.task, "edge")["lr"] != preset_settings(run.task,
                                                                                "default")["lr"]


def split_edge(runs) -> tuple[list, list]:
    """``(runs inside the regime's study, edge-of-stability runs)`` of :func:`is_edge_run`, order
    kept.
    """
    inside, edge = [], []
    for r in runs:
        (edge if is_edge_run(r) else inside).append(r)
    return inside, edge


def defect_columns(columns, lr: float, estimate: str) -> tuple[list, list] | None:
    """``(intervals, certificates)`` of ``estimate`` by
    :func:`crosscurv.numeric.error_estimates.defect_certificates` (the defect interval, or the
    recorded bound ``{estimate}_err`` where the records hold it; regime: ``eta * sharpness_k`` of
    :func:`crosscurv.experiments.studies.regime.regime_series` below 2 at every ``j <= k``);
    ``None`` without a sharpness column."""
    from crosscurv.experiments.studies.regime import regime_series
    from crosscurv.numeric.error_estimates import defect_certificates

    series = regime_series(columns, lr)
    if series is None:
        return None
    bound = columns.get(f"{estimate}_err")
    if bound is not None and not np.isfinite(bound).any():
        bound = None
    return defect_certificates(columns["gap"], columns[estimate], series[0], bound)


def certified_rows(runs, estimates: Sequence[str] = ESTIMATE_ROWS) -> list[dict]:
    """Per run (cut like :func:`seed_groups`) and estimate: Coverage and Precision of the certified
    winners of the certificate the records hold in ``{estimate}_cert``
    (:mod:`crosscurv.numeric.certificate` for runs recorded since it, ``|estimate| >
    {estimate}_err`` before; key ``bound``: over all decided iterations) and of the defect interval
    (``defect_all``, ``defect_before``: before the first ``k`` with ``eta * sharpness_k >= 2``), the
    defect interval's calibration (``defect_calibrated``: share of the iterations where it is
    defined that it holds ``gap - estimate``), the largest converged ``eta * lambda_max`` (NaN for
    records without it), the first crossing of 2 and the observed winner switches."""
    from crosscurv.experiments.studies.regime import observed_switches, regime_series
    from crosscurv.numeric.error_estimates import defect_calibration
    from crosscurv.numeric.metrics import certified_metrics

    out = []
    for members in seed_groups(runs).values():
        for r in members:
            cols = r.columns()
            series = regime_series(cols, r.lr)
            if series is None:
                continue
            cross = series[1]
            K = len(cols["k"])
            cut = K if cross is None else cross - 1
            lam = cols.get("lambda_max")
            top = float(r.lr * np.nanmax(lam)) if lam is not None and np.isfinite(
                lam).any() else math.nan
            for e in estimates:
                dc = defect_columns(cols, r.lr, e)
                if dc is None:
                    continue
                intervals, cert = dc
                cert = np.asarray(cert, dtype=float)
                defined = [i for i, (lo, hi) in enumerate(intervals) if math.isfinite(lo)]
                has_bound = f"{e}_cert" in cols and np.isfinite(cols[f"{e}_cert"]).any()
                g, x, ge = cols["gap"], cols[e], cols["gap_err"]
                out.append({
                    "task": r.task, "lr": r.lr, "seed": r.seed, "K": r.K, "status": r.status,
                    "estimate": e,
                    "cross": cross, "max_eta_lambda": top, "switches": observed_switches(cols),
                    "bound": certified_metrics(g, x, cols[f"{e}_cert"], ge) if has_bound else None,
                    "defect_all": certified_metrics(g, x, cert, ge),
                    "defect_before": certified_metrics(g[:cut], x[:cut], cert[:cut], ge[:cut])
                    if cut else None,
                    "defect_calibrated": defect_calibration(g[defined], x[defined], [intervals[i]
                    for i in defined])
                    if defined else math.nan,
                })
    return out


def _cp(m) -> str:
    if m is None:
        return "-"
    cov = _pct(m["coverage"]) if m["coverage"] == m["coverage"] else "n/a"
    prec = _pct(m["precision"]) if m["precision"] == m["precision"] else "n/a"
    return f"{cov} / {prec}"


def render_certified_table(rows: Sequence[dict], fmt: str = "github") -> str:
    """One line per run and estimate: regime indicators, ``Coverage / Precision`` of the bound's
    certificates, of the defect interval's before the first crossing of 2 and over the run, and the
    defect calibration."""
    from tabulate import tabulate

    body = []
    for r in rows:
        body.append([r["task"], f"{r['lr']:g}", str(r["seed"]),
                     str(r["K"]) + ("" if r["status"] == "complete" else f" ({r['status']})"),
                     "n/a" if r["max_eta_lambda"] != r["max_eta_lambda"]
                     else f"{r['max_eta_lambda']:.3g}",
                     "never" if r["cross"] is None else str(r["cross"]), str(r["switches"]), r[
                     "estimate"],
                     _cp(r["bound"]) if r["bound"] is not None else "n/a", _cp(r["defect_before"]),
                     _cp(r["defect_all"]), _pct(r["defect_calibrated"])])
    head = ["task", "eta", "seed", "K", "max eta*lambda_max", "first k with eta*sharpness >= 2",
            "winner switches", "estimate", "recorded certificate (`*_cert`): Cov. / Prec.",
            "defect, before the edge: Cov. / Prec.", "defect, all: Cov. / Prec.",
            "defect Calibrated"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


def summarize_certified(rows: Sequence[dict]) -> list[dict]:
    """Per task and estimate, pooled over the runs: counts summed, ``before`` (defect, before the
    first crossing), ``all`` (defect, every iteration) and ``bound`` (every iteration) as Coverage /
    Precision, and the mean defect calibration."""
    groups: dict = {}
    for r in rows:
        g = groups.setdefault((r["task"], r["estimate"]), {"runs": 0, "cal": [], "before": [0, 0,
                                                                                            0],
                                                           "all": [0, 0, 0], "bound": [0, 0, 0]})
        g["runs"] += 1
        if r["defect_calibrated"] == r["defect_calibrated"]:
            g["cal"].append(r["defect_calibrated"])
        for key, m in (("before", r["defect_before"]), ("all", r["defect_all"]), ("bound", r[
                "bound"])):
            if m is not None:
                g[key][0] += m["decided"]
                g[key][1] += m["certified"]
                g[key][2] += m["correct"]
    out = []
    for (task, est), g in groups.items():
        def metrics(c):
            d, n, ok = c
            return {"decided": d, "certified": n, "correct": ok,
                    "coverage": 100.0 * n / d if d else math.nan, "precision": 100.0 * ok / n if n
                    else math.nan}
        out.append({"task": task, "estimate": est, "runs": g["runs"], "before": metrics(g[
            "before"]),
                    "all": metrics(g["all"]), "bound": metrics(g["bound"]),
                    "calibrated": math.fsum(g["cal"]) / len(g["cal"]) if g["cal"] else math.nan})
    return out


def render_certified_summary(summary: Sequence[dict], fmt: str = "github") -> str:
    """:func:`summarize_certified` as a table (``correct/certified of decided`` with each
    percentage).
    """
    from tabulate import tabulate

    def cell(m):
        if not m["decided"]:
            return "-"
        return f"{_cp(m)} ({m['correct']}/{m['certified']} of {m['decided']})"

    body = [[TASK_LABELS.get(s["task"], s["task"]), ESTIMATE_LABELS.get(s["estimate"], s[
        "estimate"]), str(s["runs"]),
             cell(s["before"]), cell(s["all"]), cell(s["bound"]), _pct(s["calibrated"])]
            for s in summary]
    head = ["Task", "Estimate", "runs", "defect, before the edge: Coverage / Precision",
            "defect, all iterations: Coverage / Precision",
            "recorded certificate (`*_cert`), all iterations: Coverage / Precision",
            "defect Calibrated (mean)"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)
