"""Table 1 of a rerun on another CPU compared with the committed one, within the spread over seeds.

Per run, over its first ``K`` iterations (:func:`table_quantities`): ``correct/E`` (``Correct_K`` of
estimate ``E``, percent), ``jc_hits/E``, ``s_hits/E``, ``switches`` (switch points of the observed
winner, :func:`crosscurv.experiments.studies.optimizers.report.switch_points`) and ``first_switch``
(``nan`` when none). A rerun agrees (:func:`compare_tables`) when

    pass  <=>  |rerun - committed| <= max_s q_s - min_s q_s

over the seeds ``s`` of the study; ``first_switch`` also passes when neither run switches.
"""

from __future__ import annotations

import math
import os
from typing import Mapping, Sequence

__all__ = ["ESTIMATES", "table_quantities", "seed_spread", "compare_tables", "recomputed_section"]

#: The estimates of Table 1, in its order.
ESTIMATES = ("recursive", "cumulative", "jc_only")


def _switch_points(columns: Mapping[str, Sequence[float]]) -> list:
    from crosscurv.experiments.studies.optimizers.report import switch_points, winners

    return switch_points(winners(columns["gap"], columns.get("gap_err", [0.0] * len(columns[
        "gap"]))))


def table_quantities(columns: Mapping[str, Sequence[float]], K: int | None = None,
                     estimates: Sequence[str] = ESTIMATES) -> dict:
    """``{quantity: value}`` of the module docstring over the first ``K`` records (all when
    ``None``).

    ``columns``: ``{column: values}`` of a run's records (at least ``gap`` and the estimate columns;
    ``gap_err`` where the records have it).
    """
    from crosscurv.numeric.metrics import winner_metrics

    n = len(columns["gap"]) if K is None else int(K)
    if n > len(columns["gap"]):
        raise ValueError(f"the records hold {len(columns['gap'])} iterations, fewer than the K = "
                         f"{n} asked for")
    cols = {c: [float(x) for x in v[:n]] for c, v in columns.items()}
    out = {}
    for est in estimates:
        if est not in cols:
            continue
        m = winner_metrics(cols["gap"], cols[est], cols.get("gap_err"))
        out[f"correct/{est}"] = float(m["correct"])
        out[f"jc_hits/{est}"] = float(m["jc_hits"][0])
        out[f"s_hits/{est}"] = float(m["s_hits"][0])
    sw = _switch_points(cols)
    out["switches"] = float(len(sw))
    out["first_switch"] = float(sw[0]) if sw else math.nan
    return out


def seed_spread(seed_quantities: Sequence[dict]) -> dict:
    """``{quantity: (lo, hi, n)}`` over the seeds' :func:`table_quantities` (``nan`` values left
    out; a quantity ``nan`` in every seed: ``(nan, nan, 0)``)."""
    keys = list(dict.fromkeys(k for q in seed_quantities for k in q))
    out = {}
    for k in keys:
        vals = [q[k] for q in seed_quantities if k in q and not math.isnan(q[k])]
        out[k] = (min(vals), max(vals), len(vals)) if vals else (math.nan, math.nan, 0)
    return out


def compare_tables(rerun: dict, committed: dict, spread: dict) -> list[dict]:
    """One row per quantity of ``committed``: ``{"quantity", "committed", "rerun", "difference",
    "spread", "passed"}`` (the rule of the module docstring; ``spread`` from :func:`seed_spread`).
    """
    rows = []
    for q, c in committed.items():
        r = rerun.get(q, math.nan)
        lo, hi, _ = spread.get(q, (math.nan, math.nan, 0))
        width = hi - lo if not math.isnan(lo) else 0.0
        if math.isnan(c) and math.isnan(r):
            passed, diff = True, 0.0
        elif math.isnan(c) or math.isnan(r):
            passed, diff = False, math.nan
        else:
            diff = abs(r - c)
            passed = diff <= width
        rows.append({"quantity": q, "committed": c, "rerun": r, "difference": diff, "spread": width,
                     "range": (lo, hi), "passed": passed})
    return rows


# -- the report section
# ------------------------------------------------------------------------------------
def _seed_columns(sweeps: str, task: str, settings: dict) -> tuple[list, list]:
    """``([(seed, columns)], [sweep folders used])``: the seed runs under ``sweeps`` with
    ``settings``'s task, preset, learning rate, pattern and dtype."""
    from crosscurv.experiments.studies.collect import read_sweep

    out, used = [], []
    if not os.path.isdir(sweeps):
        return out, used
    for name in sorted(os.listdir(sweeps)):
        if not name.startswith("seeds"):
            continue
        sw = read_sweep(os.path.join(sweeps, name))
        for r in sw.runs:
            if (r.task, r.preset, r.pattern, r.dtype) == (task, settings["preset"], settings.get(
                "pattern_spec"),
                                                          settings["dtype"]) and r.lr == float(
                                                          settings["lr"]):
                out.append((r.seed, r.run.columns))
                if name not in used:
                    used.append(name)
    return sorted(out, key=lambda x: x[0]), used


def _num(x: float) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:.4g}"


def recomputed_section(runs: Sequence[str], recomputed: dict, sweeps: str) -> tuple:
    """``(Markdown lines, number of (run, emulation) pairs that failed)``: for each run, its first
    ``K`` records as recomputed under each emulation (``recomputed[run] = [(emulation, columns)]``,
    ``K`` their length) compared at table level with the committed records' first ``K``, within the
    spread of the seed runs."""
    import json

    from crosscurv.experiments.reports.table import load_run

    md = ["## Table 1 over the checked iterations, within the spread over seeds", "",
          f"The records `report --check` recomputed under each emulation, taken as a rerun of the "
          f"study to the check's horizon `K`: Table 1's quantities over `k = 1..K` (Correct per "
          f"estimate, the hits `h_JC` and `h_GS` per estimate, and the number and first of the "
          f"observed winner's switch points) against the committed run's over the same iterations. "
          f"A quantity passes when they differ by at most its spread (largest minus smallest) over "
          f"the seed runs of the same settings in `{sweeps}`, each cut to the same `K` "
          f"(`crosscurv.experiments.conformance.tables`).", ""]
    failed = 0
    for run_dir in runs:
        items = [(n, c) for n, c in recomputed.get(run_dir, []) if c and c.get("gap")]
        if not items:
            continue
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as fh:
            settings = json.load(fh)["settings"]
        committed = load_run(run_dir).columns
        K = min(min(len(c["gap"]) for _, c in items), len(committed["gap"]))
        seeds, used = _seed_columns(sweeps, settings["task"], settings)
        seeds = [(sd, c) for sd, c in seeds if len(c["gap"]) >= K]
        q_c = table_quantities(committed, K)
        spread = seed_spread([table_quantities(c, K) for _, c in seeds])
        compared = [(n, compare_tables(table_quantities(c, K), q_c, spread)) for n, c in items]
        own = [sd for sd, c in seeds if sd == settings["seed"]]
        same = any(sd == settings["seed"] and list(c["gap"][:K]) == list(committed["gap"][:K])
                   for sd, c in seeds)
        note = ""
        if own and not same:
            note = (f" The seed run with the committed run's seed ({settings['seed']}) is not the "
                    f"committed run (its records differ: the seed sweeps and the committed run "
                    f"were made by different versions), so the committed values can lie outside "
                    f"the seed range; the spread is what is compared.")
        md += [f"### `{run_dir}`, K = {K}", "",
               f"Seeds: {', '.join(str(sd) for sd, _ in seeds) or 'none'} "
               f"({', '.join(used) or 'no seed sweep found'})."
               + (" Fewer than two seed runs: no spread, so every quantity must be equal." if len(
               seeds) < 2 else "")
               + note,
               "", "| quantity | committed | seed range | spread | " + " | ".join(n for n,
               _ in compared) + " |",
               "|---" * (4 + len(compared)) + "|"]
        for i, q in enumerate(q_c):
            lo, hi, _ = spread.get(q, (math.nan, math.nan, 0))
            cells = []
            for _, rows in compared:
                r = rows[i]
                cells.append(f"{_num(r['rerun'])} {'pass' if r['passed'] else '**fail**'}")
            width = hi - lo if not math.isnan(lo) else 0.0
            md.append(f"| {q} | {_num(q_c[q])} | [{_num(lo)}, {_num(hi)}] | {_num(width)} | "
                      + " | ".join(cells) + " |")
        verdicts = []
        for n, rows in compared:
            bad = [r["quantity"] for r in rows if not r["passed"]]
            failed += bool(bad)
            verdicts.append(f"{n}: " + ("pass" if not bad else "fail (" + ", ".join(bad) + ")"))
        md += ["", "Verdict per emulation: " + "; ".join(verdicts) + ".", ""]
    return md, failed
