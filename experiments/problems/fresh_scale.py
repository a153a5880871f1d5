"""Fresh problems of a fifteenth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after
those of :mod:`crosscurv.experiments.problems.fresh_blocks`): models ten to a hundred times the size
of the earlier rounds' (about 800 to 3,600 parameters against tens to hundreds), so that the
error the certificate bounds lives in many more directions; defined before any of their runs and
never consulted in any choice, to test the rule unchanged since round 12. Three are float32 (names
ending in 32).

* ``wide_tanh_regression``: a two-hidden-layer tanh network of 32 units on 16 features, one block
  per layer;
* ``wide_classifier32``: a 64-48-10 tanh classifier of synthetic digits-like data (float32);
* ``large_matrix_completion``: a 60x50 rank-4 matrix from a third of its entries at rank 8;
* ``attention_layer32``: a self-attention layer and a feed-forward layer on 8 tokens of width 16,
  blocks attention, feed-forward in and out (float32);
* ``wide_logistic``: ridge logistic regression on 1,600 features, the weights in two halves;
* ``wide_deep_linear``: a three-factor linear network of 24x24 factors;
* ``wide_elman32``: an Elman network of 24 units over 10 steps (float32);
* ``wide_poisson_glm``: a Poisson regression on 800 features, the weights in two halves.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["wide_tanh_regression", "wide_classifier32", "large_matrix_completion",
           "attention_layer32", "wide_logistic", "wide_deep_linear", "wide_elman32",
           "wide_poisson_glm"]


def wide_tanh_regression(seed: int = 0) -> Task:
    """Half the mean squared error of ``tanh(tanh(X W1^T) W2^T) W3^T`` on 100 examples of 16
    features ``N(0, I)``, targets (2) from a random network of the same shape plus ``N(0, 0.1^2)``;
    ``W1`` (32x16), ``W2`` (32x32), ``W3`` (2x32) ``N(0, 1/fan_in)``; blocks ``W1``, ``W2``, ``W3``
    (1,600 parameters)."""
    rng = np.random.default_rng(int(seed))
    shapes = (("W1", (32, 16)), ("W2", (32, 32)), ("W3", (2, 32)))
    X = rng.standard_normal((100, 16))
    teacher = [rng.standard_normal(s) / np.sqrt(s[1]) for _, s in shapes]
    Y = np.tanh(np.tanh(X @ teacher[0].T) @ teacher[1].T) @ teacher[2].T
    Xt, Yt = _t64(X), _t64(Y + 0.1 * rng.standard_normal(Y.shape))
    params = {n: _t64(rng.standard_normal(s) / np.sqrt(s[1])) for n, s in shapes}

    def loss(p):
        """Mean squared error (halved)."""
        out = torch.tanh(torch.tanh(Xt @ p["W1"].T) @ p["W2"].T) @ p["W3"].T
        return 0.5 * ((out - Yt) ** 2).sum(1).mean()

    return _task(params, loss, "wide_tanh_regression", seed)


def wide_classifier32(seed: int = 0) -> Task:
    """Mean cross-entropy of ``softmax(tanh(X W1^T) W2^T)`` on 120 examples of 64 features: 10
    class prototypes ``N(0, I)`` plus ``N(0, 0.8^2)`` noise; ``W1`` (48x64) and ``W2`` (10x48)
    ``N(0, 1/fan_in)``; blocks ``W1``, ``W2`` (3,552 parameters, float32)."""
    rng = np.random.default_rng(int(seed))
    proto = rng.standard_normal((10, 64))
    labels = rng.integers(0, 10, 120)
    X = _t32(proto[labels] + 0.8 * rng.standard_normal((120, 64)))
    Y = torch.tensor(labels)
    params = {"W1": _t32(rng.standard_normal((48, 64)) / 8.0),
              "W2": _t32(rng.standard_normal((10, 48)) / np.sqrt(48))}

    def loss(p):
        """Mean cross-entropy."""
        return torch.nn.functional.cross_entropy(torch.tanh(X @ p["W1"].T) @ p["W2"].T, Y)

    return _task(params, loss, "wide_classifier32", seed)


def large_matrix_completion(seed: int = 0) -> Task:
    """Half the mean squared error on a third of the entries of a 60x50 rank-4 matrix (factors
    ``N(0, 1/2)``) by ``U V^T`` at rank 8, plus ``1e-3 / 2 (|U|^2 + |V|^2)``; ``U``, ``V`` start
    ``N(0, 0.3^2)``; blocks ``U`` (60x8), ``V`` (50x8) (880 parameters)."""
    rng = np.random.default_rng(int(seed))
    M = (rng.standard_normal((60, 4)) @ rng.standard_normal((50, 4)).T) / 2
    mask = _t64((rng.random((60, 50)) < 1 / 3).astype(float))
    Mt = _t64(M)
    params = {"U": _t64(0.3 * rng.standard_normal((60, 8))),
              "V": _t64(0.3 * rng.standard_normal((50, 8)))}

    def loss(p):
        """Masked reconstruction error plus a small ridge."""
        r = (p["U"] @ p["V"].T - Mt) * mask
        reg = 5e-4 * ((p["U"] ** 2).sum() + (p["V"] ** 2).sum())
        return 0.5 * (r ** 2).sum() / mask.sum() + reg

    return _task(params, loss, "large_matrix_completion", seed)


def attention_layer32(seed: int = 0) -> Task:
    """Half the mean squared error of one residual self-attention layer and one residual
    feed-forward layer (16 to 32 to 16, tanh) on 12 sequences of 8 tokens of width 16 ``N(0, I)``,
    targets from a random layer of the same shape; attention ``Wqkv`` (48x16), feed-forward ``Win``
    (32x16) and ``Wout`` (16x32) ``N(0, 1/fan_in)`` (``Wout`` at a tenth); blocks ``Wqkv``,
    ``Win``, ``Wout`` (1,792 parameters, float32). Attention by its formula (no fused kernel)."""
    rng = np.random.default_rng(int(seed))
    X = _t32(rng.standard_normal((12, 8, 16)))

    def layer(p, x):
        q, k, v = (x @ p["Wqkv"].T).split(16, -1)
        att = torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1)
        h = x + att @ v
        return h + torch.tanh(h @ p["Win"].T) @ p["Wout"].T

    def draw(scale_out):
        return {"Wqkv": _t32(rng.standard_normal((48, 16)) / 4.0),
                "Win": _t32(rng.standard_normal((32, 16)) / 4.0),
                "Wout": _t32(scale_out * rng.standard_normal((16, 32)) / np.sqrt(32))}

    with torch.no_grad():
        T = layer(draw(1.0), X)
    params = draw(0.1)

    def loss(p):
        """Mean squared error per token (halved)."""
        return 0.5 * ((layer(p, X) - T) ** 2).sum(-1).mean()

    return _task(params, loss, "attention_layer32", seed)


def wide_logistic(seed: int = 0) -> Task:
    """Mean logistic loss of 200 examples of 1,600 features ``N(0, 1/1600)`` labelled by a random
    direction, plus ``1e-2 / 2 |w|^2``; ``w`` starts at 0; blocks ``w1``, ``w2`` (the two halves
    of the features, 800 each)."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((200, 1600)) / 40.0
    y = (X @ rng.standard_normal(1600) + 0.3 * rng.standard_normal(200) > 0).astype(float)
    X1, X2, Y = _t64(X[:, :800]), _t64(X[:, 800:]), _t64(y)
    params = {"w1": _t64(np.zeros(800)), "w2": _t64(np.zeros(800))}

    def loss(p):
        """Mean logistic loss plus a ridge."""
        z = 4.0 * (X1 @ p["w1"] + X2 @ p["w2"])
        nll = torch.nn.functional.binary_cross_entropy_with_logits(z, Y)
        return nll + 0.005 * ((p["w1"] ** 2).sum() + (p["w2"] ** 2).sum())

    return _task(params, loss, "wide_logistic", seed)


def wide_deep_linear(seed: int = 0) -> Task:
    """Half the mean squared error of ``X W1^T W2^T W3^T`` against a random linear map (24 to 24,
    scaled to unit spectral norm) on 100 examples ``N(0, I)``; factors ``I + N(0, 0.1^2 / 24)``;
    blocks ``W1``, ``W2``, ``W3`` (1,728 parameters)."""
    rng = np.random.default_rng(int(seed))
    A = rng.standard_normal((24, 24))
    A /= np.linalg.norm(A, 2)
    X = rng.standard_normal((100, 24))
    Xt, Yt = _t64(X), _t64(X @ A.T)
    params = {n: _t64(np.eye(24) + 0.1 * rng.standard_normal((24, 24)) / np.sqrt(24))
              for n in ("W1", "W2", "W3")}

    def loss(p):
        """Mean squared error (halved)."""
        return 0.5 * ((Xt @ p["W1"].T @ p["W2"].T @ p["W3"].T - Yt) ** 2).sum(1).mean()

    return _task(params, loss, "wide_deep_linear", seed)


def wide_elman32(seed: int = 0) -> Task:
    """Half the mean squared error of the last read-out of ``h_t = tanh(x_t U^T + h_{t-1} W^T)``,
    ``y = h_10 . v``, on 40 sequences of 10 steps of 8 inputs ``N(0, I)``, target the sum over
    time of the first input, scaled to unit variance; ``U`` (24x8) ``N(0, 1/8)``, ``W`` (24x24)
    ``N(0, 0.8^2 / 24)``, ``v`` (24) ``N(0, 1/24)``; blocks ``U``, ``W``, ``v`` (792 parameters,
    float32)."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((40, 10, 8))
    t = x[:, :, 0].sum(1) / math.sqrt(10)
    X, T = _t32(x), _t32(t)
    params = {"U": _t32(rng.standard_normal((24, 8)) / np.sqrt(8)),
              "W": _t32(0.8 * rng.standard_normal((24, 24)) / np.sqrt(24)),
              "v": _t32(rng.standard_normal(24) / np.sqrt(24))}

    def loss(p):
        """Mean squared error of the final read-out (halved)."""
        h = X.new_zeros((40, 24))
        for s in range(10):
            h = torch.tanh(X[:, s] @ p["U"].T + h @ p["W"].T)
        return 0.5 * ((h @ p["v"] - T) ** 2).mean()

    return _task(params, loss, "wide_elman32", seed)


def wide_poisson_glm(seed: int = 0) -> Task:
    """Mean Poisson negative log-likelihood (log link) of 300 counts on 800 features ``N(0,
    1/800)`` drawn at a random coefficient vector ``N(0, 1)`` and intercept 0.5, plus ``1e-2 / 2
    |w|^2``; ``w`` and the intercept start at 0; blocks ``w1`` (the first 400 features and the
    intercept) and ``w2`` (the other 400)."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((300, 800)) / np.sqrt(800)
    y = rng.poisson(np.exp(X @ rng.standard_normal(800) + 0.5))
    X1 = _t64(np.concatenate([X[:, :400], np.ones((300, 1))], 1))
    X2, Y = _t64(X[:, 400:]), _t64(y.astype(float))
    params = {"w1": _t64(np.zeros(401)), "w2": _t64(np.zeros(400))}

    def loss(p):
        """Mean Poisson negative log-likelihood plus a ridge."""
        eta = X1 @ p["w1"] + X2 @ p["w2"]
        return (torch.exp(eta) - Y * eta).mean() + 0.005 * ((p["w1"] ** 2).sum()
                                                            + (p["w2"] ** 2).sum())

    return _task(params, loss, "wide_poisson_glm", seed)
