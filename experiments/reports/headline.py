"""The headline results: what the committed studies found, in a few short lines, a table and three
figures.

:func:`write_headline` writes ``OUT/headline.md`` (opening ``reports/README.md`` and included by
``docs/results.md``) from the committed records and reports: Table 1 beside the paper over the
seeds inside the regime (:func:`crosscurv.experiments.studies.seeds.seed_rows`), the certified
winners' ``Coverage`` and ``Precision``, the observed orders of ``OUT/scaling.md`` and
``crosscurv advise`` against the measured best (``OUT/advise/validation.json``). Image links are
relative to ``OUT``, which ``docs/figures`` mirrors.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

__all__ = [
    "HEADLINE_FILE",
    "FIGURES",
    "findings",
    "headline_lines",
    "write_headline",
    "scaling_orders",
    "advise_agreement",
]

HEADLINE_FILE = "headline.md"
#: the figures that say the most: (file under figures/, caption)
FIGURES = (
    (
        "studies_seeds_fl.png",
        "FL over five seeds: the observed winner per iteration (top) and the share of "
        "seeds each estimate gets right (bottom).",
    ),
    (
        "studies_certified_regime.png",
        "Precision and coverage of the certified winners against eta * sharpness; "
        "dashed: the edge of stability.",
    ),
    (
        "scaling_cumulative.png",
        "Theorem 3's error against eta at fixed eta K: the observed order 2.",
    ),
)
ORDER = ("mlp", "fl", "lora")
LABEL = {"mlp": "DNN", "fl": "FL", "lora": "LoRA"}
EST_ORDER = ("recursive", "cumulative", "jc_only", "majority", "one_step")


def _pct(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.1f}%"


def _cell(sp) -> str:
    """A seeds ``Spread`` (mean, lo, hi, n) or a plain number as ``mean [lo, hi]``."""
    if isinstance(sp, tuple):
        if sp[3] == 0:
            return "n/a"
        return _pct(sp[0]) if sp[1] == sp[2] else f"{_pct(sp[0])} [{sp[1]:.1f}, {sp[2]:.1f}]"
    return _pct(sp)


def _mean(sp) -> float:
    return sp[0] if isinstance(sp, tuple) else sp


def _rows(runs, seed_rows) -> tuple[dict, str]:
    """``{(task, estimate): row}`` and where the rows come from (seeds inside the regime, else seed
    0)."""
    from crosscurv.experiments.reports.table import TABLE_ROWS, table_rows

    if seed_rows:
        rows = {
            (r["task"], r["estimate"]): {
                **r,
                "n_jc_mean": r["n_jc"][0],
                "K": r["K"],
                "n": len(r["seeds"]),
            }
            for r in seed_rows
        }
        n = max(len(r["seeds"]) for r in seed_rows)
        return rows, f"{n} seeds"
    rows = {}
    for run in runs:
        for r in table_rows(run, TABLE_ROWS):
            rows[(run.task, r["estimate"])] = {
                **r,
                "n_jc_mean": r["jc_hits"][1],
                "K": run.iters,
                "n": 1,
            }
    return rows, "seed 0"


def scaling_orders(scaling_md: Path) -> str | None:
    """One line from the summary table of ``scaling.md``: each problem's fitted orders, or
    ``None``."""
    if not scaling_md.is_file():
        return None
    text = scaling_md.read_text(encoding="utf-8")
    part = text.split("## Summary of fitted orders", 1)
    if len(part) < 2:
        return None
    lines = []
    for ln in part[1].strip().splitlines():  # the first table after the heading
        if not ln.startswith("|"):
            break
        if not ln.startswith("|---"):
            lines.append(ln)
    if len(lines) < 2:
        return None
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cols = [i for i, h in enumerate(head) if re.search(r"\(\d\)$", h)]
    out = []
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if not cells or cells[0].startswith("-"):
            continue
        found = [re.match(r"([0-9.]+)", cells[i]) for i in cols if i < len(cells)]
        values = [m.group(1) for m in found if m]
        out.append(
            f"{cells[0]} " + (", ".join(values) if values else "no point in the asymptotic window")
        )
    expected = ", ".join(re.search(r"\((\d)\)$", head[i]).group(1) for i in cols)
    names = ", ".join(re.sub(r"\s*\(\d\)$", "", head[i]) for i in cols)
    return f"Observed orders ({names}; expected {expected}): " + "; ".join(out) + "."


def advise_agreement(validation_json: Path) -> str | None:
    """One line from ``advise/validation.json``, inside the regime (``eta * lambda_max < 2``): how
    often the advice named the measured best scheme per task, its regret (the loss given up by
    following it, relative to the best-to-worst spread, mean over the decided iterations) and the
    certified iterations that were wrong; ``None`` without the file."""
    if not validation_json.is_file():
        return None
    rows = json.loads(validation_json.read_text(encoding="utf-8")).get("rows", [])
    inside = [r for r in rows
              if r.get("eta_sharpness_max") is not None and r["eta_sharpness_max"] < 2
              and r.get("agree_decided")]
    per: dict = {}
    for r in inside:
        ok, n = per.get(r["task"], (0, 0))
        per[r["task"]] = (ok + r["agree_decided"][0], n + r["agree_decided"][1])
    if not per:
        return None
    parts = [f"{LABEL.get(t, t)} {100.0 * ok / n:.0f}%" for t, (ok, n) in per.items() if n]
    line = ("`crosscurv advise` named the measured best scheme in " + ", ".join(parts)
            + " of the decided iterations inside the regime.")
    sms = [r["summary"] for r in inside if (r.get("summary") or {}).get("decided")]
    dec = sum(m["decided"] for m in sms)
    if dec:
        regret = sum(m["regret_mean"] * m["decided"] for m in sms
                     if m["regret_mean"] == m["regret_mean"]) / dec
        wrong = sum(len(m["wrong_k"]) for m in sms)
        cert = sum(m["certified"] for m in sms)
        line += (f" Following it gives up {regret:.2g} of the best-to-worst spread (mean); "
                 f"{wrong} of {cert} certified iterations were wrong.")
    else:
        line += " Its regret is not in the committed study."
    return line


def findings(out: Path, runs, seed_rows=None) -> list[str]:
    """At most five markdown bullets: what Table 1, its baselines, the certificates, the orders and
    the advice say (module docstring)."""
    return _headline(Path(out), runs, seed_rows)[0]


def headline_lines(out: Path, runs, seed_rows=None) -> list[str]:
    """The headline (markdown lines, no title): :func:`findings`, then the table and the figures."""
    bullets, rest = _headline(Path(out), runs, seed_rows)
    return bullets + rest


def _per_task(rows: dict, tasks: list, est: str, paper: bool = False) -> str:
    """``DNN 99.0%, FL 99.3%``: the mean Correct of ``est`` per task (``paper``: the paper's)."""
    from crosscurv.experiments.reports.table import PAPER_TABLE1

    n_max = max(r["n"] for r in rows.values())
    vals = []
    for t in tasks:
        r = rows.get((t, est))
        if paper:
            p = PAPER_TABLE1.get(t, {}).get(est)
            vals.append(f"{LABEL[t]} {_pct(p['correct']) if p else 'n/a'}")
        else:
            few = f" ({r['n']} seed{'s' if r['n'] > 1 else ''})" if r and r["n"] < n_max else ""
            vals.append(f"{LABEL[t]} {_pct(_mean(r['correct'])) if r else 'n/a'}{few}")
    return ", ".join(vals)


def _bullets(out: Path, rows: dict, tasks: list, source: str, K: int) -> list[str]:
    """The findings: Table 1 beside the paper, the baselines and JC's wins, the certified winners,
    the observed orders and the advice (each where its data is there)."""
    from crosscurv.experiments.reports.table import PAPER_TABLE1

    lines = [
        f"- Table 1 ({source}, K = {K}): the recursive estimate names the lower-loss scheme in "
        f"{_per_task(rows, tasks, 'recursive')} of the iterations. "
        f"The paper: {_per_task(rows, tasks, 'recursive', True)}.",
        f"- Baselines: the majority winner scores {_per_task(rows, tasks, 'majority')}; the "
        f"one-step sign of eta^2 C_S {_per_task(rows, tasks, 'one_step')}. JC wins "
        + ", ".join(f"{LABEL[t]} {rows[(t, 'recursive')]['n_jc_mean']:.3g}" for t in tasks)
        + f" of {K} iterations (the paper: "
        + ", ".join(
            f"{PAPER_TABLE1[t]['recursive']['jc_hits'][1]}" for t in tasks if t in PAPER_TABLE1
        )
        + "). When one scheme nearly always wins, the baseline is as good as any estimate.",
    ]
    cert = [(t, rows[(t, "recursive")]) for t in tasks]
    lines.append(
        "- Certified winners of the recursive estimate (its certificate excludes a sign change; "
        "Table 1's Coverage and Precision): coverage "
        + ", ".join(f"{LABEL[t]} {_pct(_mean(r.get('coverage', math.nan)))}" for t, r in cert)
        + "; precision "
        + ", ".join(f"{LABEL[t]} {_pct(_mean(r.get('precision', math.nan)))}" for t, r in cert)
        + "."
    )
    extra = (
        scaling_orders(out / "scaling.md"),
        advise_agreement(out / "advise" / "validation.json"),
    )
    return lines + ["- " + x for x in extra if x]


def _table(rows: dict, tasks: list, source: str) -> list[str]:
    """Table 1 beside the paper: Correct over the seeds, JC wins, Coverage / Precision."""
    from crosscurv.experiments.reports.table import ESTIMATE_LABELS, PAPER_TABLE1

    n_max = max(r["n"] for r in rows.values())
    head = ["Task", "Estimate", f"Correct ({source})", "paper", "JC wins", "paper",
            "Coverage / Precision"]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in tasks:
        first = True
        for est in EST_ORDER:
            r = rows.get((t, est))
            if r is None:
                continue
            p = PAPER_TABLE1.get(t, {}).get("recursive")
            few = f" ({r['n']} seed{'s' if r['n'] > 1 else ''})" if r["n"] < n_max else ""
            paper = PAPER_TABLE1.get(t, {}).get(est)
            cells = [
                LABEL[t],
                ESTIMATE_LABELS.get(est, est),
                _cell(r["correct"]) + few,
                _pct(paper["correct"]) if paper else "-",
                f"{r['n_jc_mean']:.3g}/{r['K']}" if first else "",
                f"{p['jc_hits'][1]}/500" if p and first else "",
                f"{_cell(r.get('coverage', math.nan))} / {_cell(r.get('precision', math.nan))}",
            ]
            table.append("| " + " | ".join(cells) + " |")
            first = False
    return table


#: what the headline table's columns mean, under it
TABLE_NOTE = (
    "Correct: share of decided iterations whose winner the row names. JC wins: iterations where "
    "JC's loss is lower (mean over the seeds). Coverage: certified share of the decided "
    "iterations; Precision: correct among the certified. The paper ran T5-base, full "
    "CIFAR-10/MNIST and a GPU; ours are the CPU presets, comparable in kind. Details: "
    "`reports/table1.md`, `reports/studies.md`."
)


def _figures(out: Path) -> list[str]:
    """The :data:`FIGURES` that exist under ``OUT/figures``, each with its caption."""
    lines = []
    for name, caption in FIGURES:
        if (out / "figures" / name).is_file():
            lines += [f"![{caption}](figures/{name})", "", f"*{caption}*", ""]
    return lines


def _headline(out: Path, runs, seed_rows) -> tuple[list[str], list[str]]:
    """The findings (:func:`_bullets`) and what follows them: the table and the figures."""
    rows, source = _rows(runs, seed_rows)
    tasks = [t for t in ORDER if (t, "recursive") in rows]
    if not tasks:
        return ["- No study has finished yet: `make report` writes the runs this headline is "
                "read from."], []
    K = max(rows[(t, "recursive")]["K"] for t in tasks)
    rest = ["", *_table(rows, tasks, source), "", TABLE_NOTE, "", *_figures(out)]
    return _bullets(out, rows, tasks, source, K), rest


def write_headline(out: Path, runs, seed_rows=None,
                   command: str = "make report") -> tuple[list[str], list[str]]:
    """Write ``OUT/headline.md``: the title, the findings, the command that writes it, then the
    table and the figures; returns the findings and what follows the command, for the README."""
    from crosscurv.numeric.records import atomic_write_text

    bullets, rest = _headline(Path(out), runs, seed_rows)
    text = [
        "# What the studies found",
        "",
        *bullets,
        "",
        f"Generated by `{command}` from the committed runs; do not edit.",
        *rest,
    ]
    atomic_write_text(str(Path(out) / HEADLINE_FILE), "\n".join(text) + "\n")
    return bullets, rest
