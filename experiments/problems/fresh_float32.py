"""Fresh problems of a seventh round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those
of :mod:`crosscurv.experiments.problems.fresh_models`): models in float32, the default dtype of the
models users bring (every earlier zoo problem is float64), defined before any of their runs and
never consulted in any choice.

* ``softmax_mlp32``: a tanh network with a softmax read-out over 4 classes, blocks per layer;
* ``conv2d_net32``: a 3x3 convolution of 6x6 images, ReLU-free (softplus), and a linear read-out;
* ``bigram_lm32``: a next-token model over 8 tokens, token embeddings and output embeddings;
* ``lora_adapter32``: a rank-2 adapter ``B A`` on a frozen random layer, ``B`` starting at 0;
* ``logcosh_regression32``: robust regression with the log-cosh loss, two blocks of 3 weights;
* ``hypernetwork32``: a linear layer whose weights a small network generates from a code;
* ``gaussian_process32``: a GP's negative log marginal likelihood, blocks the log length scales
  and the log signal and noise scales.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only; float32.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _task
from crosscurv.numeric.task import Task

__all__ = ["softmax_mlp32", "conv2d_net32", "bigram_lm32", "lora_adapter32",
           "logcosh_regression32", "hypernetwork32", "gaussian_process32"]

DTYPE = torch.float32


def _t(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a), dtype=DTYPE)


def softmax_mlp32(seed: int = 0) -> Task:
    """Mean cross-entropy of ``softmax(tanh(tanh(X W1^T) W2^T) W3^T)`` over 4 classes on 40
    examples of 5 features ``N(0, I)``, labels from a random linear map; ``W1`` (6x5), ``W2``
    (6x6), ``W3`` (4x6) start ``N(0, 1/fan_in)``; blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 5))
    y = torch.tensor((Xn @ rng.standard_normal((5, 4))).argmax(1))
    X = _t(Xn)
    params = {n: _t(rng.standard_normal((o, i)) / np.sqrt(i))
              for n, o, i in (("W1", 6, 5), ("W2", 6, 6), ("W3", 4, 6))}

    def loss(p):
        """Mean cross-entropy of the network's logits."""
        h = torch.tanh(torch.tanh(X @ p["W1"].T) @ p["W2"].T)
        return torch.nn.functional.cross_entropy(h @ p["W3"].T, y)

    return _task(params, loss, "softmax_mlp32", seed)


def conv2d_net32(seed: int = 0) -> Task:
    """``1/2 mean((v . softplus(conv3x3(x; K)).flatten - y)^2)``: two 3x3 filters over 12 images
    6x6 ``N(0, 1)`` (no padding), a linear read-out of the 2x4x4 maps; targets ``tanh`` of the
    images' mean over the centre; ``K`` (2x1x3x3) starts ``N(0, 1/9)``, ``v`` (32) ``N(0,
    1/32)``; blocks ``K`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((12, 1, 6, 6))
    y = _t(np.tanh(Xn[:, 0, 2:4, 2:4].mean((1, 2)) * 2))
    X = _t(Xn)
    params = {"K": _t(rng.standard_normal((2, 1, 3, 3)) / 3),
              "v": _t(rng.standard_normal(32) / np.sqrt(32))}

    def loss(p):
        """Squared error of the read-out (halved)."""
        h = torch.nn.functional.softplus(torch.nn.functional.conv2d(X, p["K"]))
        return 0.5 * ((h.flatten(1) @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "conv2d_net32", seed)


def bigram_lm32(seed: int = 0) -> Task:
    """Mean cross-entropy of the next token ``softmax(E[x] O^T)`` over 60 token pairs from a random
    Markov chain on 8 tokens (rows ``Dirichlet(1/2)``), embeddings of dimension 3, plus ``0.01
    (|E|^2 + |O|^2)``; ``E``, ``O`` (8x3) start ``N(0, 1/3)``; blocks ``E`` and ``O``."""
    rng = np.random.default_rng(int(seed))
    P = rng.dirichlet(np.full(8, 0.5), 8)
    x = rng.integers(0, 8, 60)
    nxt = torch.tensor([rng.choice(8, p=P[t]) for t in x])
    x = torch.tensor(x)
    params = {"E": _t(rng.standard_normal((8, 3)) / np.sqrt(3)),
              "O": _t(rng.standard_normal((8, 3)) / np.sqrt(3))}

    def loss(p):
        """Next-token cross-entropy with a small ridge."""
        logits = p["E"][x] @ p["O"].T
        ridge = 0.01 * ((p["E"] ** 2).sum() + (p["O"] ** 2).sum())
        return torch.nn.functional.cross_entropy(logits, nxt) + ridge

    return _task(params, loss, "bigram_lm32", seed)


def lora_adapter32(seed: int = 0) -> Task:
    """``1/2 mean(|X (W0 + B A)^T - Y|^2)``: a rank-2 adapter on a frozen 5x6 layer ``W0`` ``N(0,
    1/6)``, 30 examples ``N(0, I)``, targets from ``W0`` plus a random rank-2 change; ``A`` (2x6)
    starts ``N(0, 1/6)`` and ``B`` (5x2) at 0, as LoRA starts; blocks ``A`` and ``B``."""
    rng = np.random.default_rng(int(seed))
    W0 = rng.standard_normal((5, 6)) / np.sqrt(6)
    Xn = rng.standard_normal((30, 6))
    Y = _t(Xn @ (W0 + rng.standard_normal((5, 2)) @ rng.standard_normal((2, 6)) / 2).T)
    X, W = _t(Xn), _t(W0)
    params = {"A": _t(rng.standard_normal((2, 6)) / np.sqrt(6)), "B": _t(np.zeros((5, 2)))}

    def loss(p):
        """Squared error of the adapted layer (halved)."""
        return 0.5 * ((X @ (W + p["B"] @ p["A"]).T - Y) ** 2).sum(1).mean()

    return _task(params, loss, "lora_adapter32", seed)


def logcosh_regression32(seed: int = 0) -> Task:
    """``mean(log cosh(y - X w))`` on 40 examples of 6 features ``N(0, I)`` with Student-t noise
    (3 degrees of freedom); ``w`` starts at 0; blocks ``w1``, ``w2`` (3 weights each)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 6))
    y = _t(Xn @ rng.standard_normal(6) + rng.standard_t(3, 40))
    X = _t(Xn)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3))}

    def loss(p):
        """Mean log-cosh of the residuals (a stable form)."""
        r = y - X @ torch.cat([p["w1"], p["w2"]])
        return (r.abs() + torch.nn.functional.softplus(-2 * r.abs()) - np.log(2)).mean()

    return _task(params, loss, "logcosh_regression32", seed)


def hypernetwork32(seed: int = 0) -> Task:
    """A hypernetwork: ``W = reshape(G2 tanh(G1 z))`` generates a 3x4 layer from a code ``z`` (3),
    and ``1/2 mean((tanh(X W^T) . u - y)^2)`` on 20 examples of 4 features ``N(0, I)``; ``G1``
    (5x3) starts ``N(0, 1/3)``, ``G2`` (12x5) ``N(0, 1/5)``, ``z`` ``N(0, 1)``, ``u`` (3) fixed
    ``N(0, 1/3)``; blocks ``z``, ``G1`` and ``G2``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 4))
    y = _t(np.tanh(Xn @ rng.standard_normal(4)))
    X, u = _t(Xn), _t(rng.standard_normal(3) / np.sqrt(3))
    params = {"z": _t(rng.standard_normal(3)), "G1": _t(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "G2": _t(rng.standard_normal((12, 5)) / np.sqrt(5))}

    def loss(p):
        """Squared error of the generated layer's read-out (halved)."""
        W = (p["G2"] @ torch.tanh(p["G1"] @ p["z"])).reshape(3, 4)
        return 0.5 * ((torch.tanh(X @ W.T) @ u - y) ** 2).mean()

    return _task(params, loss, "hypernetwork32", seed, {"z": ["z"], "G1": ["G1"], "G2": ["G2"]})


def gaussian_process32(seed: int = 0) -> Task:
    """A Gaussian process's negative log marginal likelihood on 15 points of 2 features ``U(-2,
    2)`` (targets a smooth function plus noise 0.1), an ARD squared-exponential kernel, divided by
    15; the log length scales ``ell`` (2) start at 0, the log signal and noise scales ``(s, n)`` at
    0 and -1; blocks ``ell`` and ``scales`` (``s``, ``n``)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.uniform(-2, 2, (15, 2))
    y = _t(np.sin(Xn[:, 0]) * np.cos(Xn[:, 1]) + 0.1 * rng.standard_normal(15))
    X = _t(Xn)
    params = {"ell": _t(np.zeros(2)), "s": _t([0.0]), "n": _t([-1.0])}
    eye = torch.eye(15, dtype=DTYPE)

    def loss(p):
        """``1/2 (y^T K^-1 y + log det K) / 15`` by a Cholesky factor."""
        d = (X[:, None, :] - X[None, :, :]) / torch.exp(p["ell"])
        K = torch.exp(2 * p["s"]) * torch.exp(-0.5 * (d**2).sum(-1)) + torch.exp(2 * p["n"]) * eye
        L = torch.linalg.cholesky(K)
        a = torch.cholesky_solve(y[:, None], L)
        return 0.5 * ((y[:, None] * a).sum() + 2 * torch.log(torch.diagonal(L)).sum()) / 15

    return _task(params, loss, "gaussian_process32", seed, {"ell": ["ell"], "scales": ["s", "n"]})
