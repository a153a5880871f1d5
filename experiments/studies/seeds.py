"""Table 1 over seeds: mean and [min, max] of every metric per task and estimate.

For every task of a seeds sweep (one run per seed, same settings otherwise)
and every estimate (recursive, cumulative, ``jc_only``), the paper's Section
5.1 metrics of each run come from :func:`crosscurv.experiments.reports.table.table_rows` (the
same code as Table 1): ``Correct_K``, JC hits ``h_JC/n_JC``, GS hits
``h_GS/n_GS``, ``MAE``, ``Max. AE`` and the number of undecided iterations
(``|gap| <= gap_err``).  Over the ``n`` seeds each becomes

    mean = (1/n) sum_s m_s,   [min_s m_s, max_s m_s]

(hits: the mean and range of ``h`` and of ``n`` separately; ``Coverage``, ``Precision`` and
``Calibrated`` of :func:`crosscurv.experiments.reports.table.table_rows`, ``n/a`` for runs without those columns; a NaN
``Correct_K``, every iteration undecided, is left out of its mean and says so).
The paper's Table 1 (:data:`crosscurv.experiments.reports.table.PAPER_TABLE1`, one run at
K = 500) stands beside ours.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from crosscurv.experiments.reports.table import ESTIMATE_LABELS, ESTIMATE_ROWS, PAPER_TABLE1, TASK_LABELS, table_rows

__all__ = ["Spread", "seed_groups", "seed_rows", "render_seeds_table", "describe_coverage", "is_edge_run", "split_edge",
           "certified_rows", "render_certified_table"]

#: metrics aggregated over seeds (``jc_hits``/``s_hits`` are split into ``h`` and ``n``)
SCALARS = ("correct", "mae", "max_ae", "undecided", "h_jc", "n_jc", "h_s", "n_s", "coverage", "precision",
           "calibrated")


class Spread(tuple):
    """``(mean, min, max, n)`` of one metric over seeds (NaN values left out; ``n`` = values used)."""

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
    """``{(task, preset, lr, pattern, dtype): [runs]}`` of :class:`~crosscurv.experiments.studies.collect.StudyRun`
    (one group per setting repeated over seeds, one run per seed), in the order of the runs.  A run of the
    :func:`is_edge_run` study counts as preset ``edge`` under either name (a seed held twice: the longer run).

    The runs of a group are cut to the group's smallest planned ``K`` (a run's first ``K`` records are a
    ``K``-iteration run's records), so that every seed covers the same iterations; a diverged run keeps the
    records it has.
    """
    groups: dict = {}
    for r in runs:
        preset = "edge" if is_edge_run(r) else r.preset
        group = groups.setdefault((r.task, preset, r.lr, r.pattern, r.dtype), {})
        if r.seed not in group or r.K > group[r.seed].K:  # the same run under both names of the edge preset
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

    Each row: ``task, preset, lr, pattern, K`` (records per run: the smallest
    of the group), ``seeds`` (sorted), ``statuses`` (``{status: count}``) and,
    for each key of :data:`SCALARS`, a :class:`Spread` over the seeds; the
    per-seed values are under ``per_seed`` (``{seed: {key: value}}``).
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
    """Table 1 over seeds (markdown ``github`` or plain ``simple``), the paper's numbers beside ours.

    Cells are ``mean [min, max]`` over the seeds (a single value when all seeds agree); hits are
    ``mean h/mean n`` with the ranges of ``h`` and ``n``; the paper's values are from one run at K = 500.
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
            _spread(r["correct"], _pct) + ("" if r["correct"].n == len(seeds) else f" ({r['correct'].n} seeds)"),
        ]
        if paper:
            cells.append(_pct(p["correct"]) if p else "-")
        cells.append(_hits(r["h_jc"], r["n_jc"]))
        if paper:
            cells.append(f"{p['jc_hits'][0]}/{p['jc_hits'][1]}" if p else "-")
        cells.append(_hits(r["h_s"], r["n_s"]))
        if paper:
            cells.append(f"{p['s_hits'][0]}/{p['s_hits'][1]}" if p else "-")
        cells.append(_spread(r["mae"], _g))
        if paper:
            cells.append(_g(p["mae"]) if p else "-")
        cells.append(_spread(r["max_ae"], _g))
        if paper:
            cells.append(_g(p["max_ae"]) if p else "-")
        cells.append(_spread(r["undecided"], lambda x: f"{x:.3g}"))
        cells += [_spread(r[key], _pct) if key in r and r[key].n else "n/a" for key in ("coverage", "precision",
                                                                                           "calibrated")]
        body.append(cells)
    if paper:
        head = ["Task", "Estimate", "K", "Seeds", "Correct ↑", "paper", "JC hits ↑", "paper", "GS hits ↑", "paper",
                "MAE ↓", "paper", "Max. AE ↓", "paper", "Undecided", "Coverage ↑", "Precision ↑", "Calibrated ↑"]
    else:
        head = ["Task", "Estimate", "K", "Seeds", "Correct ↑", "JC hits ↑", "GS hits ↑", "MAE ↓", "Max. AE ↓",
                "Undecided", "Coverage ↑", "Precision ↑", "Calibrated ↑"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)


def _seed_list(seeds) -> str:
    """``0-4`` for consecutive seeds, else ``0, 2, 3``."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def describe_coverage(sweep) -> str:
    """One sentence: per task, the runs and seeds the table covers, at which K, which runs were cut to it,
    and what was left out (unfinished)."""
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
    """Whether a seeds-study run belongs to the edge-of-stability study: the ``edge`` preset, or (runs made
    before that preset had its name) a built-in task's ``default`` sizes at the ``edge`` learning rate."""
    from crosscurv.experiments.tasks import TASKS, preset_settings

    if run.preset == "edge":
        return True
    if run.preset != "default" or run.task not in TASKS:
        return False
    return run.lr == preset_settings(run.task, "edge")["lr"] != preset_settings(run.task, "default")["lr"]


def split_edge(runs) -> tuple[list, list]:
    """``(runs inside the regime's study, edge-of-stability runs)`` of :func:`is_edge_run`, order kept."""
    inside, edge = [], []
    for r in runs:
        (edge if is_edge_run(r) else inside).append(r)
    return inside, edge


def certified_rows(runs, estimates: Sequence[str] = ESTIMATE_ROWS) -> list[dict]:
    """Per run (cut like :func:`seed_groups`) and estimate: Coverage and Precision of the certified winners over
    all decided iterations, before the first ``k`` with ``eta * sharpness_k >= 2`` and from it
    (:func:`crosscurv.experiments.studies.trust.run_rows`), the largest converged ``eta * lambda_max`` and the
    observed winner switches.  Runs without certificate columns are left out."""
    from crosscurv.experiments.studies.regime import observed_switches
    from crosscurv.experiments.studies.trust import run_rows

    out = []
    for members in seed_groups(runs).values():
        for r in members:
            cols = r.columns()
            if not all(f"{e}_cert" in cols and np.isfinite(cols[f"{e}_cert"]).any() for e in estimates):
                continue
            for row in run_rows(cols, r.lr):
                if row["estimate"] in estimates:
                    out.append({"task": r.task, "lr": r.lr, "seed": r.seed, "K": r.K, "status": r.status,
                                "switches": observed_switches(cols), **row})
    return out


def render_certified_table(rows: Sequence[dict], fmt: str = "github") -> str:
    """One line per run: regime indicators and per estimate ``Coverage / Precision`` (all decided iterations;
    before the first crossing of 2; from it)."""
    from tabulate import tabulate

    def cp(m):
        if m is None:
            return "-"
        return f"{_pct(m['coverage']) if m['coverage'] == m['coverage'] else 'n/a'} / " + (
            _pct(m["precision"]) if m["precision"] == m["precision"] else "n/a")

    runs: dict = {}
    for r in rows:
        runs.setdefault((r["task"], r["lr"], r["seed"]), []).append(r)
    ests = list(dict.fromkeys(r["estimate"] for r in rows))
    body = []
    for (task, lr, seed), rs in runs.items():
        r0 = rs[0]
        line = [task, f"{lr:g}", str(seed), str(r0["K"]) + ("" if r0["status"] == "complete" else f" ({r0['status']})"),
                f"{r0['max_eta_lambda']:.3g}", "never" if r0["cross"] is None else str(r0["cross"]),
                str(r0["switches"])]
        by = {r["estimate"]: r for r in rs}
        for e in ests:
            line += [cp(by[e]["all"]), cp(by[e]["before"]), cp(by[e]["after"])] if e in by else ["-"] * 3
        body.append(line)
    head = ["task", "eta", "seed", "K", "max eta*lambda_max", "first k with eta*sharpness >= 2", "winner switches"]
    for e in ests:
        head += [f"{e} Cov./Prec.", f"{e} before the edge", f"{e} from the edge"]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)
