"""One golden conformance case: its definition, its task, and its JSON (``case.json``).

Each case is built once from a seeded generator (:data:`CASES`); from then on the JSON is the
definition: :func:`build_case` round-trips the numbers through JSON (float64 values written with
``repr``, exactly), :func:`case_task` builds the :class:`crosscurv.numeric.Task` from them and
:func:`load_case` reads a ``case.json`` back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

import torch

from crosscurv.numeric.portable_random import portable_randn
from crosscurv.numeric.task import Task

from ..problems.toys import (adapted_weight, coupled_spd, mlp_forward, quadratic_loss,
                             quartic_ridge_loss)
from .golden_data import GoldenError

__all__ = ["GoldenCase", "CASES", "build_case", "case_task", "load_case", "tensor_json",
           "case_to_dict", "case_from_dict"]


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
    # the same bits on every CPU
    return lambda *shape: portable_randn(*shape, generator=g, dtype=torch.float64)


def _case_quadratic() -> GoldenCase:
    r = _gen(101)
    A = coupled_spd(r, 5, 0.3)
    b = r(5)
    x = r(5)
    return GoldenCase(
        "quadratic",
        "coupled quadratic, 3 blocks",
        "Half the quadratic form of a fixed symmetric positive definite matrix A minus a linear "
        "term, over x = the blocks x1 (2), x2 (2), x3 (1) concatenated in that order.",
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
        "A coupled quadratic plus gamma/4 times the sum of fourth powers of three fixed linear "
        "forms (rows of W) of x = the blocks x1 (2), x2 (1), x3 (2) concatenated in that order; a "
        "polynomial of degree 4 with non-zero third and fourth derivatives.",
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
        "A three-layer perceptron with tanh hidden activations on 5 fixed examples (rows of X) "
        "with one-hot labels Y; the loss is the mean softmax cross-entropy of the output logits. "
        "Block layer_l holds (W_l, b_l). GS runs output to input (the paper's layer-wise order).",
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
        "Two frozen linear maps W1 (3x4) and W2 (2x3), each adapted by a low-rank product s B A (s "
        "= alpha/r = 2), applied to 6 fixed inputs (columns of Z); the loss is half the mean "
        "squared Frobenius error to the targets T. Each factor is one block; GS updates all B "
        "factors, then all A factors (the paper's alternating LoRA order); the partial pattern "
        "lets each A see only its own fresh B.",
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
    case.notes = ["Beyond the paper: both runs take torch.optim.SGD(momentum=0.9) steps "
                  "(docs/optimizers.md)."]
    return case


def _case_quadratic_block_lr() -> GoldenCase:
    case = _case_quadratic()
    case.name, case.block_lr = "quadratic_block_lr", {"x1": 4.0, "x3": 0.5}
    case.title = "the quadratic case with per-block step sizes lr * (4, 1, 0.5)"
    case.notes = ["Beyond the paper: block x1 steps with 4 lr, x3 with lr/2, x2 with lr "
                  "(docs/optimizers.md)."]
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
    return case_from_dict(json.loads(json.dumps(case_to_dict(case))))


def case_task(case: GoldenCase) -> Task:
    """The :class:`crosscurv.numeric.Task` of ``case`` (float64, CPU)."""
    loss = _LOSSES[case.model](case.data, list(case.params))
    return Task(dict(case.params), loss, {b: list(v) for b, v in case.blocks.items()},
                name=case.name, info={"golden": case.name, "formula": case.formula},
                default_pattern=case.patterns["gs"])


# ---------------------------------------------------------------------------
# JSON encoding
# ---------------------------------------------------------------------------
def tensor_json(t) -> dict | float:
    if isinstance(t, (int, float)):
        return float(t)
    t = t.detach().to(torch.float64).cpu()
    return {"shape": list(t.shape), "values": t.tolist()}


def _tensor_from(obj) -> torch.Tensor | float:
    if isinstance(obj, (int, float)):
        return float(obj)
    vals = torch.tensor(obj["values"], dtype=torch.float64)
    return vals.reshape(obj["shape"])


def case_to_dict(case: GoldenCase) -> dict:
    return {
        "name": case.name,
        "title": case.title,
        "model": case.model,
        "loss": {"words": case.words, "formula": case.formula},
        "dtype": "float64",
        "params": {k: tensor_json(v) for k, v in case.params.items()},
        "data": {k: tensor_json(v) for k, v in case.data.items()},
        "blocks": [{"name": b, "params": list(v)} for b, v in case.blocks.items()],
        "patterns_spec": dict(case.patterns),
        "lr": case.lr,
        "iters": case.iters,
        "notes": list(case.notes),
        **({} if case.plain else {"optimizer": case.optimizer, "block_lr": dict(case.block_lr)}),
    }


def case_from_dict(d: dict) -> GoldenCase:
    return GoldenCase(
        d["name"], d["title"], d["loss"]["words"], d["loss"]["formula"],
        {k: _tensor_from(v) for k, v in d["params"].items()},
        {k: _tensor_from(v) for k, v in d["data"].items()},
        {b["name"]: list(b["params"]) for b in d["blocks"]},
        dict(d["patterns_spec"]), float(d["lr"]), int(d["iters"]), d["model"],
        list(d.get("notes", [])), str(d.get("optimizer", "sgd")),
        {str(k): float(v) for k, v in d.get("block_lr", {}).items()},
    )


def load_case(case_dir: str) -> tuple[GoldenCase, Task]:
    """Read ``case_dir/case.json`` back into a case and its task.

    Raises:
        GoldenError: missing or malformed file.
    """
    from crosscurv.numeric.records import RecordsError, read_text

    path = os.path.join(case_dir, "case.json")
    try:
        case = case_from_dict(json.loads(read_text(path, "golden case")))
    except RecordsError as exc:
        raise GoldenError(str(exc)) from None
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise GoldenError(
            f"{path} is not a golden case file ({type(exc).__name__}: {exc})") from None
    return case, case_task(case)
