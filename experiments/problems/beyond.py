"""Problems beyond the zoo: kinds the certificate's safety factor was never chosen on, measured with
it (:data:`crosscurv.experiments.problems.zoo.BEYOND`).

* ``cp_tensor``: a rank-2 CP decomposition of a 6x5x4 tensor, blocks ``A``, ``B``, ``C``
  (trilinear coupling);
* ``softmax_regression``: three-class softmax regression on 30 examples of 5 features, blocks
  ``W`` and ``b`` (a convex GLM whose bias has a flat direction);
* ``sigmoid_autoencoder``: a 6-3-6 sigmoid autoencoder, blocks encoder and decoder;
* ``rosenbrock``: the Rosenbrock function in 6 variables, three blocks of 2 (a curved valley);
* ``huber_regression``: Huber-loss linear regression with heavy-tailed noise, two blocks of 4
  (piecewise, with a continuous second derivative almost everywhere);
* ``gelu_net``: a 3-5-5-2 GELU network without biases, one block per layer.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.problem import DTYPE
from crosscurv.numeric.task import Task

__all__ = ["cp_tensor", "softmax_regression", "sigmoid_autoencoder", "rosenbrock",
           "huber_regression", "gelu_net"]


def _t(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a), dtype=DTYPE)


def _task(params: dict, loss, name: str, seed: int, blocks: dict | None = None) -> Task:
    return Task(params, loss, blocks or {n: [n] for n in params}, name,
                {"family": name, "seed": int(seed)}, "gs")


def cp_tensor(seed: int = 0) -> Task:
    """``1/2 mean((sum_r A_ir B_jr C_kr - T_ijk)^2)`` for a rank-2 target ``T`` (6x5x4); factors
    start ``N(0, 1/4)``; blocks ``A`` (6x2), ``B`` (5x2), ``C`` (4x2)."""
    rng = np.random.default_rng(int(seed))
    A, B, C = (rng.standard_normal((m, 2)) for m in (6, 5, 4))
    T = _t(np.einsum("ir,jr,kr->ijk", A, B, C))
    params = {n: _t(0.5 * rng.standard_normal((m, 2))) for n, m in (("A", 6), ("B", 5), ("C", 4))}

    def loss(p):
        """Mean squared error of the CP reconstruction (halved)."""
        return 0.5 * ((torch.einsum("ir,jr,kr->ijk", p["A"], p["B"], p["C"]) - T) ** 2).mean()

    return _task(params, loss, "cp_tensor", seed)


def softmax_regression(seed: int = 0) -> Task:
    """Mean cross-entropy of ``softmax(X W^T + b)`` on 30 examples of 5 features ``N(0, I)`` with
    labels uniform in 3 classes, plus ``1e-3 ||W||^2``; ``W`` starts ``N(0, 0.1^2)``, ``b`` at 0;
    blocks ``W`` (3x5) and ``b`` (3)."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((30, 5)))
    y = torch.tensor(rng.integers(0, 3, 30))
    params = {"W": _t(0.1 * rng.standard_normal((3, 5))), "b": _t(np.zeros(3))}

    def loss(p):
        """Cross-entropy with a small ridge on the weights."""
        return (torch.nn.functional.cross_entropy(X @ p["W"].T + p["b"], y)
                + 1e-3 * (p["W"] ** 2).sum())

    return _task(params, loss, "softmax_regression", seed)


def sigmoid_autoencoder(seed: int = 0) -> Task:
    """``1/2 mean((sigmoid(X E^T) D^T - X)^2)`` on 20 examples of 6 features ``N(0, I)``; blocks
    ``E`` (3x6, encoder) and ``D`` (6x3, decoder), started ``N(0, 1/fan_in)``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((20, 6)))
    params = {"E": _t(rng.standard_normal((3, 6)) / np.sqrt(6)),
              "D": _t(rng.standard_normal((6, 3)) / np.sqrt(3))}

    def loss(p):
        """Reconstruction error (halved)."""
        return 0.5 * ((torch.sigmoid(X @ p["E"].T) @ p["D"].T - X) ** 2).mean()

    return _task(params, loss, "sigmoid_autoencoder", seed)


def rosenbrock(seed: int = 0) -> Task:
    """``1/10 sum_i (10 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2)`` in 6 variables from ``-1 + N(0,
    0.3^2)``; blocks ``x1``, ``x2``, ``x3`` (2 variables each)."""
    rng = np.random.default_rng(int(seed))
    names = ["x1", "x2", "x3"]
    params = {n: _t(-1.0 + 0.3 * rng.standard_normal(2)) for n in names}

    def loss(p):
        """The Rosenbrock valley along the concatenated variables."""
        x = torch.cat([p[n] for n in names])
        return (10 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum() / 10

    return _task(params, loss, "rosenbrock", seed)


def huber_regression(seed: int = 0) -> Task:
    """Mean Huber loss (``delta = 1``) of ``X w - y`` on 40 examples of 8 features ``N(0, I)``,
    ``y = X w* + t_2`` noise; ``w`` starts at 0; blocks ``w1``, ``w2`` (4 weights each)."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((40, 8)))
    y = X @ _t(rng.standard_normal(8)) + _t(rng.standard_t(2, 40))
    params = {"w1": _t(np.zeros(4)), "w2": _t(np.zeros(4))}

    def loss(p):
        """Robust regression loss."""
        return torch.nn.functional.huber_loss(X @ torch.cat([p["w1"], p["w2"]]), y, delta=1.0)

    return _task(params, loss, "huber_regression", seed)


def gelu_net(seed: int = 0) -> Task:
    """``1/2 mean((gelu(gelu(X W1^T) W2^T) W3^T - Y)^2)``, widths 3-5-5-2 without biases, 16
    examples ``N(0, I)`` with targets ``sin(N(0, I))``; blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((16, 3)))
    Y = _t(np.sin(rng.standard_normal((16, 2))))
    params = {"W1": _t(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "W2": _t(rng.standard_normal((5, 5)) / np.sqrt(5)),
              "W3": _t(rng.standard_normal((2, 5)) / np.sqrt(5))}
    gelu = torch.nn.functional.gelu

    def loss(p):
        """Squared error of the network (halved)."""
        return 0.5 * ((gelu(gelu(X @ p["W1"].T) @ p["W2"].T) @ p["W3"].T - Y) ** 2).mean()

    return _task(params, loss, "gelu_net", seed)
