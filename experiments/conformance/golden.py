"""Framework-independent conformance cases: ``crosscurv golden --out DIR``.

Four small float64 problems, each with three delay patterns (JC, full GS and
a partial pattern), written as plain JSON and CSV so that an implementation
in another framework (JAX, NumPy, ...) can be checked without importing
torch:

=============  ==========================================================  =======
case           loss                                                        blocks
=============  ==========================================================  =======
quadratic      ``1/2 x^T A x - b^T x``                                      3
quartic        ``1/2 x^T A x - b^T x + gamma/4 sum_m ((W x)_m)^4``          3
tiny_mlp       tanh MLP 3-4-3-2, softmax cross-entropy, 5 examples          3
lora_bilinear  ``||(W2 + s B2 A2)(W1 + s B1 A1) Z - T||_F^2 / (2m)``        4
=============  ==========================================================  =======

Two more cases run the quartic and quadratic problems with an optimizer (beyond
the paper): ``quartic_momentum`` (heavy ball 0.9) and ``quadratic_block_lr``
(per-block step sizes); their records hold the generalized estimates
(their definitions are in the README written with the cases).

Every case is *defined by its JSON*: :func:`case_task` builds the
:class:`crosscurv.numeric.Task` from the stored numbers (float64 values written with
``repr``, which round-trips exactly), and the expected quantities are
computed from that task, so the files and the reference agree bit for bit.

Layout of ``DIR`` (described for readers in the ``README.md`` written there)::

    README.md            the format, conventions and tolerances
    index.json           list of cases and files
    <case>/case.json     inputs: parameters, data, loss in words and formula,
                         blocks, patterns, lr, K, power-iteration start vector
    <case>/one_step.json expected one-step quantities at theta^0: gradient,
                         c_ij table, C_cross, and per pattern C_S, one-step
                         losses and gap, eta^2 and eta^3 estimates, theta^1
    <case>/<label>/records.csv   expected per-iteration records (protocol CSV)
    <case>/<label>/summary.json  the protocol's summary (timings removed)
    <case>/<label>/terms.csv     the parts of each estimate and of its likely variants
                                 (plain cases; :mod:`.golden_terms`)

The README is ``golden_readme.md`` beside this module (:func:`readme_text`).  A copy of every
case ships with the package (:mod:`.golden_data`), so that ``crosscurv golden --out DIR`` needs
no torch; :func:`write_golden` recomputes them (``crosscurv golden --recompute``).

``<label>`` is ``jc``, ``gs`` or ``partial``; each ``<case>/<label>`` is a run
directory usable as ``crosscurv validate-records THEIRS.csv --reference
DIR/<case>/<label>``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

import torch

from crosscurv.numeric.portable_random import portable_randn
from crosscurv.numeric.task import Task
from crosscurv.theory.patterns import as_pattern

from ..problems.toys import adapted_weight, coupled_spd, mlp_forward, quadratic_loss, quartic_ridge_loss
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


@dataclass
class GoldenCase:
    """One conformance case.

    Attributes:
        name: folder name (``quadratic``...).
        title, words, formula: the loss in words and as a formula.
        params: ordered ``{name: float64 tensor}`` (``theta^0``).
        data: ``{name: float64 tensor or float}`` (fixed data of the loss).
        blocks: ordered ``{block name: [param names]}``.
        patterns: ``{"jc": spec, "gs": spec, "partial": spec}`` (CLI syntax).
        lr, iters: learning rate ``eta`` and iterations ``K`` of the records.
        model: which loss function builds the task (``quadratic``, ``quartic``,
            ``mlp``, ``lora``).
    """

    name: str
    title: str
    words: str
    formula: str
    params: dict
    data: dict
    blocks: dict
    patterns: dict
    lr: float
    iters: int
    model: str
    notes: list = field(default_factory=list)
    optimizer: str = "sgd"
    block_lr: dict = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        """Plain block-gradient steps (the paper's protocol)."""
        return self.optimizer == "sgd" and not self.block_lr


# ---------------------------------------------------------------------------
# Loss functions (from the data of the case; shapes as stored)
# ---------------------------------------------------------------------------
def _loss_quadratic(data, names):
    return quadratic_loss(data["A"], data["b"], names)


def _loss_quartic(data, names):
    return quartic_ridge_loss(data["A"], data["b"], data["W"], float(data["gamma"]), names)


def _loss_mlp(data, names):
    X, Y = data["X"], data["Y"]

    def loss(p):
        z = mlp_forward(p, X, [("W1", "b1"), ("W2", "b2"), ("W3", "b3")])
        return (torch.logsumexp(z, dim=1) - (z * Y).sum(dim=1)).mean()

    return loss


def _loss_lora(data, names):
    W1, W2, Z, T, s = data["W1"], data["W2"], data["Z"], data["T"], float(data["s"])
    m = Z.shape[1]

    def loss(p):
        Y = adapted_weight(W2, p["B2"], p["A2"], s) @ (adapted_weight(W1, p["B1"], p["A1"], s) @ Z)
        return 0.5 * ((Y - T) ** 2).sum() / m

    return loss


_LOSSES: dict[str, Callable] = {
    "quadratic": _loss_quadratic,
    "quartic": _loss_quartic,
    "mlp": _loss_mlp,
    "lora": _loss_lora,
}


# ---------------------------------------------------------------------------
# Case definitions (seeded; the JSON is the definition from then on)
# ---------------------------------------------------------------------------
def _gen(seed):
    g = torch.Generator().manual_seed(seed)
    return lambda *shape: portable_randn(*shape, generator=g, dtype=torch.float64)  # the same bits on every CPU


def _case_quadratic() -> GoldenCase:
    r = _gen(101)
    A = coupled_spd(r, 5, 0.3)
    b = r(5)
    x = r(5)
    return GoldenCase(
        "quadratic",
        "coupled quadratic, 3 blocks",
        "Half the quadratic form of a fixed symmetric positive definite matrix A minus a linear term, "
        "over x = the blocks x1 (2), x2 (2), x3 (1) concatenated in that order.",
        "L(x) = 0.5 * x^T A x - b^T x,  x = concat(x1, x2, x3)",
        {"x1": x[:2].clone(), "x2": x[2:4].clone(), "x3": x[4:].clone()},
        {"A": A, "b": b},
        {"x1": ["x1"], "x2": ["x2"], "x3": ["x3"]},
        {"jc": "jc", "gs": "gs", "partial": "2<-1"},
        0.1,
        15,
        "quadratic",
    )


def _case_quartic() -> GoldenCase:
    r = _gen(202)
    A = coupled_spd(r, 5, 0.2)
    b = r(5)
    W = r(3, 5) / 5**0.5
    x = r(5)
    return GoldenCase(
        "quartic",
        "quadratic plus quartic ridge terms, 3 blocks",
        "A coupled quadratic plus gamma/4 times the sum of fourth powers of three fixed linear forms "
        "(rows of W) of x = the blocks x1 (2), x2 (1), x3 (2) concatenated in that order; a polynomial "
        "of degree 4 with non-zero third and fourth derivatives.",
        "L(x) = 0.5 * x^T A x - b^T x + (gamma / 4) * sum_m (W x)_m^4,  x = concat(x1, x2, x3)",
        {"x1": x[:2].clone(), "x2": x[2:3].clone(), "x3": x[3:].clone()},
        {"A": A, "b": b, "W": W, "gamma": 0.5},
        {"x1": ["x1"], "x2": ["x2"], "x3": ["x3"]},
        {"jc": "jc", "gs": "gs", "partial": "2<-1,3<-1"},
        0.05,
        15,
        "quartic",
    )


def _case_mlp() -> GoldenCase:
    r = _gen(303)
    widths = (3, 4, 3, 2)
    params = {}
    for l in range(1, 4):
        fi, fo = widths[l - 1], widths[l]
        params[f"W{l}"] = r(fo, fi) * (2.0 / (fi + fo)) ** 0.5
        params[f"b{l}"] = 0.1 * r(fo)
    X = r(5, 3)
    Y = torch.nn.functional.one_hot(torch.tensor([0, 1, 1, 0, 1]), 2).to(torch.float64)
    return GoldenCase(
        "tiny_mlp",
        "tanh MLP 3-4-3-2 with softmax cross-entropy, one block per layer",
        "A three-layer perceptron with tanh hidden activations on 5 fixed examples (rows of X) with one-hot "
        "labels Y; the loss is the mean softmax cross-entropy of the output logits. Block layer_l holds "
        "(W_l, b_l). GS runs output to input (the paper's layer-wise order).",
        "h1 = tanh(X W1^T + b1); h2 = tanh(h1 W2^T + b2); z = h2 W3^T + b3; "
        "L = mean_n [ logsumexp(z_n) - z_n . Y_n ]",
        params,
        {"X": X, "Y": Y},
        {"layer1": ["W1", "b1"], "layer2": ["W2", "b2"], "layer3": ["W3", "b3"]},
        {"jc": "jc", "gs": "gs:layer3,layer2,layer1", "partial": "chain:layer3,layer2,layer1"},
        0.3,
        15,
        "mlp",
    )


def _case_lora() -> GoldenCase:
    r = _gen(404)
    W1 = r(3, 4) / 2.0
    W2 = r(2, 3) / 3**0.5
    Z = r(4, 6)
    T = r(2, 6)
    return GoldenCase(
        "lora_bilinear",
        "two stacked linear maps with rank-2 LoRA factors, blocks B1, B2, A1, A2",
        "Two frozen linear maps W1 (3x4) and W2 (2x3), each adapted by a low-rank product s B A "
        "(s = alpha/r = 2), applied to 6 fixed inputs (columns of Z); the loss is half the mean squared "
        "Frobenius error to the targets T. Each factor is one block; GS updates all B factors, then all A "
        "factors (the paper's alternating LoRA order); the partial pattern lets each A see only its own "
        "fresh B.",
        "Y = (W2 + s B2 A2) (W1 + s B1 A1) Z;  L = ||Y - T||_F^2 / (2 m),  m = 6 columns",
        {
            "B1": 0.3 * r(3, 2),
            "B2": 0.3 * r(2, 2),
            "A1": r(2, 4) * (2.0 / 4) ** 0.5,
            "A2": r(2, 3) * (2.0 / 3) ** 0.5,
        },
        {"W1": W1, "W2": W2, "Z": Z, "T": T, "s": 2.0},
        {"B1": ["B1"], "B2": ["B2"], "A1": ["A1"], "A2": ["A2"]},
        {"jc": "jc", "gs": "gs", "partial": "A1<-B1,A2<-B2"},
        0.02,
        15,
        "lora",
    )


def _case_quartic_momentum() -> GoldenCase:
    case = _case_quartic()
    case.name, case.optimizer = "quartic_momentum", "momentum:0.9"
    case.title = "the quartic case with heavy-ball momentum 0.9 on both runs"
    case.notes = ["Beyond the paper: both runs take torch.optim.SGD(momentum=0.9) steps (docs/optimizers.md)."]
    return case


def _case_quadratic_block_lr() -> GoldenCase:
    case = _case_quadratic()
    case.name, case.block_lr = "quadratic_block_lr", {"x1": 4.0, "x3": 0.5}
    case.title = "the quadratic case with per-block step sizes lr * (4, 1, 0.5)"
    case.notes = ["Beyond the paper: block x1 steps with 4 lr, x3 with lr/2, x2 with lr (docs/optimizers.md)."]
    return case


#: case name -> builder
CASES: dict[str, Callable[[], GoldenCase]] = {
    "quadratic": _case_quadratic,
    "quartic": _case_quartic,
    "tiny_mlp": _case_mlp,
    "lora_bilinear": _case_lora,
    "quartic_momentum": _case_quartic_momentum,
    "quadratic_block_lr": _case_quadratic_block_lr,
}


def build_case(name: str) -> GoldenCase:
    """The case ``name`` (:data:`CASES`), its numbers round-tripped through JSON."""
    if name not in CASES:
        raise GoldenError(f"unknown golden case {name!r} (cases: {', '.join(CASES)})")
    case = CASES[name]()
    # the JSON is the definition: rebuild every tensor from its stored values
    return _case_from_dict(json.loads(json.dumps(_case_to_dict(case))))


def case_task(case: GoldenCase) -> Task:
    """The :class:`crosscurv.numeric.Task` of ``case`` (float64, CPU)."""
    loss = _LOSSES[case.model](case.data, list(case.params))
    return Task(dict(case.params), loss, {b: list(v) for b, v in case.blocks.items()}, name=case.name,
                info={"golden": case.name, "formula": case.formula}, default_pattern=case.patterns["gs"])


# ---------------------------------------------------------------------------
# JSON encoding
# ---------------------------------------------------------------------------
def _tensor_json(t) -> dict | float:
    if isinstance(t, (int, float)):
        return float(t)
    t = t.detach().to(torch.float64).cpu()
    return {"shape": list(t.shape), "values": t.tolist()}


def _tensor_from(obj) -> torch.Tensor | float:
    if isinstance(obj, (int, float)):
        return float(obj)
    vals = torch.tensor(obj["values"], dtype=torch.float64)
    return vals.reshape(obj["shape"])


def _case_to_dict(case: GoldenCase) -> dict:
    return {
        "name": case.name,
        "title": case.title,
        "model": case.model,
        "loss": {"words": case.words, "formula": case.formula},
        "dtype": "float64",
        "params": {k: _tensor_json(v) for k, v in case.params.items()},
        "data": {k: _tensor_json(v) for k, v in case.data.items()},
        "blocks": [{"name": b, "params": list(v)} for b, v in case.blocks.items()],
        "patterns_spec": dict(case.patterns),
        "lr": case.lr,
        "iters": case.iters,
        "notes": list(case.notes),
        **({} if case.plain else {"optimizer": case.optimizer, "block_lr": dict(case.block_lr)}),
    }


def _case_from_dict(d: dict) -> GoldenCase:
    return GoldenCase(
        d["name"], d["title"], d["loss"]["words"], d["loss"]["formula"],
        {k: _tensor_from(v) for k, v in d["params"].items()},
        {k: _tensor_from(v) for k, v in d["data"].items()},
        {b["name"]: list(b["params"]) for b in d["blocks"]},
        dict(d["patterns_spec"]), float(d["lr"]), int(d["iters"]), d["model"], list(d.get("notes", [])),
        str(d.get("optimizer", "sgd")), {str(k): float(v) for k, v in d.get("block_lr", {}).items()},
    )


def load_case(case_dir: str) -> tuple[GoldenCase, Task]:
    """Read ``case_dir/case.json`` back into a case and its task.

    Raises:
        GoldenError: missing or malformed file.
    """
    from crosscurv.numeric.records import RecordsError, read_text

    path = os.path.join(case_dir, "case.json")
    try:
        case = _case_from_dict(json.loads(read_text(path, "golden case")))
    except RecordsError as exc:
        raise GoldenError(str(exc)) from None
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise GoldenError(f"{path} is not a golden case file ({type(exc).__name__}: {exc})") from None
    return case, case_task(case)


# ---------------------------------------------------------------------------
# Expected quantities
# ---------------------------------------------------------------------------
def _case_json(case: GoldenCase, task: Task) -> dict:
    from crosscurv.numeric.estimates import init_power_vector

    d = _case_to_dict(case)
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
        "start": {k: _tensor_json(v) for k, v in init_power_vector(task.params, 0).items()},
        "note": "unit vector p_0 (over all parameters, in parameter order) the protocol's power iteration starts from",
    }
    return d


def _one_step(case: GoldenCase, task: Task) -> dict:
    from crosscurv.numeric.curvature import cross_curvature_table
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.one_step import one_step_estimate
    from crosscurv.numeric.steps import scheme_step

    lr = case.lr
    value, g = grad(task.loss, task.params)
    table = cross_curvature_table(task, task.params, g)
    out = {
        "lr": lr,
        "loss_0": float(value),
        "grad_0": {k: _tensor_json(v) for k, v in g.items()},
        "grad_norm2": table.grad_norm2,
        "block_names": task.block_names,
        "c": table.c.tolist(),
        "C_cross": table.C_cross,
        "gHg": table.gHg,
        "patterns": {},
    }
    with torch.no_grad():
        theta_jc = scheme_step(task, task.params, as_pattern("jc", task.n_blocks), lr)
        loss_jc = float(task.loss(theta_jc))
    out["loss_jc_1"] = loss_jc
    out["theta_jc_1"] = {k: _tensor_json(v) for k, v in theta_jc.items()}
    for label, spec in case.patterns.items():
        p = as_pattern(spec, task.n_blocks, task.block_names)
        th = scheme_step(task, task.params, p, lr)
        with torch.no_grad():
            ls = float(task.loss(th))
        est = one_step_estimate(task, task.params, p, lr, g)
        out["patterns"][label] = {
            "spec": spec,
            "C_S": table.C_S(p),
            "loss_s_1": ls,
            "gap_1": ls - loss_jc,
            "eta2_estimate": est["eta2"],
            "c3": est["c3"],
            "eta3_estimate": est["eta3"],
            "theta_s_1": {k: _tensor_json(v) for k, v in th.items()},
        }
    return out


def _one_step_optimizer(case: GoldenCase, task: Task) -> dict:
    """``one_step.json`` of an optimizer case: the first step from zero state (README, optimizer
    section)."""
    from crosscurv.numeric.curvature import cross_curvature_table
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.optimizer_estimates import optimizer_one_step_estimate
    from crosscurv.numeric.optimizers import optimizer_scheme_step, optimizer_setup

    setup = optimizer_setup(task, case.optimizer, case.block_lr)
    lr, factors = case.lr, list(setup.factors)
    value, g = grad(task.loss, task.params)
    table = cross_curvature_table(task, task.params, g)
    out = {
        "lr": lr,
        "optimizer": setup.spec.to_dict(),
        "block_factors": dict(zip(task.block_names, factors)),
        "loss_0": float(value),
        "grad_0": {k: _tensor_json(v) for k, v in g.items()},
        "block_names": task.block_names,
        "c": table.c.tolist(),
        "C_cross": table.C_cross,
        "patterns": {},
    }
    theta_jc, _, _ = optimizer_scheme_step(task, task.params, as_pattern("jc", task.n_blocks), lr, setup.spec,
                                           None, factors)
    with torch.no_grad():
        loss_jc = float(task.loss(theta_jc))
    out["loss_jc_1"] = loss_jc
    out["theta_jc_1"] = {k: _tensor_json(v) for k, v in theta_jc.items()}
    for label, spec in case.patterns.items():
        p = as_pattern(spec, task.n_blocks, task.block_names)
        th, _, _ = optimizer_scheme_step(task, task.params, p, lr, setup.spec, None, factors)
        with torch.no_grad():
            ls = float(task.loss(th))
        est = optimizer_one_step_estimate(task, task.params, p, lr, setup.spec, None, factors, g)
        out["patterns"][label] = {
            "spec": spec,
            "C_S": est["C_S"],
            "loss_s_1": ls,
            "gap_1": ls - loss_jc,
            "eta2_estimate": est["eta2"],
            "theta_s_1": {k: _tensor_json(v) for k, v in th.items()},
        }
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
        raise GoldenError(f"unknown golden case(s) {', '.join(unknown)} (cases: {', '.join(CASES)})")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise GoldenError(f"output path {out_dir} exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        raise GoldenError(f"{out_dir} is not empty; choose another --out or pass --force to overwrite")
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
        one_step = _one_step(case, task) if case.plain else _one_step_optimizer(case, task)
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
    _write_json(os.path.join(out_dir, "index.json"), {"format": FORMAT, "version": FORMAT_VERSION, "cases": index})
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(readme_text())
    return written + ["index.json", "README.md"]


def readme_text() -> str:
    """The ``README.md`` of a golden folder: ``golden_readme.md`` beside this module, with the
    tolerance
    table written from :data:`crosscurv.numeric.record_comparison.TOLERANCES`."""
    from crosscurv.numeric.record_comparison import EPS, MEASURED_ROUNDING, SAFETY, TOLERANCES

    rows = "\n".join(
        f"| `{c}` | {MEASURED_ROUNDING['float64'][c][0]:.1e} | {MEASURED_ROUNDING['float64'][c][1]:.1e} "
        f"| {r:.2g} | {a:.2g} |"
        for c, (r, a) in TOLERANCES["float64"].items())
    with open(README_TEMPLATE, encoding="utf-8") as fh:
        text = fh.read()
    text = text.replace("@ROWS@", rows).replace("@SAFETY@", f"{SAFETY:g}")
    return text.replace("@EPS@", f"{EPS['float64']:.3g}")
