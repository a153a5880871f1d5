"""Fresh problems of a ninth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those of
:mod:`crosscurv.experiments.problems.fresh_starts`): kinds no earlier round has, defined before any
of their runs and never consulted in any choice; the code's rule unchanged since the eighth round.
Three are float32 (names ending in 32).

* ``tensor_train``: a three-core tensor train fitted to a 4x4x4 tensor, one block per core;
* ``kernel_ridge32``: a Gaussian-kernel expansion with its log bandwidth learned, blocks
  coefficients and log bandwidth (float32);
* ``maxout_net``: a network of maxout units (the maximum of two affine maps), blocks hidden and
  read-out;
* ``planar_flow32``: the negative log-likelihood of a two-layer planar normalising flow on 2-D
  data, one block per layer (float32);
* ``glove_embeddings``: GloVe's weighted least squares on a co-occurrence matrix, blocks word
  vectors, context vectors and biases;
* ``dirichlet_multinomial``: a Dirichlet-multinomial regression through a softplus, blocks weights
  and intercepts;
* ``mixer32``: an MLP-mixer layer (token mixing, then channel mixing, GELU) on 4 tokens (float32);
* ``sinkhorn_points``: the entropic optimal-transport cost, by 20 unrolled Sinkhorn iterations, of
  8 learned points to a fixed cloud, blocks the points' x and y coordinates.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["tensor_train", "kernel_ridge32", "maxout_net", "planar_flow32", "glove_embeddings",
           "dirichlet_multinomial", "mixer32", "sinkhorn_points"]


def tensor_train(seed: int = 0) -> Task:
    """``1/2 mean((sum_ab G1_ia G2_ajb G3_bk - T_ijk)^2)`` for a tensor-train target of ranks 2
    (4x4x4); cores ``G1`` (4x2), ``G2`` (2x4x2), ``G3`` (2x4) start ``N(0, 1/4)``; one block per
    core."""
    rng = np.random.default_rng(int(seed))
    A, B = rng.standard_normal((4, 2)), rng.standard_normal((2, 4, 2))
    C = rng.standard_normal((2, 4))
    T = _t64(np.einsum("ia,ajb,bk->ijk", A, B, C))
    params = {"G1": _t64(rng.standard_normal((4, 2)) / 2),
              "G2": _t64(rng.standard_normal((2, 4, 2)) / 2),
              "G3": _t64(rng.standard_normal((2, 4)) / 2)}

    def loss(p):
        """Mean squared error of the train's contraction (halved)."""
        return 0.5 * ((torch.einsum("ia,ajb,bk->ijk", p["G1"], p["G2"], p["G3"]) - T) ** 2).mean()

    return _task(params, loss, "tensor_train", seed)


def kernel_ridge32(seed: int = 0) -> Task:
    """``1/2 mean((K(h) a - y)^2) + 1e-3 |a|^2``, ``K_ij = exp(-|x_i - c_j|^2 / (2 exp(2 h)))``
    for 30 points ``x`` ``N(0, I_2)`` and 8 centres drawn from them, targets ``sin`` of the first
    coordinate times the second; ``a`` starts ``N(0, 1/8)``, ``h`` at 0; blocks ``a`` and ``h``;
    float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 2))
    y = _t32(np.sin(Xn[:, 0]) * Xn[:, 1])
    d2 = _t32(((Xn[:, None, :] - Xn[rng.choice(30, 8, replace=False)][None, :, :]) ** 2).sum(-1))
    params = {"a": _t32(rng.standard_normal(8) / np.sqrt(8)), "h": _t32(np.zeros(1))}

    def loss(p):
        """Ridge-regularised squared error of the kernel expansion (halved)."""
        K = torch.exp(-d2 / (2 * torch.exp(2 * p["h"])))
        return 0.5 * ((K @ p["a"] - y) ** 2).mean() + 1e-3 * (p["a"] ** 2).sum()

    return _task(params, loss, "kernel_ridge32", seed)


def maxout_net(seed: int = 0) -> Task:
    """``1/2 mean((v . max(W1 x + b1, W2 x + b2) - y)^2)`` on 30 examples of 3 features ``N(0,
    I)``, 5 maxout units of two pieces, targets ``|x_1| - x_2^2 / 2``; ``W1``, ``W2`` (5x3) start
    ``N(0, 1/3)``, biases ``N(0, 1/4)``, ``v`` ``N(0, 1/5)``; blocks hidden and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 3))
    y = _t64(np.abs(Xn[:, 0]) - Xn[:, 1] ** 2 / 2)
    X = _t64(Xn)
    params = {"W1": _t64(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "W2": _t64(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "b1": _t64(rng.standard_normal(5) / 2), "b2": _t64(rng.standard_normal(5) / 2),
              "v": _t64(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Squared error of the maxout layer's read-out (halved)."""
        h = torch.maximum(X @ p["W1"].T + p["b1"], X @ p["W2"].T + p["b2"])
        return 0.5 * ((h @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "maxout_net", seed,
                 {"hidden": ["W1", "W2", "b1", "b2"], "v": ["v"]})


def planar_flow32(seed: int = 0) -> Task:
    """Negative log-likelihood under two planar flows ``z <- z + u tanh(w . z + b)`` of a standard
    normal base, by the change of variables written forward from data to base (each layer's
    ``log |1 + u . psi|``), on 40 points of a banana-shaped cloud; ``u``, ``w`` start ``N(0,
    1/4)``, ``b`` at 0; one block per layer (``u``, ``w``, ``b``); float32."""
    rng = np.random.default_rng(int(seed))
    a = rng.standard_normal(40)
    Xn = np.stack([a, 0.5 * a ** 2 - 1 + 0.3 * rng.standard_normal(40)], 1)
    X = _t32(Xn)
    params = {}
    for layer in (1, 2):
        params[f"u{layer}"] = _t32(rng.standard_normal(2) / 2)
        params[f"w{layer}"] = _t32(rng.standard_normal(2) / 2)
        params[f"b{layer}"] = _t32(np.zeros(1))

    def loss(p):
        """Mean negative log-density of the points (up to a constant)."""
        z, logdet = X, 0.0
        for layer in (1, 2):
            u, w, b = p[f"u{layer}"], p[f"w{layer}"], p[f"b{layer}"]
            t = torch.tanh(z @ w + b)
            logdet = logdet + torch.log(torch.abs(1 + (1 - t ** 2) * (u @ w)) + 1e-6)
            z = z + t[:, None] * u[None, :]
        return (0.5 * (z ** 2).sum(1) - logdet).mean()

    return _task(params, loss, "planar_flow32", seed,
                 {f"layer{layer}": [f"u{layer}", f"w{layer}", f"b{layer}"] for layer in (1, 2)})


def glove_embeddings(seed: int = 0) -> Task:
    """GloVe's ``mean(f(X_ij) (w_i . c_j + b_i + d_j - log X_ij)^2) / 2`` over the nonzero
    co-occurrences of 8 words (counts Poisson of a rank-2 rate, ``f(x) = min(1, (x / 10)^0.75)``);
    ``W``, ``C`` (8x3) start ``N(0, 1/9)``, biases at 0; blocks ``W``, ``C`` and the biases."""
    rng = np.random.default_rng(int(seed))
    rate = np.exp(rng.standard_normal((8, 2)) @ rng.standard_normal((2, 8)) / 2 + 1.0)
    Xc = rng.poisson(rate).astype(float)
    mask = Xc > 0
    logx = _t64(np.where(mask, np.log(np.where(mask, Xc, 1.0)), 0.0))
    f = _t64(np.where(mask, np.minimum(1.0, (Xc / 10.0) ** 0.75), 0.0))
    n = float(mask.sum())
    params = {"W": _t64(rng.standard_normal((8, 3)) / 3),
              "C": _t64(rng.standard_normal((8, 3)) / 3),
              "bw": _t64(np.zeros(8)), "bc": _t64(np.zeros(8))}

    def loss(p):
        """Weighted squared error of the log co-occurrences (halved)."""
        fit = p["W"] @ p["C"].T + p["bw"][:, None] + p["bc"][None, :]
        return 0.5 * (f * (fit - logx) ** 2).sum() / n

    return _task(params, loss, "glove_embeddings", seed,
                 {"W": ["W"], "C": ["C"], "biases": ["bw", "bc"]})


def dirichlet_multinomial(seed: int = 0) -> Task:
    """Negative log-likelihood of counts over 3 categories (30 rows of 12 draws) under a
    Dirichlet-multinomial with concentrations ``softplus(X B + c)``, 3 features ``N(0, I)``;
    ``B`` (3x3) starts at 0 and ``c`` at ``(1, 1, 1)``; blocks ``B`` and ``c``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 3))
    alpha = np.log1p(np.exp(Xn @ rng.standard_normal((3, 3)) + 1.0))
    probs = np.stack([rng.dirichlet(a) for a in alpha])
    counts = np.stack([rng.multinomial(12, q) for q in probs]).astype(float)
    X, N = _t64(Xn), _t64(counts)
    params = {"B": _t64(np.zeros((3, 3))), "c": _t64(np.ones(3))}

    def loss(p):
        """Mean negative log-likelihood up to a constant in the counts."""
        a = torch.nn.functional.softplus(X @ p["B"] + p["c"])
        a0 = a.sum(1)
        ll = (torch.lgamma(a0) - torch.lgamma(a0 + 12.0)
              + (torch.lgamma(a + N) - torch.lgamma(a)).sum(1))
        return -ll.mean()

    return _task(params, loss, "dirichlet_multinomial", seed)


def mixer32(seed: int = 0) -> Task:
    """``1/2 mean((mean_t(Z) . v - y)^2)`` of one MLP-mixer layer on 20 sequences of 4 tokens of 3
    channels ``N(0, I)``: ``Z = Y + gelu(Y M2) M3``, ``Y = X + (gelu(X^T T1) T2)^T`` (token
    mixing ``T1`` 4x6, ``T2`` 6x4; channel mixing ``M2`` 3x5, ``M3`` 5x3; all ``N(0, 1/fan-in)``),
    read-out ``v`` ``N(0, 1/3)``; targets ``tanh`` of a bilinear score; blocks token mixing,
    channel mixing and ``v``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 4, 3))
    y = _t32(np.tanh(Xn[:, 0, :] @ rng.standard_normal(3) * Xn[:, -1, 0]))
    X = _t32(Xn)
    shapes = {"T1": (4, 6), "T2": (6, 4), "M2": (3, 5), "M3": (5, 3)}
    params = {n: _t32(rng.standard_normal(s) / np.sqrt(s[0])) for n, s in shapes.items()}
    params["v"] = _t32(rng.standard_normal(3) / np.sqrt(3))
    gelu = torch.nn.functional.gelu

    def loss(p):
        """Squared error of the mixer's pooled read-out (halved)."""
        Y = X + (gelu(X.transpose(1, 2) @ p["T1"]) @ p["T2"]).transpose(1, 2)
        Z = Y + gelu(Y @ p["M2"]) @ p["M3"]
        return 0.5 * ((Z.mean(1) @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "mixer32", seed,
                 {"tokens": ["T1", "T2"], "channels": ["M2", "M3"], "v": ["v"]})


def sinkhorn_points(seed: int = 0) -> Task:
    """The entropic optimal-transport cost (``epsilon = 0.5``, 20 Sinkhorn iterations in the log
    domain, unrolled) between 8 learned points and a fixed cloud of 12 ``N((1, 0), I / 4)``, uniform
    weights, squared Euclidean cost; the points' coordinates ``x``, ``y`` (8 each) start ``N(0,
    1)``; blocks ``x`` and ``y``."""
    rng = np.random.default_rng(int(seed))
    target = _t64(rng.standard_normal((12, 2)) / 2 + np.array([1.0, 0.0]))
    params = {"x": _t64(rng.standard_normal(8)), "y": _t64(rng.standard_normal(8))}
    eps = 0.5
    log_a = torch.full((8,), -float(np.log(8)), dtype=torch.float64)
    log_b = torch.full((12,), -float(np.log(12)), dtype=torch.float64)

    def loss(p):
        """Transport cost of the entropic plan."""
        pts = torch.stack([p["x"], p["y"]], 1)
        C = ((pts[:, None, :] - target[None, :, :]) ** 2).sum(-1)
        f = torch.zeros(8, dtype=C.dtype)
        g = torch.zeros(12, dtype=C.dtype)
        for _ in range(20):
            f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], 1)
            g = -eps * torch.logsumexp((f[:, None] - C) / eps + log_a[:, None], 0)
        plan = torch.exp((f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :])
        return (plan * C).sum()

    return _task(params, loss, "sinkhorn_points", seed)
