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
* ``gelu_net``: a 3-5-5-2 GELU network without biases, one block per layer;
* ``poisson_regression``: Poisson regression (log link) on 40 examples of 6 features, blocks
  ``w1``, ``w2`` (3 weights each) and the bias ``b`` (curvature growing exponentially);
* ``layernorm_net``: a 4-6-6-1 tanh network with layer normalisation before each activation,
  one block per layer (scale invariance: flat directions);
* ``residual_net``: three residual tanh blocks of width 4, ``h <- h + tanh(h R_i^T)``, one block
  each;
* ``conv_net``: a 1-D convolution (3 filters of 5 taps, softplus) and a linear head, blocks ``K``
  and ``V`` (shared weights);
* ``phase_retrieval``: ``1/4 mean(((a_i . x)^2 - y_i)^2)`` in 9 unknowns, three blocks of 3 (a
  quartic with a sign symmetry);
* ``heteroscedastic``: the Gaussian likelihood of a linear model with a learned log-variance,
  blocks ``w`` (4) and ``s`` (1), coupled through ``exp(-s)``;
* ``deep_tanh6``: a 3-4-4-4-4-2 tanh network without biases, five blocks (one per layer);
* ``sine_net``: a 2-6-6-1 network with ``sin(3 z)`` activations, one block per layer (large
  derivatives of every order);
* ``probit_regression``: probit regression on 40 examples of 6 features, blocks ``w1``, ``w2``;
* ``squared_hinge``: a squared-hinge linear classifier with a ridge, three blocks of 2 weights
  (a Hessian that jumps where a margin crosses 1);
* ``gaussian_mixture``: the likelihood of a two-component 1-D Gaussian mixture, blocks ``mu``
  (means) and ``s`` (log-scales).

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.problem import DTYPE
from crosscurv.numeric.task import Task

__all__ = ["cp_tensor", "softmax_regression", "sigmoid_autoencoder", "rosenbrock",
           "huber_regression", "gelu_net", "poisson_regression", "layernorm_net", "residual_net",
           "conv_net", "phase_retrieval", "heteroscedastic", "deep_tanh6", "sine_net",
           "probit_regression", "squared_hinge", "gaussian_mixture"]


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


def two_hidden_net(seed: int, activation, targets, name: str) -> Task:
    """``1/2 mean((a(a(X W1^T) W2^T) W3^T - Y)^2)`` for an elementwise activation ``a``, widths
    3-5-5-2 without biases, 16 examples ``N(0, I)`` with targets ``targets(N(0, I))`` (a numpy
    function); weights start ``N(0, 1/fan_in)``; blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((16, 3)))
    Y = _t(targets(rng.standard_normal((16, 2))))
    params = {"W1": _t(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "W2": _t(rng.standard_normal((5, 5)) / np.sqrt(5)),
              "W3": _t(rng.standard_normal((2, 5)) / np.sqrt(5))}

    def loss(p):
        """Squared error of the network (halved)."""
        h = activation(activation(X @ p["W1"].T) @ p["W2"].T)
        return 0.5 * ((h @ p["W3"].T - Y) ** 2).mean()

    return _task(params, loss, name, seed)


def gelu_net(seed: int = 0) -> Task:
    """:func:`two_hidden_net` with GELU activations and targets ``sin(N(0, I))``."""
    return two_hidden_net(seed, torch.nn.functional.gelu, np.sin, "gelu_net")


def poisson_regression(seed: int = 0) -> Task:
    """Mean Poisson negative log-likelihood ``exp(z) - y z`` (``z = X w + b``) on 40 examples of 6
    features ``N(0, 1/4)``, counts drawn at a random ``w*``; ``w`` and ``b`` start at 0; blocks
    ``w1``, ``w2`` (3 weights each) and ``b``."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((40, 6)) / 2
    y = _t(rng.poisson(np.exp(X @ (rng.standard_normal(6) / 2))))
    X = _t(X)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3)), "b": _t(np.zeros(1))}

    def loss(p):
        """Poisson regression's loss (constant terms dropped)."""
        z = X @ torch.cat([p["w1"], p["w2"]]) + p["b"]
        return (torch.exp(z) - y * z).mean()

    return _task(params, loss, "poisson_regression", seed)


def layernorm_net(seed: int = 0) -> Task:
    """``1/2 mean((tanh(ln(tanh(ln(X W1^T)) W2^T)) W3^T - Y)^2)``, ``ln`` layer normalisation
    without parameters, widths 4-6-6-1, 16 examples ``N(0, I)`` with targets ``tanh(N(0, 1))``;
    blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((16, 4)))
    Y = _t(np.tanh(rng.standard_normal((16, 1))))
    params = {"W1": _t(rng.standard_normal((6, 4)) / 2),
              "W2": _t(rng.standard_normal((6, 6)) / np.sqrt(6)),
              "W3": _t(rng.standard_normal((1, 6)) / np.sqrt(6))}

    def ln(h):
        return torch.nn.functional.layer_norm(h, h.shape[-1:])

    def loss(p):
        """Squared error of the normalised network (halved)."""
        h = torch.tanh(ln(torch.tanh(ln(X @ p["W1"].T)) @ p["W2"].T))
        return 0.5 * ((h @ p["W3"].T - Y) ** 2).mean()

    return _task(params, loss, "layernorm_net", seed)


def residual_net(seed: int = 0) -> Task:
    """``1/2 mean((h_3 - Y)^2)``, ``h_0 = X``, ``h_i = h_{i-1} + tanh(h_{i-1} R_i^T)`` (width 4, 12
    examples ``N(0, I)``, targets ``sin(N(0, I))``); ``R_i`` start ``N(0, 1/4)``; blocks ``R1``,
    ``R2``, ``R3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((12, 4)))
    Y = _t(np.sin(rng.standard_normal((12, 4))))
    params = {f"R{i}": _t(rng.standard_normal((4, 4)) / 2) for i in (1, 2, 3)}

    def loss(p):
        """Squared error of the residual stack (halved)."""
        h = X
        for i in (1, 2, 3):
            h = h + torch.tanh(h @ p[f"R{i}"].T)
        return 0.5 * ((h - Y) ** 2).mean()

    return _task(params, loss, "residual_net", seed)


def conv_net(seed: int = 0) -> Task:
    """``1/2 mean((flat(softplus(conv1d(X, K))) V^T - Y)^2)`` on 10 signals of length 12 ``N(0,
    I)`` with targets ``N(0, 1)``: 3 filters of 5 taps (``K`` ``(3, 1, 5)``, ``N(0, 1/5)``) and a
    linear head (``V`` ``(1, 24)``, ``N(0, 1/24)``); blocks ``K`` and ``V``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((10, 1, 12)))
    Y = _t(rng.standard_normal((10, 1)))
    params = {"K": _t(rng.standard_normal((3, 1, 5)) / np.sqrt(5)),
              "V": _t(rng.standard_normal((1, 24)) / np.sqrt(24))}

    def loss(p):
        """Squared error of the convolutional network (halved)."""
        h = torch.nn.functional.softplus(torch.nn.functional.conv1d(X, p["K"]))
        return 0.5 * ((h.reshape(X.shape[0], -1) @ p["V"].T - Y) ** 2).mean()

    return _task(params, loss, "conv_net", seed)


def phase_retrieval(seed: int = 0) -> Task:
    """``1/4 mean(((a_i . x)^2 - (a_i . x*)^2)^2)`` for 30 measurements ``a_i ~ N(0, I)`` of ``x*
    ~ N(0, I/9)`` in 9 unknowns, started at ``x* + N(0, 0.3^2 I)``; blocks ``x1``, ``x2``, ``x3``
    (3 unknowns each)."""
    rng = np.random.default_rng(int(seed))
    A = _t(rng.standard_normal((30, 9)))
    x_star = rng.standard_normal(9) / 3
    y = (A @ _t(x_star)) ** 2
    x0 = x_star + 0.3 * rng.standard_normal(9)
    params = {"x1": _t(x0[:3]), "x2": _t(x0[3:6]), "x3": _t(x0[6:])}

    def loss(p):
        """Squared intensity error (quartered)."""
        x = torch.cat([p["x1"], p["x2"], p["x3"]])
        return 0.25 * (((A @ x) ** 2 - y) ** 2).mean()

    return _task(params, loss, "phase_retrieval", seed)


def heteroscedastic(seed: int = 0) -> Task:
    """Mean Gaussian negative log-likelihood ``1/2 exp(-s) (y - X w)^2 + s / 2`` on 30 examples of 4
    features ``N(0, I)``, noise of standard deviation 2; ``w`` and the log-variance ``s`` start at
    0; blocks ``w`` and ``s``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((30, 4)))
    y = X @ _t(rng.standard_normal(4)) + _t(2 * rng.standard_normal(30))
    params = {"w": _t(np.zeros(4)), "s": _t(np.zeros(1))}

    def loss(p):
        """Likelihood with a learned variance (constant terms dropped)."""
        return (0.5 * torch.exp(-p["s"]) * (y - X @ p["w"]) ** 2 + 0.5 * p["s"]).mean()

    return _task(params, loss, "heteroscedastic", seed)


def deep_tanh6(seed: int = 0) -> Task:
    """``1/2 mean((tanh(...tanh(X W1^T)... W4^T) W5^T - Y)^2)``, widths 3-4-4-4-4-2 without
    biases, 12 examples ``N(0, I)`` with targets ``sin(N(0, I))``; ``W_i`` start ``N(0,
    1/fan_in)``; blocks ``W1`` .. ``W5``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((12, 3)))
    Y = _t(np.sin(rng.standard_normal((12, 2))))
    dims = (3, 4, 4, 4, 4, 2)
    params = {f"W{i + 1}": _t(rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]))
              for i in range(5)}

    def loss(p):
        """Squared error of the deep network (halved)."""
        h = X
        for i in range(1, 5):
            h = torch.tanh(h @ p[f"W{i}"].T)
        return 0.5 * ((h @ p["W5"].T - Y) ** 2).mean()

    return _task(params, loss, "deep_tanh6", seed)


def sine_net(seed: int = 0) -> Task:
    """``1/2 mean((sin(3 sin(3 X W1^T) W2^T) W3^T - Y)^2)``, widths 2-6-6-1 without biases, 20
    examples ``N(0, I)`` with targets ``tanh(N(0, 1))``; ``W_i`` start ``N(0, 1/(9 fan_in))``;
    blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((20, 2)))
    Y = _t(np.tanh(rng.standard_normal((20, 1))))
    dims = (2, 6, 6, 1)
    params = {f"W{i + 1}": _t(rng.standard_normal((dims[i + 1], dims[i])) / (3 * np.sqrt(dims[i])))
              for i in range(3)}

    def loss(p):
        """Squared error of the sine network (halved)."""
        h = torch.sin(3 * torch.sin(3 * X @ p["W1"].T) @ p["W2"].T)
        return 0.5 * ((h @ p["W3"].T - Y) ** 2).mean()

    return _task(params, loss, "sine_net", seed)


def probit_regression(seed: int = 0) -> Task:
    """Mean negative log-likelihood of ``y ~ Bernoulli(Phi(X w))`` on 40 examples of 6 features
    ``N(0, I)``, labels drawn at a random ``w*``; ``w`` starts at 0; blocks ``w1``, ``w2`` (3
    weights each)."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((40, 6))
    y = _t((X @ rng.standard_normal(6) + rng.standard_normal(40) > 0).astype(float))
    X = _t(X)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3))}

    def loss(p):
        """Probit likelihood (``log Phi`` by ``log_ndtr``, accurate in the tails)."""
        z = X @ torch.cat([p["w1"], p["w2"]])
        return -(y * torch.special.log_ndtr(z) + (1 - y) * torch.special.log_ndtr(-z)).mean()

    return _task(params, loss, "probit_regression", seed)


def squared_hinge(seed: int = 0) -> Task:
    """``mean(max(0, 1 - y_i x_i . w)^2) + 1e-2 ||w||^2`` on 30 examples of 6 features ``N(0, I)``
    with labels ``sign`` of a random direction plus noise; ``w`` starts ``N(0, 0.1^2)``; blocks
    ``w1``, ``w2``, ``w3`` (2 weights each)."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((30, 6))
    y = _t(np.sign(X @ rng.standard_normal(6) + 0.5 * rng.standard_normal(30)))
    X = _t(X)
    params = {f"w{i}": _t(0.1 * rng.standard_normal(2)) for i in (1, 2, 3)}

    def loss(p):
        """Squared hinge with a ridge."""
        w = torch.cat([p["w1"], p["w2"], p["w3"]])
        return (torch.clamp(1 - y * (X @ w), min=0) ** 2).mean() + 1e-2 * (w ** 2).sum()

    return _task(params, loss, "squared_hinge", seed)


def gaussian_mixture(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 60 points from two 1-D Gaussians (means -1 and 1.5, scales
    0.5 and 0.8) under an equal-weight mixture with means ``mu`` (start ``N(0, 0.5^2)``) and
    log-scales ``s`` (start 0); blocks ``mu`` and ``s``."""
    rng = np.random.default_rng(int(seed))
    x = _t(np.concatenate([-1 + 0.5 * rng.standard_normal(30),
                           1.5 + 0.8 * rng.standard_normal(30)]))
    params = {"mu": _t(0.5 * rng.standard_normal(2)), "s": _t(np.zeros(2))}

    def loss(p):
        """Mixture likelihood (constant terms dropped)."""
        z = (x[:, None] - p["mu"]) * torch.exp(-p["s"])
        return -torch.logsumexp(-0.5 * z ** 2 - p["s"], dim=1).mean()

    return _task(params, loss, "gaussian_mixture", seed)
