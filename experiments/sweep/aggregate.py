"""A sweep's results: ``sweep.csv`` (one row per run) and ``sweep.md`` (tables).

Each row holds the run's requested and effective settings, how the sweep
handled it (``action``: new, resume, restart, reuse), its status (``complete``,
``diverged``, ``interrupted``, ``failed``), exit code and error line, and,
read from the run's ``summary.json`` (:func:`crosscurv.numeric.records.read_summary`),
the paper's Section 5.1 metrics of every estimate (``<estimate>_correct``,
``_jc_hits``/``_n_jc``, ``_s_hits``/``_n_s``, ``_mae``, ``_max_ae``) and the
regime indicators ``eta_L = lr * L`` and ``eta_G = lr * G`` (``G``, ``L``: the
run's a-posteriori gradient-norm and curvature estimates; ``eta * L`` near or
above 2 is where the expansions stop applying).

``sweep.md`` shows one row per run and, for every setting repeated over
several seeds, the mean and min-max range of ``Correct`` and ``MAE`` per
estimate.
"""

from __future__ import annotations

import csv
import math
import os
from collections import OrderedDict
from typing import Sequence

from crosscurv.experiments.reports.numbers import number, percent
from crosscurv.numeric.records import ESTIMATES

#: exit code of ``crosscurv run`` for a diverged run (``crosscurv.numeric.protocol.DIVERGED_EXIT_CODE``)
DIVERGED_EXIT_CODE = 3

__all__ = ["COLUMNS", "METRIC_KEYS", "run_row", "write_csv", "render_markdown", "group_over_seeds"]

SETTING_COLUMNS = ("name", "task", "preset", "pattern", "lr", "seed", "iters", "dtype")
STATUS_COLUMNS = ("action", "status", "exit_code", "error", "seconds", "records", "diverged_at")
REGIME_COLUMNS = ("eta_L", "eta_G", "L", "G")
METRIC_KEYS = ("correct", "jc_hits", "n_jc", "s_hits", "n_s", "mae", "max_ae")
#: ``sweep.csv`` columns, in order
COLUMNS = SETTING_COLUMNS + STATUS_COLUMNS + REGIME_COLUMNS + tuple(
    f"{e}_{k}" for e in ESTIMATES for k in METRIC_KEYS) + ("run_dir",)


def _num(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def run_row(point, run_dir: str, action: str, outcome: dict | None, summary: dict | None) -> dict:
    """The ``sweep.csv`` row of one run (``summary``: its ``summary.json``, or ``None``)."""
    row = dict.fromkeys(COLUMNS)
    s = (summary or {}).get("settings", {})
    row.update(
        name=point.name, task=point.task,
        preset=s.get("preset", point.preset), pattern=s.get("pattern_spec", point.pattern),
        lr=_num(s.get("lr", point.lr)), seed=s.get("seed", point.seed), iters=s.get("iters", point.iters),
        dtype=s.get("dtype", point.dtype), action=action, run_dir=run_dir,
    )
    outcome = outcome or {}
    status = (summary or {}).get("status")
    if action == "reuse":  # not run now: the exit code its run had
        code = DIVERGED_EXIT_CODE if status == "diverged" else 0
    else:
        code = outcome.get("exit_code")
    error = outcome.get("error") or ""
    if code is None or (code != 0 and status not in ("diverged",)):
        status = "failed" if code != 130 else "interrupted"
    if status == "diverged" and not error:
        error = (summary or {}).get("message", "")
    row.update(status=status or "failed", exit_code=code, error=error, seconds=_num(outcome.get("seconds")))
    if summary:
        row["records"] = summary.get("records")
        row["diverged_at"] = summary.get("diverged_at")
        c = summary.get("constants", {})
        G, L, lr = _num(c.get("G")), _num(c.get("L")), row["lr"]
        row.update(G=G, L=L, eta_L=lr * L if lr is not None and L is not None else None,
                   eta_G=lr * G if lr is not None and G is not None else None)
        for est, m in summary.get("metrics", {}).items():
            if est not in ESTIMATES:
                continue
            row.update({f"{est}_correct": _num(m.get("correct")), f"{est}_mae": _num(m.get("mae")),
                        f"{est}_max_ae": _num(m.get("max_ae"))})
            for key, n_key, pair in (("jc_hits", "n_jc", m.get("jc_hits")), ("s_hits", "n_s", m.get("s_hits"))):
                if pair:
                    row[f"{est}_{key}"], row[f"{est}_{n_key}"] = int(pair[0]), int(pair[1])
    return row


def _csv_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_csv(path: str, rows: Sequence[dict]) -> None:
    """``sweep.csv``: header :data:`COLUMNS`, one line per row, floats in round-trip form (atomic)."""
    import io

    from crosscurv.numeric.records import atomic_write_text

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in COLUMNS])
    atomic_write_text(path, buf.getvalue())


def _g(x, spec=".3g") -> str:
    return number(x, spec, missing="")


def _pct(x) -> str:
    return percent(x, missing="")


def group_over_seeds(rows: Sequence[dict]) -> list[dict]:
    """Rows of equal settings except the seed, summarised: ``n`` seeds, mean/min/max of each metric.

    Only runs with status ``complete`` count; a group's ``failed`` says how
    many of its runs did not complete.
    """
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    for r in rows:
        key = tuple(r[c] for c in ("task", "preset", "pattern", "lr", "iters", "dtype"))
        groups.setdefault(key, []).append(r)
    out = []
    for key, members in groups.items():
        ok = [m for m in members if m["status"] == "complete"]
        g = dict(zip(("task", "preset", "pattern", "lr", "iters", "dtype"), key))
        g.update(n=len(ok), failed=len(members) - len(ok), seeds=[m["seed"] for m in ok])
        for col in ["eta_L"] + [f"{e}_{k}" for e in ESTIMATES for k in ("correct", "mae")]:
            vals = [m[col] for m in ok if m[col] is not None and not math.isnan(m[col])]
            g[col] = (sum(vals) / len(vals), min(vals), max(vals)) if vals else None
        out.append(g)
    return out


def _range(t, fmt) -> str:
    if t is None:
        return ""
    mean, lo, hi = t
    return f"{fmt(mean)} [{fmt(lo)}, {fmt(hi)}]" if lo != hi else fmt(mean)


def render_markdown(rows: Sequence[dict], title: str = "Sweep") -> str:
    """``sweep.md``: a per-run table and, for settings run over several seeds, mean [min, max] tables."""
    from tabulate import tabulate

    lines = [f"# {title}", ""]
    n_ok = sum(r["status"] == "complete" for r in rows)
    lines.append(f"{len(rows)} runs, {n_ok} complete. Correct and MAE per estimate (paper, Section 5.1); "
                 "eta*L = learning rate x the run's largest curvature estimate L (the expansions need it "
                 "well below 2).")
    lines.append("")
    head = ["run", "status", "K", "eta*L"] + [f"{e} {m}" for e in ESTIMATES for m in ("Correct", "MAE")]
    body = []
    for r in rows:
        body.append([r["name"], r["status"] + (f" ({r['error']})" if r["status"] != "complete" and r["error"]
                                               else ""),
                     _g(r["records"], ""), _g(r["eta_L"])]
                    + [f(r[f"{e}_{k}"]) for e in ESTIMATES for k, f in (("correct", _pct), ("mae", _g))])
    lines.append(tabulate(body, headers=head, tablefmt="github", disable_numparse=True))
    groups = [g for g in group_over_seeds(rows) if g["n"] + g["failed"] > 1]
    if groups:
        lines += ["", "## Over seeds: mean [min, max] of the complete runs", ""]
        head = ["task", "preset", "pattern", "lr", "seeds", "eta*L"] + [
            f"{e} {m}" for e in ESTIMATES for m in ("Correct", "MAE")]
        body = []
        for g in groups:
            seeds = f"{g['n']}" + (f" (+{g['failed']} not complete)" if g["failed"] else "")
            body.append([g["task"], g["preset"] or "", g["pattern"] or "", _g(g["lr"]), seeds,
                         _range(g["eta_L"], _g)]
                        + [_range(g[f"{e}_{k}"], f) for e in ESTIMATES for k, f in (("correct", _pct), ("mae", _g))])
        lines.append(tabulate(body, headers=head, tablefmt="github", disable_numparse=True))
    return "\n".join(lines) + "\n"


def write_markdown(path: str, rows: Sequence[dict], title: str = "Sweep") -> None:
    from crosscurv.numeric.records import atomic_write_text

    atomic_write_text(path, render_markdown(rows, title))


def relpath(path: str, start: str) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:
        return path
