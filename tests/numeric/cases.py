"""Small test problems as data (curvlinops-style ``cases``) and dense float64 references.

Each case builds a :class:`crosscurv.numeric.Task` in float64 small enough for a dense
``torch.func.hessian`` (``d <= 51``):

* ``tanh_mlp``: 3-4-3-3-2 tanh MLP, MSE on 6 points, one block per layer (4 blocks);
* ``bilinear_lora``: ``W0 + B A`` (``W0`` frozen, rank 2) on fixed data, MSE with a tanh read-out,
  blocks ``B`` and ``A`` (2 blocks);
* ``tiny_conv``: ``Conv2d(1, 2, 3)`` + tanh + ``Linear(8, 3)``, cross-entropy on four 4x4 images,
  built through :func:`crosscurv.numeric.task_from_module` (blocks ``conv``, ``fc.weight``,
  ``fc.bias``).

Outside ``CASES`` (too large for a dense Hessian, float32 like the built-in tasks): ``relu_mlp``, a
ReLU network whose gradient has kinks along a segment (the measured gap's hard case,
:mod:`crosscurv.numeric.gap`).

The losses are built from :mod:`crosscurv.experiments.problems.toys` (the toy losses the golden
cases and the scaling study use).  Random inputs and parameters come from
:mod:`crosscurv.numeric.portable_random` (float64 draws, rounded to the case's dtype): the same bits
on every CPU.

The dense helpers flatten parameters in key order (:func:`crosscurv.numeric.tree.flatten`) and are
for tests only.
"""

from __future__ import annotations

import torch

from crosscurv.experiments.problems.toys import adapted_weight, mlp_forward
from crosscurv.numeric import Task, task_from_module, tree
from crosscurv.numeric.portable_random import portable_default_init_, portable_randn
from crosscurv.theory.patterns import chain, from_pairs, gauss_seidel, jacobi

DTYPE = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tanh_mlp(seed: int = 0, dtype=DTYPE, device="cpu") -> Task:
    gen = _gen(seed)
    sizes = [3, 4, 3, 3, 2]
    x = portable_randn(6, sizes[0], generator=gen, dtype=dtype)
    y = portable_randn(6, sizes[-1], generator=gen, dtype=dtype)
    params, blocks = {}, {}
    for layer, (a, b) in enumerate(zip(sizes, sizes[1:])):
        params[f"l{layer}.w"] = portable_randn(b, a, generator=gen, dtype=dtype) / a**0.5
        params[f"l{layer}.b"] = 0.3 * portable_randn(b, generator=gen, dtype=dtype)
        blocks[f"layer{layer + 1}"] = [f"l{layer}.w", f"l{layer}.b"]
    layers = [(f"l{layer}.w", f"l{layer}.b") for layer in range(len(sizes) - 1)]
    x, y = x.to(device), y.to(device)
    params = {k: v.to(device) for k, v in params.items()}

    def loss(p):
        return 0.5 * ((mlp_forward(p, x, layers) - y) ** 2).sum(dim=1).mean()

    return Task(params, loss, blocks, name="tanh_mlp")


def bilinear_lora(seed: int = 0, dtype=DTYPE, device="cpu") -> Task:
    gen = _gen(seed)
    m, n, r = 4, 5, 2
    w0 = portable_randn(m, n, generator=gen, dtype=dtype) / n**0.5
    x = portable_randn(7, n, generator=gen, dtype=dtype)
    y = portable_randn(7, m, generator=gen, dtype=dtype)
    params = {
        "B": 0.5 * portable_randn(m, r, generator=gen, dtype=dtype),
        "A": 0.5 * portable_randn(r, n, generator=gen, dtype=dtype),
    }
    w0, x, y = w0.to(device), x.to(device), y.to(device)
    params = {k: v.to(device) for k, v in params.items()}

    def loss(p):
        w = adapted_weight(w0, p["B"], p["A"])
        return 0.5 * ((torch.tanh(x @ w.T) - y) ** 2).sum(dim=1).mean()

    return Task(params, loss, {"B": ["B"], "A": ["A"]}, name="bilinear_lora")


class _TinyConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.tanh(self.conv(x)).flatten(1))


def tiny_conv(seed: int = 0, dtype=DTYPE, device="cpu") -> Task:
    torch.manual_seed(seed)
    model = _TinyConv()
    torch.manual_seed(seed)  # the same draws again, the same bits on every CPU
    model = portable_default_init_(model).to(dtype=dtype, device=device)
    gen = _gen(seed + 1)
    x = portable_randn(4, 1, 4, 4, generator=gen, dtype=dtype).to(device)
    y = torch.tensor([0, 2, 1, 2], device=device)

    def objective(forward, p):
        return torch.nn.functional.cross_entropy(forward(x), y)

    rule = [("conv", r"^conv\."), ("fc.weight", r"^fc\.weight$"), ("fc.bias", r"^fc\.bias$")]
    return task_from_module(model, objective, rule, name="tiny_conv")


#: name -> builder(seed=0, dtype=float64, device="cpu")
def relu_mlp(seed: int = 0, dtype=torch.float32) -> Task:
    """8-32-32-3 ReLU MLP, cross-entropy on 128 random points, one block per layer (3 blocks)."""
    gen = _gen(seed)
    x, y = portable_randn(128, 8, generator=gen, dtype=dtype), torch.randint(0, 3, (128,),
                                                                             generator=gen)
    params = {"w1": portable_randn(8, 32, generator=gen, dtype=dtype) / 2,
              "w2": portable_randn(32, 32, generator=gen, dtype=dtype) / 4,
              "w3": portable_randn(32, 3, generator=gen, dtype=dtype) / 4}

    def loss(p):
        h = torch.relu(torch.relu(x @ p["w1"]) @ p["w2"])
        return torch.nn.functional.cross_entropy(h @ p["w3"], y)

    return Task(params, loss, {"1": ["w1"], "2": ["w2"], "3": ["w3"]}, name="relu_mlp")


CASES = {"tanh_mlp": tanh_mlp, "bilinear_lora": bilinear_lora, "tiny_conv": tiny_conv}


def patterns_for(n: int) -> dict:
    """Delay patterns exercised on an ``n``-block case (JC, GS both ways, chain, partial, shared
    fresh sets)."""
    pats = {
        "jc": jacobi(n),
        "gs": gauss_seidel(n),
        "gs_reversed": gauss_seidel(n, list(reversed(range(n)))),
    }
    if n >= 3:
        pats["chain"] = chain(n)
        pats["partial_2<-1"] = from_pairs(n, [(1, 0)])
        # blocks 1 and 2 share the fresh set {0}: one HVP serves both rows
        pats["shared_fresh"] = from_pairs(n, [(1, 0), (2, 0)])
    if n >= 4:
        # block 3 sees new 0 and 1 but stale 2 (not the in-place state)
        pats["skip"] = from_pairs(n, [(1, 0), (2, 1), (3, 0), (3, 1)])
    return pats


def random_direction(params, seed: int) -> dict:
    gen = _gen(seed)
    return {k: portable_randn(v.shape, generator=gen, dtype=v.dtype) for k, v in params.items()}


# -- dense float64 references (tests only) ------------------------------------
def flat_loss(task: Task, like=None):
    like = task.params if like is None else like
    return lambda f: task.loss(tree.unflatten(f, like))


def dense_hessian(task: Task, params=None) -> torch.Tensor:
    """``(d, d)`` Hessian by ``torch.func.hessian`` in the parameters' dtype (float64 cases; tests
    only)."""
    p = task.params if params is None else params
    f = tree.flatten(p)
    return torch.func.hessian(flat_loss(task, p))(f)


def dense_gradient(task: Task, params=None) -> torch.Tensor:
    p = task.params if params is None else params
    f = tree.flatten(p)
    return torch.func.grad(flat_loss(task, p))(f)


def dense_third(task: Task, params=None) -> torch.Tensor:
    """``(d, d, d)`` third-derivative tensor, the Jacobian of ``torch.func.hessian`` (tests only).

    ``jacfwd`` rather than ``jacrev`` of the Hessian: the same tensor, 3-25x faster here.
    """
    p = task.params if params is None else params
    f = tree.flatten(p)
    return torch.func.jacfwd(torch.func.hessian(flat_loss(task, p)))(f)


_REFERENCE: dict = {}


def dense_reference(name: str, with_third: bool = False) -> dict:
    """Cached ``{"task", "g", "H"[, "T"]}`` for case ``name`` at its initial point (float64)."""
    ref = _REFERENCE.setdefault(name, {})
    if "task" not in ref:
        task = CASES[name]()
        ref.update(task=task, g=dense_gradient(task), H=dense_hessian(task))
    if with_third and "T" not in ref:
        ref["T"] = dense_third(ref["task"])
    return ref


def block_index(task: Task) -> torch.Tensor:
    """``(d,)`` block number of each flat coordinate (key order of ``task.params``)."""
    owner = {k: i for i, b in enumerate(task.block_names) for k in task.blocks[b]}
    return torch.cat([torch.full((v.numel(),), owner[k]) for k, v in task.params.items()])


def dense_mask(task: Task, pattern) -> torch.Tensor:
    """``(d, d)`` 0/1 float64 mask of ``M_S`` (entry ``(a, b)`` set iff ``(blk a, blk b) in S``)."""
    idx = block_index(task)
    n = task.n_blocks
    m = torch.tensor(pattern.mask(), dtype=torch.float64).reshape(n, n)
    return m[idx][:, idx]


def relerr(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / max(||b||, tiny)``."""
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def all_case_patterns():
    """``(case_name, pattern_name)`` pairs for parametrisation."""
    out = []
    for name, build in CASES.items():
        n = build().n_blocks
        out += [(name, p) for p in patterns_for(n)]
    return out


__all__ = [
    "CASES",
    "relu_mlp",
    "patterns_for",
    "random_direction",
    "dense_hessian",
    "dense_gradient",
    "dense_third",
    "dense_reference",
    "dense_mask",
    "block_index",
    "relerr",
    "all_case_patterns",
]


_DENSE_CACHE: dict = {}


def cached_dense(name: str):
    """``(task, H, g)`` of case ``name`` at its parameters: dense float64 Hessian and gradient,
    computed once."""
    if name not in _DENSE_CACHE:
        task = CASES[name]()
        _DENSE_CACHE[name] = (task, dense_hessian(task), dense_gradient(task))
    return _DENSE_CACHE[name]


def param_offsets(task: Task) -> dict:
    """``{key: slice}`` of each parameter in the flat vector (key order of ``task.params``)."""
    out, at = {}, 0
    for k, v in task.params.items():
        out[k] = slice(at, at + v.numel())
        at += v.numel()
    return out


def check_restricted_products(point, task: Task, H: torch.Tensor, tol: float) -> None:
    """``point.hvp(v_C, rows=R)`` is the dense ``sum_{c in C} H[R, c] v_c`` for several column and
    row sets."""
    sl = param_offsets(task)
    keys = list(task.params)
    v = random_direction(task.params, 5)
    for cols in (keys[:1], keys[1:], keys[::2]):
        for rows in (keys[-1:], keys[:2], keys):
            out = point.hvp({k: v[k] for k in cols}, rows)
            assert list(out) == rows
            for r in rows:
                ref = sum(H[sl[r], sl[c]] @ v[c].reshape(-1) for c in cols)
                assert relerr(out[r].reshape(-1), ref) < tol, (cols, r)
