"""``reports/motivation.md`` and ``reports/figures/motivation_*.png`` from a motivation run folder.

:func:`write_motivation_report` reads what ``crosscurv motivation`` wrote
(``RUNS/<panel>/seed<S>/{records,probes}.csv``, ``summary.json``,
``RUNS/<panel>/verdicts.json``) and writes the report; every number in it is
computed from those files.
"""

from __future__ import annotations

import glob
import json
import math
import os
import platform
from functools import partial
from pathlib import Path

from tabulate import tabulate

from ..reports.numbers import number
from .analysis import AGREEMENTS, agreement, reversal
from .figure import criterion_figure, figure1
from .presets import panel_settings
from .runner import load_run

#: Infinite values are written ``nan`` here, like missing ones.
_num = partial(number, infinite="nan")

__all__ = ["write_motivation_report", "load_runs", "COMMAND"]

#: the one command that regenerates the committed report (docs/motivation.md)
COMMAND = "crosscurv motivation --preset default --out reports/runs/motivation --report reports"

_PAPER = {
    "mlp": "full MNIST (60,000 images), 40 epochs, batch 128, SGD lr 1e-3, per-tensor "
           "clipping at 5",
    "fl": "CIFAR-10 (50,000 images), 20 clients, Dirichlet(0.5), 10 sampled per round, 60 rounds, "
          "batch 64, SGD lr 1e-3, momentum 0.9, weight decay 1e-4, width-64 ResNet-18",
    "lora": "T5-base, first 2,000 SST-2 training examples, 128/2 tokens, r = 8, alpha = 16, "
            "dropout 0.1; optimizer and batch not stated",
}


def load_runs(runs_dir: str, panels, seeds=None) -> dict:
    """``{panel: [loaded run, ...]}`` (seed order) of the complete runs in ``runs_dir``."""
    out = {}
    for panel in panels:
        dirs = sorted(glob.glob(os.path.join(runs_dir, panel, "seed*")), key=lambda d: int(d.rsplit(
            "seed", 1)[1]))
        runs = []
        for d in dirs:
            if seeds is not None and int(d.rsplit("seed", 1)[1]) not in seeds:
                continue
            if os.path.isfile(os.path.join(d, "summary.json")):
                r = load_run(d)
                if r["summary"].get("status") == "complete":
                    runs.append(r)
        if runs:
            out[panel] = runs
    return out


def _settings_lines(panel: str, runs: list) -> list:
    s = runs[0]["summary"]
    info = s["info"]
    n_steps = s["steps"]
    lines = [f"- data: {info['data_source']}"]
    if "model_source" in info:
        lines.append(f"- weights: {info['model_source']}")
    lines.append(f"- model: {info['model']}")
    lines.append(f"- optimizer: {info['optimizer']}")
    if panel == "fl":
        lines.append(f"- clients: {info['clients']} (sizes of seed {s['seed']}: "
                     f"{info['client_sizes']}), {info['sampled_per_round']} sampled per round, "
                     f"batch {info['batch']}; {info['local']}; {info['aggregation']}")
    else:
        lines.append(f"- {info['examples']} training examples, batch {info['batch']}, "
                     f"{info['steps_per_epoch']} steps per epoch")
    st = s["settings"]["settings"]
    ev, pr = s.get("eval_every", st.get("eval_every")), s.get("probe_every", st.get("probe_every"))
    lines.append(f"- {n_steps} {s['step_unit']}s, evaluation every {ev}, criterion probe every "
                 f"{pr} {s['step_unit']}s; seeds "
                 f"{', '.join(str(r['summary']['seed']) for r in runs)}")
    lines.append(f"- the paper: {_PAPER[panel]}")
    p = panel_settings(panel, "paper")
    lines.append(f"- `--preset paper` keeps the paper's sizes: {json.dumps(p, sort_keys=True)}")
    return lines


def _findings(runs: dict, runs_dir: str) -> list:
    """Sentences computed from the runs (reversal per panel, the mlp divergence, verdicts,
    criterion).
    """
    out = []
    for panel, rs in runs.items():
        revs = [reversal(r["records"]) for r in rs]
        seeds = [r["summary"]["seed"] for r in rs]
        yes = [s for s, v in zip(seeds, revs) if v["reversal"]]
        lab = rs[0]["summary"]["labels"]
        ahead = sum(v["final"] < 0 for v in revs)
        line = (f"- **{panel}**: the reversal appears in {len(yes)} of {len(rs)} seeds"
                + (f" ({', '.join(map(str, yes))})" if yes else "")
                + f"; {lab['seq']} is ahead at the end in {ahead} of {len(rs)}.")
        if panel == "mlp":
            blow = []
            for r in rs:
                ev = [x for x in r["records"] if math.isfinite(x["eval_sim"])]
                first = ev[0]["eval_sim"]
                k = next((x["k"] for x in ev if not math.isfinite(x["eval_seq"]) or x["eval_seq"]
                          > 2 * first), None)
                gs = sum(x["eval_gs"] < x["eval_sim"] for x in ev)
                blow.append((k, max(x["eval_seq"] for x in ev), gs, len(ev)))
            n_blow = sum(b[0] is not None for b in blow)
            line += (f" In {n_blow} of {len(rs)} seeds the in-place run's loss passes twice its "
                     f"initial value (at steps {', '.join(str(b[0]) for b in blow)}; largest "
                     f"evaluated loss {max(b[1] for b in blow):.3g}), so its late deficit is a "
                     f"divergence of the in-place recursion, not a slower descent; exact GS is "
                     f"ahead of JC at {', '.join(f'{b[2]}/{b[3]}' for b in blow)} evaluations.")
        out.append(line)
    for panel in runs:
        vpath = os.path.join(runs_dir, panel, "verdicts.json")
        if os.path.isfile(vpath):
            with open(vpath, encoding="utf-8") as fh:
                res = json.load(fh)["results"]
            out.append(f"- **{panel} verdicts**: " + "; ".join(
                f"{r['label']} matches {', '.join(r['matches']) or 'no scheme'}" for r in res)
                       + ".")
    for panel, rs in runs.items():
        parts = []
        for name, *_ in AGREEMENTS:
            per = [agreement(r["probes"]).get(name) for r in rs]
            per = [p for p in per if p]
            if per:
                a, n = sum(p["agree"] for p in per), sum(p["n"] for p in per)
                parts.append(f"{name} {a}/{n}")
        out.append(f"- **{panel} criterion** (same winner as measured, all seeds): " + "; ".join(
            parts) + ".")
    return out


def _summary(runs: dict) -> list:
    """At most five lines: per panel whether the reversal appears (and, for the MLP, whether it is a
    divergence), then the criterion that names the measured winner most often per panel."""
    out = []
    for panel, rs in runs.items():
        revs = [reversal(r["records"]) for r in rs]
        yes = sum(bool(v["reversal"]) for v in revs)
        lab = rs[0]["summary"]["labels"]
        ahead = sum(v["final"] < 0 for v in revs)
        line = (f"- {panel}: the reversal in {yes} of {len(rs)} seeds; {lab['seq']} ahead at the "
                f"end in {ahead} of {len(rs)}.")
        if panel == "mlp":
            ev = [[x for x in r["records"] if math.isfinite(x["eval_sim"])] for r in rs]
            blown = sum(any(not math.isfinite(x["eval_seq"]) or x["eval_seq"] > 2 * e[0]["eval_sim"]
                            for x in e) for e in ev if e)
            if blown:
                line += f" In {blown} of them the in-place run diverges: not a slower descent."
        out.append(line)
    best = []
    for panel, rs in runs.items():
        scores = {}
        for name, *_ in AGREEMENTS:
            per = [p for p in (agreement(r["probes"]).get(name) for r in rs) if p]
            if per:
                scores[name] = (sum(p["agree"] for p in per), sum(p["n"] for p in per))
        if scores:
            name, (a, n) = max(scores.items(), key=lambda kv: kv[1][0] / max(kv[1][1], 1))
            best.append(f"{panel} {name} {a}/{n}")
    if best:
        out.append("- The criterion that names the measured winner most often: "
                   + "; ".join(best) + ".")
    return out[:5]


def write_motivation_report(out_dir="reports", *, runs_dir: str, preset: str = "default", panels=(
    "mlp", "fl", "lora"),
                            seeds=None) -> Path:
    """Write ``out_dir/motivation.md`` and ``out_dir/figures/motivation_{figure1,criterion}.png``.

    Args:
        out_dir: the report folder (``reports``).
        runs_dir: the folder ``crosscurv motivation --out`` wrote.
        preset: the preset the runs used (stated in the report).
        panels, seeds: what to include (default: every complete run found).

    Returns:
        the path of ``motivation.md``.
    """
    import torch

    out = Path(out_dir)
    runs = load_runs(runs_dir, panels, seeds)
    if not runs:
        from .runner import MotivationError

        raise MotivationError(f"no complete motivation runs in {runs_dir}")
    fig1 = figure1(runs, out / "figures" / "motivation_figure1.png")
    figc = criterion_figure(runs, out / "figures" / "motivation_criterion.png")
    rel = lambda p: os.path.relpath(p, out)  # noqa: E731

    this = f"crosscurv motivation --preset {preset} --out {runs_dir} --report {out_dir}"
    L = ["# Motivation study: Figure 1 with the practical implementations", "", *_summary(runs), "",
         f"Generated by `{this}`" + ("" if this == COMMAND
                                     else f" (the committed report: `{COMMAND}`)")
         + ". Every number below is computed from the run folders by "
           "`crosscurv.experiments.motivation.report.write_motivation_report`.", "",
         f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}; runs "
         f"single-threaded when started with `OMP_NUM_THREADS=1`.", ""]

    L += ["## Findings in detail", ""] + _findings(runs, runs_dir) + [""]

    L += _time_section(runs, runs_dir) + _figure_section(rel(fig1)) + _settings_section(runs)
    L += _verdicts_section(runs, runs_dir) + _reversal_section(runs)
    L += _criterion_section(runs, rel(figc))
    text = "\n".join(L) + "\n"
    md = out / "motivation.md"
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(text, encoding="utf-8")
    return md


def _time_section(runs: dict, runs_dir: str) -> list:
    """The CPU and wall time per panel, and the verdicts' time."""
    L: list = []
    rows, total, vtotal = [], 0.0, 0.0
    for panel, rs in runs.items():
        t = [r["summary"]["timing"] for r in rs]
        cpu = [x.get("cpu_seconds", x["seconds"]) for x in t]
        wall = [x["seconds"] for x in t]
        probe = [x.get("probe_cpu_seconds", x["probe_seconds"]) for x in t]
        threads = {x["threads"] for x in t}
        resumed = any(x["resumed_from"] for x in t)
        vpath = os.path.join(runs_dir, panel, "verdicts.json")
        vsec = float("nan")
        if os.path.isfile(vpath):
            with open(vpath, encoding="utf-8") as fh:
                v = json.load(fh)
            vsec = v.get("cpu_seconds", v["seconds"])
            vtotal += vsec
        total += sum(cpu)
        rows.append([panel, len(rs), f"{sum(cpu):.1f}", f"{sum(cpu) / len(rs):.1f}",
                     f"{sum(wall):.1f}", f"{sum(probe):.1f}", _num(vsec, ".1f"),
                     ",".join(map(str, sorted(threads))) + (" (resumed)" if resumed else "")])
    L += ["## Time per panel", "",
          tabulate(rows, headers=["panel", "seeds", "training CPU s (all seeds)", "CPU s per seed",
                                  "wall s", "of which probes CPU s", "verdicts CPU s", "threads"],
                   tablefmt="github", disable_numparse=True), "",
          f"Training, all panels and seeds: {total:.1f} CPU seconds; verdicts {vtotal:.1f} CPU "
          f"seconds (they do not depend on the preset or the seed and are computed once per run "
          f"folder). CPU time of the process (single-threaded runs), because the reference machine "
          f"was shared while measuring; wall time for reference.", ""]
    return L


def _figure_section(fig1: str) -> list:
    """Figure 1 and its legend (``fig1``: its path relative to the report)."""
    L: list = []
    L += ["## Figure 1", "", f"![Figure 1]({fig1})", "",
          "Blue: sequential implementation; orange: simultaneous; green dash-dotted (right axis): "
          "Delta L = L_seq - L_sim of the first seed, dotted: the other seeds (negative: "
          "sequential ahead). mlp: purple dashed is exact GS, purple dotted its difference to JC. "
          "Losses are the training objective on the evaluation set (mlp: a fixed balanced subset; "
          "fl: the federated objective over all clients; lora: all training examples without "
          "dropout).", ""]
    return L


def _settings_section(runs: dict) -> list:
    """What was run: each panel's settings."""
    L: list = []
    L += ["## What was run", ""]
    for panel, rs in runs.items():
        s = rs[0]["summary"]
        L += [f"### {panel}: {s['labels']['seq']} vs {s['labels']['sim']}", ""] + _settings_lines(
            panel, rs) + [""]
    return L


def _verdicts_section(runs: dict, runs_dir: str) -> list:
    """What each practical step computes: the validate-step verdicts per panel."""
    L: list = []
    L += ["## What each practical step computes (`validate-step` on a deterministic version)", "",
          "Deterministic version: one fixed minibatch, no dropout, no clipping, a fresh optimizer "
          "state per call, the panel's own step code, float64 "
          "(`experiments/motivation/verdicts.py`; each factory also runs as `crosscurv "
          "validate-step crosscurv.experiments.motivation.verdicts:NAME`). A step *matches* a "
          "scheme only if it agrees to round-off at every state and step size.", ""]
    for panel in runs:
        vpath = os.path.join(runs_dir, panel, "verdicts.json")
        if not os.path.isfile(vpath):
            L += [f"{panel}: verdicts not computed (run without `--no-verdicts`).", ""]
            continue
        res = json.load(open(vpath))["results"]
        L += [f"### {panel}", "",
              tabulate([[r["label"], f"`{r['factory'].split(':')[1]}`", r["declared"] or "",
                         ", ".join(r["matches"]) or "none", r["diagnosis"]] for r in res],
                       headers=["step", "factory", "declared", "matches", "diagnosis"],
                       tablefmt="github",
                       disable_numparse=True), ""]
        for r in res:
            L += [f"- **{r['label']}**: {r['verdict']}"]
            near = {c["label"]: c for c in r["report"]["candidates"]}
            if not r["matches"]:
                parts = [f"{lab}: rel. error {c['rel_errors'][-1]:.2e} at the smallest eta, order "
                         f"{_num(c['observed_order'], '.2f')}" for lab, c in near.items()]
                L += ["  (" + "; ".join(parts) + ")"]
        L += [""]
    return L


def _reversal_section(runs: dict) -> list:
    """Whether the reversal appears, per run (and exact GS against JC on the MLP)."""
    L: list = []
    L += ["## Does the reversal appear? (sequential ahead early, simultaneous later)", "",
          "Per run, over the evaluated steps: share of the first third where the sequential "
          "implementation is ahead (Delta L < 0), share of the last third where the simultaneous "
          "one is ahead (Delta L > 0, or the sequential run diverged), the first step from which "
          "the sign no longer changes, and the final losses. Reversal = both shares above 1/2.", ""]
    rows = []
    for panel, rs in runs.items():
        for r in rs:
            v = reversal(r["records"])
            rows.append([panel, r["summary"]["seed"], f"{100 * v['seq_ahead_early']:.0f}%",
                         f"{100 * v['sim_ahead_late']:.0f}%", "none" if v["last_change"] is None
                         else v["last_change"],
                         _num(v["final_seq"], ".4g"), _num(v["final_sim"], ".4g"), _num(v["final"],
                                                                                        ".3g"),
                         "yes" if v["reversal"] else "no"])
    L += [tabulate(rows, headers=["panel", "seed", "seq ahead early", "sim ahead late",
                                  "sign settles at", "final L_seq", "final L_sim", "final Delta L",
                                  "reversal"],
                   tablefmt="github", disable_numparse=True), ""]
    if "mlp" in runs:
        rows = []
        for r in runs["mlp"]:
            ev = [x for x in r["records"] if math.isfinite(x["eval_sim"])]
            gs_ahead = sum(x["eval_gs"] < x["eval_sim"] for x in ev)
            rows.append([r["summary"]["seed"], f"{gs_ahead}/{len(ev)}",
                         _num(ev[-1]["eval_gs"], ".4g"), _num(ev[-1]["eval_sim"], ".4g")])
        L += ["mlp, exact GS against JC (the scheme the in-place step is named after):", "",
              tabulate(rows, headers=["seed", "evaluations with exact GS ahead", "final L_GS",
                                      "final L_JC"],
                       tablefmt="github", disable_numparse=True), ""]
    return L


def _criterion_section(runs: dict, figc: str) -> list:
    """The one-step criterion along the practical runs and its figure (``figc``: relative path)."""
    L: list = []
    L += ["## The one-step criterion along the practical runs", "",
          "At every probed step, at the simultaneous run's parameters and optimizer state, on that "
          "step's minibatch without dropout, in float64 (`experiments/motivation/criterion.py`): "
          "Theorem 1's `eta^2 C_S` with `C_S = g^T M_S g` (masked Hessian-vector products, "
          "`crosscurv.numeric.masked_product`), and the optimizer-aware form `eta^2 g^T J M_S d` "
          "(`d`: the optimizer's update direction, `J = dd/dg` by one `torch.func.jvp`; plain SGD "
          "gives back `C_S`, momentum and weight decay give `g^T M_S d`, clipping and Adam a "
          "non-trivial `J`). Measured: the loss after one step of each scheme from that same state "
          "on that minibatch. Agreement = same winner (the paper's `Correct_K`; an estimate of "
          "exactly 0 agrees only with a measured 0).", ""]
    rows = []
    for panel, rs in runs.items():
        for name, *_ in AGREEMENTS:
            per = [agreement(r["probes"]).get(name) for r in rs]
            per = [p for p in per if p]
            if not per:
                continue
            a, n = sum(p["agree"] for p in per), sum(p["n"] for p in per)
            rows.append([panel, name, f"{a}/{n} ({100 * a / n:.0f}%)",
                         ", ".join(f"{p['agree']}/{p['n']}" for p in per)])
    L += [tabulate(rows, headers=["panel", "estimate vs measured", "agree (all seeds)", "per seed"],
                   tablefmt="github", disable_numparse=True), "",
          f"![criterion]({figc})", "", "Rows:", ""]
    L += [f"- *{name}*: {meaning}" for name, _, _, meaning in AGREEMENTS]
    L += [""]
    return L
