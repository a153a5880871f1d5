"""Framework-independent conformance cases: ``crosscurv golden --out DIR``.

Small float64 problems (:mod:`.golden_case`), each with the patterns ``jc``, ``gs`` and ``partial``,
written as JSON and CSV so that an implementation in another framework can be checked without torch.
A case is defined by its JSON; the expected ``one_step.json``, ``records.csv``, ``summary.json`` and
``terms.csv`` are computed from the task built from it. The layout and conventions are in
``golden_readme.md`` (the ``README.md`` written into ``DIR``); each ``DIR/<case>/<label>`` is a
reference for ``crosscurv validate-records``.
"""

from __future__ import annotations

import json
import os

import torch

from crosscurv.numeric.task import Task
from crosscurv.theory.patterns import as_pattern

from .golden_case import (CASES, GoldenCase, build_case, case_task, case_to_dict, load_case,
                          tensor_json)
from .golden_data import GoldenError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CASES",
    "GoldenError",
    "GoldenCase",
    "build_case",
    "case_task",
    "load_case",
    "write_golden",
    "readme_text",
    "README_TEMPLATE",
]

FORMAT = "crosscurv-golden"
FORMAT_VERSION = 1
LABELS = ("jc", "gs", "partial")
#: The README of a golden folder, with ``@ROWS@``, ``@SAFETY@``, ``@EPS@`` for the tolerance table.
README_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_readme.md")
TERMS_FILE = "terms.csv"


# Expected quantities
# ---------------------------------------------------------------------------
def _case_json(case: GoldenCase, task: Task) -> dict:
    from crosscurv.numeric.estimates import init_power_vector

    d = case_to_dict(case)
    d = {"format": FORMAT, "version": FORMAT_VERSION, **d}
    pats = {}
    for label, spec in case.patterns.items():
        p = as_pattern(spec, task.n_blocks, task.block_names)
        pats[label] = {
            "spec": spec,
            "pairs": [[i + 1, j + 1] for i, j in sorted(p.pairs)],
            "pairs_named": [[task.block_names[i], task.block_names[j]] for i, j in sorted(p.pairs)],
            "order": [task.block_names[b] for b in p.order()],
        }
    d["patterns"] = pats
    d["power_iteration"] = {
        "seed": 0,
        "start": {k: tensor_json(v) for k, v in init_power_vector(task.params, 0).items()},
        "note": "unit vector p_0 (over all parameters, in parameter order) the protocol's power "
                "iteration starts from",
    }
    return d


def _one_step(case: GoldenCase, task: Task) -> dict:
    """``one_step.json``: the one-step quantities at ``theta^0`` (an optimizer case: its first step
    from zero state, README, optimizer section)."""
    from crosscurv.numeric.curvature import cross_curvature_table
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.one_step import one_step_estimate
    from crosscurv.numeric.optimizer_estimates import optimizer_one_step_estimate
    from crosscurv.numeric.optimizers import optimizer_scheme_step, optimizer_setup
    from crosscurv.numeric.steps import scheme_step

    lr, plain = case.lr, case.plain
    out = {"lr": lr}
    if not plain:
        setup = optimizer_setup(task, case.optimizer, case.block_lr)
        factors = list(setup.factors)
        out.update(optimizer=setup.spec.to_dict(),
                   block_factors=dict(zip(task.block_names, factors)))
    value, g = grad(task.loss, task.params)
    table = cross_curvature_table(task, task.params, g)
    out.update(loss_0=float(value), grad_0={k: tensor_json(v) for k, v in g.items()})
    if plain:
        out["grad_norm2"] = table.grad_norm2
    out.update(block_names=task.block_names, c=table.c.tolist(), C_cross=table.C_cross)
    if plain:
        out["gHg"] = table.gHg
    out["patterns"] = {}

    def step_and_loss(p):
        if plain:
            th = scheme_step(task, task.params, p, lr)
        else:
            th = optimizer_scheme_step(task, task.params, p, lr, setup.spec, None, factors)[0]
        with torch.no_grad():
            return th, float(task.loss(th))

    theta_jc, loss_jc = step_and_loss(as_pattern("jc", task.n_blocks))
    out["loss_jc_1"] = loss_jc
    out["theta_jc_1"] = {k: tensor_json(v) for k, v in theta_jc.items()}
    for label, spec in case.patterns.items():
        p = as_pattern(spec, task.n_blocks, task.block_names)
        th, ls = step_and_loss(p)
        if plain:
            est = one_step_estimate(task, task.params, p, lr, g)
            row = {"C_S": table.C_S(p), "loss_s_1": ls, "gap_1": ls - loss_jc,
                   "eta2_estimate": est["eta2"], "c3": est["c3"], "eta3_estimate": est["eta3"]}
        else:
            est = optimizer_one_step_estimate(task, task.params, p, lr, setup.spec, None, factors,
                                              g)
            row = {"C_S": est["C_S"], "loss_s_1": ls, "gap_1": ls - loss_jc,
                   "eta2_estimate": est["eta2"]}
        out["patterns"][label] = {"spec": spec, **row,
                                  "theta_s_1": {k: tensor_json(v) for k, v in th.items()}}
    return out


def _write_json(path: str, obj) -> None:
    from crosscurv.numeric.records import json_safe

    with open(path, "w", encoding="utf-8") as fh:
        json.dump(json_safe(obj), fh, indent=1, allow_nan=False)
        fh.write("\n")


def _records(case: GoldenCase, task: Task, label: str, run_dir: str) -> dict:
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.records import RECORDS_FILE, SUMMARY_FILE, RecordWriter

    p = as_pattern(case.patterns[label], task.n_blocks, task.block_names)
    res = run_protocol(task, p, case.lr, case.iters, out_dir=None, seed=0,
                       settings={"task": f"golden:{case.name}", "golden_label": label},
                       optimizer=case.optimizer, block_lr=case.block_lr)
    if res.status != "complete":
        raise GoldenError(f"golden case {case.name}/{label}: protocol {res.status}: {res.message}")
    os.makedirs(run_dir, exist_ok=True)
    with RecordWriter(os.path.join(run_dir, RECORDS_FILE)) as w:
        for rec in res.records:
            w.write(rec)
    summary = dict(res.summary)
    summary.pop("timing", None)  # the only part that changes between regenerations
    summary.pop("crosscurv_version", None)
    _write_json(os.path.join(run_dir, SUMMARY_FILE), summary)
    if case.plain:
        from crosscurv.numeric.estimates import init_power_vector

        from .golden_terms import TERM_COLUMNS, formula_terms

        rows = formula_terms(task, p, case.lr, case.iters, init_power_vector(task.params, 0))
        with RecordWriter(os.path.join(run_dir, TERMS_FILE), fields=("k",) + TERM_COLUMNS) as w:
            w.write_rows(rows)
    return summary


def write_golden(out_dir: str, cases=None, force: bool = False) -> list[str]:
    """Write the conformance cases into ``out_dir`` (module docstring).

    Args:
        out_dir: target folder; it must not exist or be empty unless ``force``.
        cases: case names (default: all of :data:`CASES`).
        force: overwrite files of an existing golden folder.

    Returns:
        the paths written, relative to ``out_dir``.

    Raises:
        GoldenError: unknown case, or ``out_dir`` is a file or a non-empty
            folder (without ``force``).
    """
    names = list(cases or CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise GoldenError(f"unknown golden case(s) {', '.join(unknown)} "
                          f"(cases: {', '.join(CASES)})")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise GoldenError(f"output path {out_dir} exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        raise GoldenError(f"{out_dir} is not empty; choose another --out or pass --force to "
                          "overwrite")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise GoldenError(f"cannot create {out_dir}: {exc.strerror}") from None
    written, index = [], []
    for name in names:
        case = build_case(name)
        task = case_task(case)
        cdir = os.path.join(out_dir, name)
        os.makedirs(cdir, exist_ok=True)
        _write_json(os.path.join(cdir, "case.json"), _case_json(case, task))
        one_step = _one_step(case, task)
        _write_json(os.path.join(cdir, "one_step.json"), one_step)
        files = [f"{name}/case.json", f"{name}/one_step.json"]
        for label in LABELS:
            rdir = os.path.join(cdir, label)
            if force:
                for f in ("records.csv", "summary.json", TERMS_FILE):
                    if os.path.exists(os.path.join(rdir, f)):
                        os.remove(os.path.join(rdir, f))
            _records(case, task, label, rdir)
            files += [f"{name}/{label}/records.csv", f"{name}/{label}/summary.json"]
            files += [f"{name}/{label}/{TERMS_FILE}"] if case.plain else []
        written += files
        index.append({"name": name, "title": case.title, "blocks": task.block_names,
                      "n_params": task.num_params(), "lr": case.lr, "iters": case.iters,
                      "patterns": dict(case.patterns), "files": files})
    _write_json(os.path.join(out_dir, "index.json"),
                {"format": FORMAT, "version": FORMAT_VERSION, "cases": index})
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(readme_text())
    return written + ["index.json", "README.md"]


def readme_text() -> str:
    """The ``README.md`` of a golden folder: ``golden_readme.md`` beside this module, with the
    tolerance table written from :data:`crosscurv.numeric.record_comparison.TOLERANCES`."""
    from crosscurv.numeric.record_comparison import EPS, MEASURED_ROUNDING, SAFETY, TOLERANCES

    measured = MEASURED_ROUNDING["float64"]
    rows = "\n".join(
        f"| `{c}` | {measured[c][0]:.1e} | {measured[c][1]:.1e} | {r:.2g} | {a:.2g} |"
        for c, (r, a) in TOLERANCES["float64"].items())
    with open(README_TEMPLATE, encoding="utf-8") as fh:
        text = fh.read()
    text = text.replace("@ROWS@", rows).replace("@SAFETY@", f"{SAFETY:g}")
    return text.replace("@EPS@", f"{EPS['float64']:.3g}")
