"""The problem zoo: small problems of different kinds (float64; one fresh round in float32), shared
by the tests and the certificates study.

Each entry of :data:`ZOO` is a :class:`ZooProblem`: a task factory (usable as ``crosscurv run
crosscurv.experiments.problems.zoo:NAME``), the learning rates as multiples ``c`` of ``1 /
lambda_max(H^0)`` (the Hessian at ``theta^0``, converged by
:func:`crosscurv.numeric.estimates.solve_extremes`) from ``0.1`` to the edge of stability ``1.9``, a
budget ``K`` and the half of the zoo it belongs to (``"tune"``: the study's other rules, such as
the records' look-back, are chosen on it alone; ``"held-out"``: measured only, except that the
certificate's safety factor is chosen on both halves and on :data:`BEYOND`, then tested on
:data:`FRESH`).

Kinds (``d`` parameters, ``N`` blocks):

* ``matrix_factorisation``: ``1/(2 |Omega|) sum_Omega ((U V^T)_ij - M_ij)^2``, ``M`` 30x20 of rank
  3, half the entries observed; blocks ``U`` (30x3), ``V`` (20x3);
* ``deep_linear``: ``1/(2n) ||W3 W2 W1 X - Y||_F^2``, widths 4-4-4-3, one block per layer;
* ``logistic``: a convex GLM, mean logistic loss ``log(1 + exp(-y x.w))`` plus ``1e-3/2 ||w||^2``,
  the 12 weights in two blocks (first 6 features, the rest with the bias);
* ``tanh_net``: a 4-6-6-2 tanh MLP, mean squared error, one block per layer;
* ``relu_net``: a 4-8-2 ReLU MLP, mean squared error, one block per layer (kinks: not smooth);
* ``attention``: ``1/(2n) ||softmax(X Wq Wk^T X^T / sqrt(p)) X Wv - Y||_F^2`` over ``T = 5`` tokens
  of width 4 (projections 4x3), blocks ``Wq``, ``Wk``, ``Wv``;
* ``ill_quadratic``: ``1/2 x^T A x - b^T x`` with ``A`` coupled and eigenvalues from ``1e-3`` to
  ``1``, three blocks of 4;
* ``quartic``: the random quartic polynomial of :mod:`.quartic` (three blocks of 3).

Every factory takes ``seed`` (default 0) and draws from ``numpy.random.default_rng(seed)`` only, so
a problem is a pure function of its seed.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import (conv_net, cp_tensor, deep_tanh6,
                                                   gaussian_mixture, gelu_net, heteroscedastic,
                                                   huber_regression, layernorm_net,
                                                   phase_retrieval, poisson_regression,
                                                   probit_regression, residual_net, rosenbrock,
                                                   sigmoid_autoencoder, sine_net,
                                                   softmax_regression, squared_hinge)
from crosscurv.experiments.problems.problem import DTYPE
from crosscurv.experiments.problems.toys import concat, mlp_forward
from crosscurv.numeric.task import Task

__all__ = [
    "BEYOND",
    "FRESH",
    "ZooProblem",
    "ZOO",
    "zoo_problem",
    "lambda_max0",
    "LR_FACTORS",
    "matrix_factorisation",
    "deep_linear",
    "logistic",
    "tanh_net",
    "relu_net",
    "attention",
    "ill_quadratic",
    "quartic",
    "tanh_mlp4",
    "lora_bilinear",
    "cp_tensor",
    "softmax_regression",
    "sigmoid_autoencoder",
    "rosenbrock",
    "huber_regression",
    "gelu_net",
]

#: learning rates of every zoo problem, as multiples of ``1 / lambda_max(H^0)``
LR_FACTORS = (0.1, 0.5, 1.0, 1.5, 1.9)


def _t(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a), dtype=DTYPE)


def matrix_factorisation(seed: int = 0) -> Task:
    """Matrix completion: ``M = A B^T`` (30x20, rank 3, ``A, B ~ N(0, 1)``), half the entries
    observed (``Omega``, a seeded mask), ``L(U, V) = 1/(2 |Omega|) sum_Omega ((U V^T)_ij -
    M_ij)^2``; ``U`` 30x3, ``V`` 20x3 start ``N(0, 0.5^2)``."""
    rng = np.random.default_rng(int(seed))
    A, B = rng.standard_normal((30, 3)), rng.standard_normal((20, 3))
    mask = np.zeros(600)
    mask[rng.permutation(600)[:300]] = 1.0
    M, W = _t(A @ B.T), _t(mask.reshape(30, 20))
    params = {
        "U": _t(0.5 * rng.standard_normal((30, 3))),
        "V": _t(0.5 * rng.standard_normal((20, 3))),
    }
    n_obs = float(mask.sum())

    def loss(p):
        """Mean squared error of ``U V^T`` on the observed entries (halved)."""
        return 0.5 * ((W * (p["U"] @ p["V"].T - M)) ** 2).sum() / n_obs

    return Task(
        params,
        loss,
        {"U": ["U"], "V": ["V"]},
        "matrix_factorisation",
        {"family": "matrix_factorisation", "seed": int(seed), "shape": [30, 20], "rank": 3},
        "gs",
    )


def deep_linear(seed: int = 0) -> Task:
    """A deep linear network ``1/(2n) ||W3 W2 W1 X - Y||_F^2``: widths 4-4-4-3, ``n = 16`` examples
    ``X ~ N(0, I)``, ``Y = T X`` for a random ``T``; ``W_l ~ N(0, 1/fan_in)``; blocks ``W1``,
    ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((4, 16)))
    Y = _t(rng.standard_normal((3, 4))) @ X
    params = {
        "W1": _t(rng.standard_normal((4, 4)) / 2),
        "W2": _t(rng.standard_normal((4, 4)) / 2),
        "W3": _t(rng.standard_normal((3, 4)) / 2),
    }

    def loss(p):
        """Squared error of the product of the three layers."""
        return 0.5 * ((p["W3"] @ (p["W2"] @ (p["W1"] @ X)) - Y) ** 2).sum() / 16

    return Task(
        params,
        loss,
        {n: [n] for n in params},
        "deep_linear",
        {"family": "deep_linear", "seed": int(seed), "widths": [4, 4, 4, 3]},
        "gs",
    )


def logistic(seed: int = 0) -> Task:
    """Logistic regression (a convex GLM): ``1/n sum_m log(1 + exp(-y_m (x_m.w + b))) + 1e-3/2
    ||w||^2``,
    ``n = 40`` examples of 11 features ``N(0, I)``, labels ``y = sign(x.w* + noise)``; blocks ``w1``
    (6
    weights) and ``w2`` (5 weights and the bias ``b``), started at ``N(0, 0.1^2)``."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((40, 11))
    y = np.sign(X @ rng.standard_normal(11) + 0.5 * rng.standard_normal(40))
    Xt = _t(np.concatenate([X, np.ones((40, 1))], axis=1))
    yt = _t(y)
    params = {"w1": _t(0.1 * rng.standard_normal(6)), "w2": _t(0.1 * rng.standard_normal(6))}

    def loss(p):
        """Mean logistic loss with a small ridge."""
        w = concat(p, ["w1", "w2"])
        return torch.nn.functional.softplus(-yt * (Xt @ w)).mean() + 5e-4 * (w[:11] ** 2).sum()

    return Task(
        params,
        loss,
        {"w1": ["w1"], "w2": ["w2"]},
        "logistic",
        {"family": "logistic", "seed": int(seed), "examples": 40, "features": 11},
        "gs",
    )


def _mlp(seed: int, widths, activation, name: str) -> Task:
    rng = np.random.default_rng(int(seed))
    params, layers = {}, []
    for i in range(len(widths) - 1):
        w, b = f"l{i + 1}.weight", f"l{i + 1}.bias"
        params[w] = _t(rng.standard_normal((widths[i + 1], widths[i])) / math.sqrt(widths[i]))
        params[b] = _t(0.1 * rng.standard_normal(widths[i + 1]))
        layers.append((w, b))
    X = _t(rng.standard_normal((16, widths[0])))
    Y = _t(rng.standard_normal((16, widths[-1])))

    def loss(p):
        """Mean squared error of the MLP on the fixed examples (halved)."""
        return 0.5 * ((mlp_forward(p, X, layers, activation) - Y) ** 2).sum() / 16

    blocks = {f"layer{i + 1}": [w, b] for i, (w, b) in enumerate(layers)}
    return Task(
        params,
        loss,
        blocks,
        name,
        {"family": name, "seed": int(seed), "widths": list(widths)},
        "gs",
    )


def tanh_net(seed: int = 0) -> Task:
    """A 4-6-6-2 tanh MLP on 16 Gaussian examples (MSE), one block per layer (weight and bias)."""
    return _mlp(seed, (4, 6, 6, 2), torch.tanh, "tanh_net")


def relu_net(seed: int = 0) -> Task:
    """A 4-8-2 ReLU MLP on 16 Gaussian examples (MSE), one block per layer: piecewise quadratic,
    with kinks."""
    return _mlp(seed, (4, 8, 2), torch.relu, "relu_net")


def attention(seed: int = 0) -> Task:
    """One attention head, ``softmax(X Wq (X Wk)^T / sqrt(3)) X Wv`` over ``T = 5`` tokens of width
    4, fitted to a random target by ``1/(2n) sum ||. - Y||_F^2`` over ``n = 6`` sequences; ``Wq, Wk,
    Wv`` (4x3) start ``N(0, 1/4)``; blocks ``Wq``, ``Wk``, ``Wv``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((6, 5, 4)))
    Y = _t(rng.standard_normal((6, 5, 3)))
    params = {n: _t(rng.standard_normal((4, 3)) / 2) for n in ("Wq", "Wk", "Wv")}

    def loss(p):
        """Squared error of the attention output."""
        s = (X @ p["Wq"]) @ (X @ p["Wk"]).transpose(1, 2) / math.sqrt(3.0)
        return 0.5 * ((torch.softmax(s, dim=-1) @ (X @ p["Wv"]) - Y) ** 2).sum() / 6

    return Task(
        params,
        loss,
        {n: [n] for n in params},
        "attention",
        {"family": "attention", "seed": int(seed), "tokens": 5, "width": 4},
        "gs",
    )


def ill_quadratic(seed: int = 0) -> Task:
    """``1/2 x^T A x - b^T x`` in 12 variables (three blocks of 4), ``A = Q diag(lambda) Q^T`` with
    ``Q`` a random rotation and ``lambda`` log-spaced from ``1e-3`` to ``1`` (condition number
    1000)."""
    rng = np.random.default_rng(int(seed))
    Q, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    A = _t(Q @ np.diag(np.logspace(-3, 0, 12)) @ Q.T)
    b = _t(rng.standard_normal(12))
    x0 = rng.standard_normal(12)
    names = ["x1", "x2", "x3"]
    params = {n: _t(x0[4 * i : 4 * i + 4]) for i, n in enumerate(names)}

    def loss(p):
        """The ill-conditioned quadratic of the three blocks concatenated."""
        x = concat(p, names)
        return 0.5 * x @ (A @ x) - b @ x

    return Task(
        params,
        loss,
        {n: [n] for n in names},
        "ill_quadratic",
        {"family": "ill_quadratic", "seed": int(seed), "condition": 1000.0},
        "gs",
    )


def quartic(seed: int = 0) -> Task:
    """The random quartic polynomial of
    :func:`crosscurv.experiments.problems.quartic.quartic_problem`, three
    blocks of 3 variables."""
    from crosscurv.experiments.problems.quartic import quartic_problem

    task = quartic_problem(int(seed), (3, 3, 3)).task
    task.name = "quartic"
    return task


class ZooProblem(NamedTuple):
    """One problem of the zoo: ``factory(seed)`` builds its task; ``iters`` the budget ``K``;
    ``half``: ``"tune"``, ``"held-out"``, ``"beyond"`` or ``"fresh"``; ``lr_factors``: rates ``c /
    lambda_max(H^0)``."""

    name: str
    factory: Callable
    iters: int
    half: str
    lr_factors: tuple = LR_FACTORS

    def task(self, seed: int = 0) -> Task:
        return self.factory(seed)

    @property
    def spec(self) -> str:
        """The command line's ``TASK``: ``crosscurv.experiments.problems.zoo:NAME``."""
        return f"crosscurv.experiments.problems.zoo:{self.factory.__name__}"


#: The zoo, tuning half first.
ZOO = (
    ZooProblem("deep_linear", deep_linear, 150, "tune"),
    ZooProblem("tanh_net", tanh_net, 150, "tune"),
    ZooProblem("logistic", logistic, 150, "tune"),
    ZooProblem("quartic", quartic, 150, "tune"),
    ZooProblem("matrix_factorisation", matrix_factorisation, 150, "held-out"),
    ZooProblem("relu_net", relu_net, 150, "held-out"),
    ZooProblem("attention", attention, 150, "held-out"),
    ZooProblem("ill_quadratic", ill_quadratic, 150, "held-out"),
)


def tanh_mlp4(seed: int = 0) -> Task:
    """The scaling study's tanh MLP
    (:func:`crosscurv.experiments.problems.networks.tanh_mlp_problem`), widths 3-5-5-2, its six
    tensors in four random blocks, 10 examples."""
    from crosscurv.experiments.problems.networks import tanh_mlp_problem

    return tanh_mlp_problem(int(seed), (3, 5, 5, 2), n_blocks=4, n_examples=10).task


def lora_bilinear(seed: int = 0) -> Task:
    """The LoRA-like bilinear model of
    :func:`crosscurv.experiments.problems.networks.bilinear_problem` (blocks ``B``, ``A``)."""
    from crosscurv.experiments.problems.networks import bilinear_problem

    return bilinear_problem(int(seed)).task


#: Problems beyond the zoo (``half = "beyond"``): measured with the chosen factor, in neither half
#: (:mod:`crosscurv.experiments.problems.beyond` for all but the first two).
BEYOND = tuple(
    ZooProblem(f.__name__, f, 100, "beyond", (0.3, 1.0, 1.7))
    for f in (tanh_mlp4, lora_bilinear, cp_tensor, softmax_regression, sigmoid_autoencoder,
              rosenbrock, huber_regression, gelu_net, poisson_regression, layernorm_net,
              residual_net, conv_net, phase_retrieval, heteroscedastic, deep_tanh6, sine_net,
              probit_regression, squared_hinge, gaussian_mixture)
)


def _fresh() -> tuple:
    from crosscurv.experiments.problems import (fresh, fresh_blocks, fresh_float32, fresh_fits,
                                                fresh_likelihoods, fresh_models, fresh_pairings,
                                                fresh_rates, fresh_recurrences, fresh_scale,
                                                fresh_sharpening, fresh_starts, fresh_structures)

    return tuple(ZooProblem(n, getattr(m, n), 100, "fresh", getattr(m, "LR_FACTORS",
                                                                    (0.3, 1.0, 1.7)))
                 for m in (fresh, fresh_fits, fresh_models, fresh_float32, fresh_starts,
                           fresh_structures, fresh_likelihoods, fresh_recurrences,
                           fresh_sharpening, fresh_pairings, fresh_blocks, fresh_scale,
                           fresh_rates)
                 for n in m.__all__)


#: Fresh problems (``half = "fresh"``): kinds added after the code's safety factor was chosen, only
#: to test it (:mod:`crosscurv.experiments.problems.fresh`,
#: :mod:`crosscurv.experiments.problems.fresh_fits`,
#: :mod:`crosscurv.experiments.problems.fresh_models`,
#: :mod:`crosscurv.experiments.problems.fresh_float32`: in float32, the others in float64;
#: :mod:`crosscurv.experiments.problems.fresh_starts`: starts where a block's gradient vanishes,
#: half in float32; :mod:`crosscurv.experiments.problems.fresh_structures`,
#: :mod:`crosscurv.experiments.problems.fresh_likelihoods` and
#: :mod:`crosscurv.experiments.problems.fresh_recurrences`: kinds no earlier round has;
#: :mod:`crosscurv.experiments.problems.fresh_sharpening`: losses whose curvature grows;
#: :mod:`crosscurv.experiments.problems.fresh_pairings`: models of pairs;
#: :mod:`crosscurv.experiments.problems.fresh_blocks`: three or four blocks each;
#: :mod:`crosscurv.experiments.problems.fresh_scale`: 800 to 3,600 parameters each;
#: :mod:`crosscurv.experiments.problems.fresh_rates`: at rates no other round used, its own
#: ``LR_FACTORS``; the others at 0.3, 1.0 and 1.7 over ``lambda_max(H^0)``).
FRESH = _fresh()


def zoo_problem(name: str) -> ZooProblem:
    """The zoo entry called ``name`` (``KeyError`` naming the zoo's problems otherwise)."""
    for p in ZOO + BEYOND + FRESH:
        if p.name == name:
            return p
    raise KeyError(f"no zoo problem {name!r}; the zoo: {', '.join(p.name for p in ZOO)}")


def lambda_max0(task: Task, seed: int = 0) -> float:
    """``lambda_max`` of the Hessian at ``theta^0``
    (:func:`crosscurv.numeric.estimates.solve_extremes`)."""
    from crosscurv.numeric.estimates import solve_extremes
    from crosscurv.numeric.hvp import hvp

    p = {k: v.detach() for k, v in task.params.items()}
    return float(solve_extremes(lambda v: hvp(task.loss, p, v), p, seed=seed).lam_max)
