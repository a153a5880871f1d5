"""Small networks as problem instances: a tanh MLP, a bilinear LoRA-like model, the paper's MNIST
MLP.

:func:`tanh_mlp_problem` (MSE on seeded Gaussian data, tensors grouped into ``N`` blocks),
:func:`bilinear_problem` (``1/(2n) ||(W0 + s B A) X - Y||_F^2``, blocks ``B`` then ``A``),
:func:`mnist_mlp_problem` (the paper's 8-layer ReLU MLP on MNIST, one block per layer) and
:func:`relu_kink_radius` (how far its expansions hold). Every instance is a pure function of its
arguments (seeded generators, never the global RNG state).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from crosscurv.numeric.task import Task

from .curvature_scale import curvature_scale
from .problem import DTYPE, Problem
from .toys import adapted_weight, mlp_forward


def _random_groups(rng, n_items: int, n_groups: int) -> list[list[int]]:
    """A random partition of ``range(n_items)`` into ``n_groups`` non-empty groups (item order
    kept).
    """
    perm = rng.permutation(n_items)
    groups = [[int(perm[g])] for g in range(n_groups)]
    for item in perm[n_groups:]:
        groups[int(rng.integers(n_groups))].append(int(item))
    return [sorted(g) for g in groups]


def tanh_mlp_problem(seed: int, widths: Sequence[int] = (3, 4, 4, 2), n_blocks: int = 2,
                     n_examples: int = 8) -> Problem:
    """A small tanh MLP, MSE loss ``1/(2n) sum ||f(x_m) - y_m||^2`` on seeded Gaussian data.

    Weights ``W_l ~ N(0, 1/fan_in)``, biases ``N(0, 0.1^2)``; inputs ``x ~ N(0, I)``, targets ``y ~
    N(0, I)``. The ``2 (len(widths) - 1)`` parameter tensors are grouped into ``n_blocks`` non-empty
    blocks at random (blocks ordered by their first tensor).
    """
    widths = tuple(int(w) for w in widths)
    rng = np.random.default_rng(int(seed))
    n_layers = len(widths) - 1
    names, params = [], {}
    for l in range(n_layers):
        fan_in, fan_out = widths[l], widths[l + 1]
        params[f"l{l + 1}.weight"] = torch.tensor(rng.standard_normal((fan_out, fan_in))
                                                  / math.sqrt(fan_in), dtype=DTYPE)
        params[f"l{l + 1}.bias"] = torch.tensor(0.1 * rng.standard_normal(fan_out), dtype=DTYPE)
        names += [f"l{l + 1}.weight", f"l{l + 1}.bias"]
    if not 1 <= n_blocks <= len(names):
        raise ValueError(f"n_blocks must be in 1..{len(names)}, got {n_blocks}")
    X = torch.tensor(rng.standard_normal((n_examples, widths[0])), dtype=DTYPE)
    Y = torch.tensor(rng.standard_normal((n_examples, widths[-1])), dtype=DTYPE)
    groups = sorted(_random_groups(rng, len(names), n_blocks))
    blocks = {f"block{b + 1}": [names[i] for i in g] for b, g in enumerate(groups)}

    layers = [(f"l{l}.weight", f"l{l}.bias") for l in range(1, n_layers + 1)]

    def loss(p: dict) -> torch.Tensor:
        """MSE of the tanh MLP on the fixed examples."""
        return 0.5 * ((mlp_forward(p, X, layers) - Y) ** 2).sum() / n_examples

    info = {"family": "tanh_mlp", "seed": int(seed), "widths": list(widths), "examples": n_examples}
    task = Task(params, loss, blocks, "tanh_mlp", info, "gs")
    return Problem(task, "tanh_mlp", curvature_scale(task), None, info)


def bilinear_problem(seed: int, d_out: int = 5, d_in: int = 6, rank: int = 2, n_examples: int = 12,
                     alpha: float = 2.0) -> Problem:
    """LoRA-like two-block model ``L(B, A) = 1/(2n) ||(W0 + (alpha/r) B A) X - Y||_F^2``.

    ``W0 (d_out x d_in)`` frozen with entries ``N(0, 1/d_in)``; ``A (r x d_in)`` ``N(0, 1/d_in)``
    (LoRA's A init scale); ``B (d_out x r)`` small but non-zero, ``N(0, 0.3^2 / r)`` (with ``B =
    0``, as at LoRA's initialisation, ``grad_A = 0`` and every ``c_ij`` vanishes, so the one-step
    gap would start at ``O(eta^3)``); ``X ~ N(0, I)``, ``Y = W* X`` for a random target ``W*``.
    Blocks ``B`` then ``A`` (LoRA's GS order).
    """
    rng = np.random.default_rng(int(seed))
    W0 = torch.tensor(rng.standard_normal((d_out, d_in)) / math.sqrt(d_in), dtype=DTYPE)
    Wt = torch.tensor(rng.standard_normal((d_out, d_in)) / math.sqrt(d_in), dtype=DTYPE)
    X = torch.tensor(rng.standard_normal((d_in, n_examples)), dtype=DTYPE)
    Y = Wt @ X
    params = {
        "B": torch.tensor(0.3 * rng.standard_normal((d_out, rank)) / math.sqrt(rank), dtype=DTYPE),
        "A": torch.tensor(rng.standard_normal((rank, d_in)) / math.sqrt(d_in), dtype=DTYPE),
    }
    s = alpha / rank

    def loss(p: dict) -> torch.Tensor:
        """Squared error of the low-rank-adapted linear map on the fixed examples."""
        R = adapted_weight(W0, p["B"], p["A"], s) @ X - Y
        return 0.5 * (R**2).sum() / n_examples

    info = {"family": "bilinear", "seed": int(seed), "d_out": d_out, "d_in": d_in, "rank": rank,
            "examples": n_examples, "alpha": alpha}
    task = Task(params, loss, {"B": ["B"], "A": ["A"]}, "bilinear", info, "gs")
    return Problem(task, "bilinear", curvature_scale(task), None, info)


def mnist_mlp_problem(seed: int = 0, examples: int = 64, widths: Sequence[int] | None = None,
                      device="cpu", scale_iters: int = 12) -> Problem:
    """The 8-layer ReLU MLP of the layer-wise study on ``examples`` real MNIST digits, float64.

    Same network (:class:`crosscurv.experiments.tasks.models.mlp.MLP`, Xavier-normal weights, zero
    biases), data (:func:`crosscurv.experiments.tasks.data.load_mnist`, pixels in ``[0, 1]``) and
    loss (mean softmax cross-entropy) as the ``mlp`` task, one block per affine layer, in float64;
    ``examples`` may be smaller than the study's 256 to keep the scaling study fast.
    ``scale_iters``: power iterations of :func:`curvature_scale`.
    """
    from torch.nn import functional as F

    from crosscurv.experiments.tasks.data import load_mnist
    from crosscurv.experiments.tasks.models.mlp import MLP, PAPER_WIDTHS, mlp_blocks

    widths = tuple(PAPER_WIDTHS if widths is None else widths)
    data = load_mnist(examples, dtype=DTYPE, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = MLP(widths)
    model = model.to(device=device, dtype=DTYPE).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y = data.x, data.y

    def loss(p: dict) -> torch.Tensor:
        """Mean softmax cross-entropy of the ReLU MLP over the fixed MNIST examples."""
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    info = {"family": "mnist_mlp", "seed": int(seed), "examples": len(data), "widths": list(widths),
            "data_source": data.source}
    task = Task(params, loss, mlp_blocks(model.n_layers), "mnist_mlp", info, "gs")
    return Problem(task, "mnist_mlp", curvature_scale(task, iters=scale_iters), None, info,
                   {"x": x, "n_layers": model.n_layers})


def relu_kink_radius(problem: Problem, direction: dict, params=None) -> float:
    """Step length along ``direction`` at which the first ReLU of the MNIST MLP changes state.

    The loss of a ReLU network is smooth (and the theory's Assumption 1 holds) only while no
    pre-activation ``z`` of any hidden unit on any example changes sign. Moving the parameters to
    ``theta + eta * direction`` changes each ``z`` at the rate ``z_dot`` (a ``jvp``); to first order
    the first sign change happens at ``eta = min |z| / |z_dot|`` over all units and examples.
    """
    x = problem.extras["x"]
    n_layers = problem.extras["n_layers"]
    p = {k: v.detach() for k, v in (problem.task.params if params is None else params).items()}

    def pre_activations(q):
        h, zs = x, []
        for l in range(1, n_layers):
            z = h @ q[f"layer{l}.weight"].T + q[f"layer{l}.bias"]
            zs.append(z)
            h = torch.relu(z)
        return tuple(zs)

    zs, dzs = torch.func.jvp(pre_activations, (p,), ({k: direction[k].to(p[k]) for k in p},))
    z = torch.cat([t.reshape(-1) for t in zs])
    dz = torch.cat([t.reshape(-1) for t in dzs])
    moving = dz.abs() > 0
    return float((z[moving].abs() / dz[moving].abs()).min())
