"""A sweep's results: ``sweep.csv`` (one row per run) and ``sweep.md`` (tables).

A row holds the run's requested and effective settings, ``action`` (new, resume, restart, reuse),
status, exit code and error line, and from its ``summary.json`` the Section 5.1 metrics of every
estimate and the regime indicators ``eta_L = lr * L``, ``eta_G = lr * G``. ``sweep.md`` shows one
row per run and, per setting repeated over seeds, the mean and range of ``Correct`` and ``MAE``.
"""

from __future__ import annotations

import csv
import math
import os
from collections import OrderedDict
from typing import Sequence

from crosscurv.experiments.reports.numbers import number, percent
from crosscurv.numeric.records import ESTIMATES

#: exit code of ``crosscurv run`` for a diverged run
#: (``crosscurv.numeric.protocol.DIVERGED_EXIT_CODE``)
DIVERGED_EXIT_CODE = 3

__all__ = ["COLUMNS", "METRIC_KEYS", "run_row", "write_csv", "render_markdown", "group_over_seeds",
           "findings", "read_csv"]

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
        lr=_num(s.get("lr", point.lr)), seed=s.get("seed", point.seed), iters=s.get("iters",
                                                                                    point.iters),
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
    row.update(status=status or "failed", exit_code=code, error=error, seconds=_num(outcome.get(
        "seconds")))
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
            for key, n_key, pair in (("jc_hits", "n_jc", m.get("jc_hits")), ("s_hits", "n_s", m.get(
                    "s_hits"))):
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
    """``sweep.csv``: header :data:`COLUMNS`, one line per row, floats in round-trip form (atomic).
    """
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

    Only runs with status ``complete`` count; a group's ``failed`` says how many of its runs did not
    complete.
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


def _complete(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "complete"]


def _spread(rows: Sequence[dict], col: str, fmt) -> str | None:
    """``mean [min, max]`` of a column over rows (its finite values), ``None`` without any."""
    vals = [r[col] for r in rows if r[col] is not None and not math.isnan(r[col])]
    if not vals:
        return None
    return _range((sum(vals) / len(vals), min(vals), max(vals)), fmt)


def _last_finite(folder: str | None, row: dict) -> str:
    """Where a diverged run stood: ``summary.json``'s ``last_finite_state``, else the last line of
    ``records.csv`` (``k``, ``loss_jc``, ``loss_s``), as ``k = 430: loss_jc 0.1, loss_s 0.2``."""
    if folder is None or not row.get("run_dir"):
        return ""
    run_dir = os.path.join(folder, row["run_dir"])
    import json

    last = None
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as fh:
            last = json.load(fh).get("last_finite_state")
    except (OSError, ValueError):
        pass
    if last is None:
        try:
            with open(os.path.join(run_dir, "records.csv"), newline="") as fh:
                for last in csv.DictReader(fh):
                    pass
        except (OSError, ValueError):
            return ""
    if not last:
        return ""
    vals = {key: _num(_parse(str(last.get(key, "")))) for key in ("loss_jc", "loss_s")}
    return (f"; last finite state k = {last.get('k')}: loss_jc {_g(vals['loss_jc'])}, "
            f"loss_s {_g(vals['loss_s'])}")


def findings(rows: Sequence[dict], folder: str | None = None) -> list[str]:
    """At most five bullets: the runs' outcome, Correct over the complete runs, eta*L, the weakest
    run, the diverged runs (``folder``: the sweep folder, to read where a diverged run stood)."""
    ok = _complete(rows)
    diverged = [r for r in rows if r["status"] == "diverged"]
    other = len(rows) - len(ok) - len(diverged)
    out = [f"- {len(rows)} runs: {len(ok)} complete"
           + (f", {len(diverged)} diverged" if diverged else "")
           + (f", {other} failed or interrupted" if other else "") + "."]
    parts = [f"{e} {s}" for e in ESTIMATES if (s := _spread(ok, f"{e}_correct", _pct))]
    if parts:
        scope = "the complete run" if len(ok) == 1 else f"the {len(ok)} complete runs"
        out.append(f"- Correct over {scope}: " + "; ".join(parts) + ".")
    eta = [r["eta_L"] for r in rows if r["eta_L"] is not None and not math.isnan(r["eta_L"])]
    if eta:
        past = sum(x >= 2 for x in eta)
        out.append(f"- eta*L from {_g(min(eta))} to {_g(max(eta))}; {past} of {len(eta)} runs at "
                   "or past 2, where the expansions stop applying.")
    scored = [r for r in ok if r["recursive_correct"] is not None]
    if len(scored) > 1:
        low = min(scored, key=lambda r: r["recursive_correct"])
        out.append(f"- Lowest recursive Correct: {low['name']}, {_pct(low['recursive_correct'])} "
                   f"(eta*L = {_g(low['eta_L'])}).")
    for r in diverged[: 5 - len(out)]:
        out.append(f"- {r['name']} diverged at k = {_g(r['diverged_at'], '')}"
                   f"{_last_finite(folder, r)}; no metrics over a diverged run.")
    return out[:5]


def _stale_lines(rows: Sequence[dict]) -> list[str]:
    """A line per diverged run whose summary still holds metrics (the form written before a
    divergence got none): those metrics are left out here."""
    old = [r["name"] for r in rows if r["status"] == "diverged"
           and any(r[f"{e}_correct"] is not None for e in ESTIMATES)]
    if not old:
        return []
    return ["", f"Stale: the summary of {', '.join(old)} holds metrics over its diverged records "
                "(written before a diverged run got none); they are left out here."]


def _preset_lines(rows: Sequence[dict], folder: str | None) -> list[str]:
    """A line when runs that took their preset's learning rate (``sweep.json``'s grid has no ``lr``)
    ran at another rate than the preset has now: written before the presets changed."""
    import json

    from crosscurv.experiments.tasks import PRESETS, preset_settings

    if folder is None:
        return []
    try:
        with open(os.path.join(folder, "sweep.json"), encoding="utf-8") as fh:
            grid = json.load(fh).get("grid", {})
    except (OSError, ValueError):
        return []
    if any(lr is not None for lr in grid.get("lr") or [None]):
        return []
    old: dict = {}  # task -> (the rate the runs had, the preset's rate now, how many runs)
    for r in rows:
        try:
            now = preset_settings(r["task"], r["preset"]).get("lr")
        except Exception:  # a task or preset this version does not know
            continue
        if r["lr"] is not None and now is not None and r["lr"] != now:
            had, _, n = old.get(r["task"], (r["lr"], now, 0))
            old[r["task"]] = (had, now, n + 1)
    if not old:
        return []
    preset = rows[0]["preset"]
    match = [p for p in PRESETS if p not in (preset, "smoke") and all(
        preset_settings(t, p).get("lr") == had for t, (had, _, _) in old.items())]
    return ["", f"Stale: {sum(n for *_, n in old.values())} runs say preset `{preset}` but ran "
                "at " + ", ".join(f"{t} {_g(had)}" for t, (had, _, _) in old.items())
            + f"; `{preset}` now has " + ", ".join(f"{_g(now)}" for _, now, _ in old.values())
            + ". They were written before the presets changed"
            + (f"; the `{match[0]}` preset has their rates." if match else ".")]


def render_markdown(rows: Sequence[dict], title: str = "Sweep", folder: str | None = None) -> str:
    """``sweep.md``: what the sweep found, a per-run table and, for settings run over several seeds,
    mean [min, max] tables (``folder``: the sweep folder, for the diverged runs' last finite state
    and the command that renders the file again)."""
    from tabulate import tabulate

    lines = [f"# {title}", "", *findings(rows, folder), ""]
    where = folder if folder is not None else "OUT"
    lines.append(f"Generated by `crosscurv sweep --out {where}` with the grid recorded in "
                 "`sweep.json` (one row per run: `sweep.csv`); "
                 f"`python -m crosscurv.experiments.sweep.rerender {where}` "
                 "renders this file again from `sweep.csv`. Do not edit.")
    lines.append("")
    n_ok = sum(r["status"] == "complete" for r in rows)
    lines.append(f"{len(rows)} runs, {n_ok} complete. Correct and MAE per estimate (paper, Section "
                 f"5.1); eta*L = learning rate x the run's largest curvature estimate L (the "
                 f"expansions need it well below 2).")
    lines.append("")
    head = ["run", "status", "K", "eta*L"] + [f"{e} {m}" for e in ESTIMATES for m in ("Correct",
                                                                                      "MAE")]
    body = []
    for r in rows:
        done = r["status"] == "complete"
        body.append([r["name"], r["status"] + (f" ({r['error']})" if not done and r["error"]
                                               else ""),
                     _g(r["records"], ""), _g(r["eta_L"])]
                    + [f(r[f"{e}_{k}"]) if done or r["status"] != "diverged" else ""
                       for e in ESTIMATES for k, f in (("correct", _pct), ("mae", _g))])
    lines.append(tabulate(body, headers=head, tablefmt="github", disable_numparse=True))
    lines += _stale_lines(rows) + _preset_lines(rows, folder)
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
                        + [_range(g[f"{e}_{k}"], f) for e in ESTIMATES for k, f in (("correct",
                        _pct), ("mae", _g))])
        lines.append(tabulate(body, headers=head, tablefmt="github", disable_numparse=True))
    return "\n".join(lines) + "\n"


def write_markdown(path: str, rows: Sequence[dict], title: str = "Sweep") -> None:
    """Write ``sweep.md`` (:func:`render_markdown`) into the sweep folder holding ``path``."""
    from crosscurv.numeric.records import atomic_write_text

    atomic_write_text(path, render_markdown(rows, title, os.path.dirname(path) or "."))


def _parse(value: str):
    """A ``sweep.csv`` cell back to its value: ``None`` (empty), int, float, else the string."""
    if value == "":
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def read_csv(path: str) -> list[dict]:
    """The rows of a ``sweep.csv`` (:func:`write_csv`), values parsed back (:func:`_parse`)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def relpath(path: str, start: str) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:
        return path
