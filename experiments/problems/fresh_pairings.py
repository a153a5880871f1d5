"""Fresh problems of a thirteenth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after
those of :mod:`crosscurv.experiments.problems.fresh_sharpening`): kinds no earlier round has, most
of them a model of pairs (comparisons, rankings, couplings, two views), defined before any of their
runs and never consulted in any choice, to test the rule unchanged since round 12. Three are
float32 (names ending in 32).

* ``bradley_terry``: paired comparisons, blocks player strengths and a home advantage;
* ``ranknet_pairs``: a tanh scorer trained by the pairwise logistic ranking loss;
* ``ising_pseudolikelihood``: an Ising model fitted by pseudo-likelihood, blocks couplings and
  fields;
* ``cca_penalised``: two-view canonical correlation with a penalty on the projections' variances;
* ``affine_coupling32``: the density of one affine coupling layer (log-determinant included),
  blocks scale and shift networks (float32);
* ``wide_relu_net``: a one-hidden-layer ReLU network of 64 units;
* ``fourier_features32``: a read-out of learned Fourier features (float32);
* ``elastic_net_smooth32``: regression under a smoothed L1 and an L2 penalty, the coefficients in
  two blocks (float32).

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["bradley_terry", "ranknet_pairs", "ising_pseudolikelihood", "cca_penalised",
           "affine_coupling32", "wide_relu_net", "fourier_features32", "elastic_net_smooth32"]


def bradley_terry(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 80 games among 8 players, ``P(home i beats j) =
    sigmoid(s_i - s_j + h)``, plus ``0.01 / 2 |s|^2``; outcomes drawn at random strengths and ``h
    = 0.4``; ``s`` and ``h`` start at 0; blocks ``s`` and ``h``."""
    rng = np.random.default_rng(int(seed))
    st = rng.standard_normal(8)
    i = rng.integers(0, 8, 80)
    j = (i + rng.integers(1, 8, 80)) % 8
    win = rng.random(80) < 1 / (1 + np.exp(-(st[i] - st[j] + 0.4)))
    I, J, Y = torch.tensor(i), torch.tensor(j), _t64(win.astype(float))
    params = {"s": _t64(np.zeros(8)), "h": _t64(np.zeros(1))}

    def loss(p):
        """Mean logistic loss of the home wins plus a small ridge on the strengths."""
        z = p["s"][I] - p["s"][J] + p["h"]
        nll = torch.nn.functional.binary_cross_entropy_with_logits(z, Y)
        return nll + 0.005 * (p["s"] ** 2).sum()

    return _task(params, loss, "bradley_terry", seed)


def ranknet_pairs(seed: int = 0) -> Task:
    """Mean ``softplus(-(f(a) - f(b)))`` over 60 pairs where ``a`` ranks above ``b`` by a noisy
    random score, ``f(x) = tanh(x W^T) . v`` on 4 features ``N(0, I)``; ``W`` (5x4) ``N(0,
    1/4)``, ``v`` ``N(0, 1/5)``; blocks ``W`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 4))
    score = np.tanh(Xn @ rng.standard_normal(4)) + 0.1 * rng.standard_normal(30)
    a, b = rng.integers(0, 30, 60), rng.integers(0, 30, 60)
    hi, lo = np.where(score[a] >= score[b], a, b), np.where(score[a] >= score[b], b, a)
    X, H, L = _t64(Xn), torch.tensor(hi), torch.tensor(lo)
    params = {"W": _t64(rng.standard_normal((5, 4)) / 2),
              "v": _t64(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Mean pairwise logistic ranking loss."""
        f = torch.tanh(X @ p["W"].T) @ p["v"]
        return torch.nn.functional.softplus(f[L] - f[H]).mean()

    return _task(params, loss, "ranknet_pairs", seed)


def ising_pseudolikelihood(seed: int = 0) -> Task:
    """Negative log pseudo-likelihood of 60 configurations of 6 spins in ``{-1, 1}`` (drawn by
    Gibbs sampling from random couplings ``N(0, 0.09)`` and fields ``N(0, 0.04)``), ``mean_n
    sum_i log(1 + exp(-2 x_i (sum_j J_ij x_j + h_i)))`` with ``J = (A + A^T) / 2`` zero on the
    diagonal; ``A`` and ``h`` start at 0; blocks couplings ``A`` and fields ``h``."""
    rng = np.random.default_rng(int(seed))
    At = 0.3 * rng.standard_normal((6, 6))
    Jt = (At + At.T) / 2
    np.fill_diagonal(Jt, 0.0)
    ht = 0.2 * rng.standard_normal(6)
    x, samples = rng.choice([-1.0, 1.0], 6), []
    for sweep in range(200):
        for i in range(6):
            field = Jt[i] @ x + ht[i]
            x[i] = 1.0 if rng.random() < 1 / (1 + np.exp(-2 * field)) else -1.0
        if sweep >= 80 and sweep % 2 == 0:
            samples.append(x.copy())
    X = _t64(np.array(samples))
    off = _t64(1.0 - np.eye(6))
    params = {"A": _t64(np.zeros((6, 6))), "h": _t64(np.zeros(6))}

    def loss(p):
        """Mean negative log pseudo-likelihood."""
        J = 0.5 * (p["A"] + p["A"].T) * off
        return torch.nn.functional.softplus(-2 * X * (X @ J + p["h"])).sum(1).mean()

    return _task(params, loss, "ising_pseudolikelihood", seed)


def cca_penalised(seed: int = 0) -> Task:
    """``-mean((X u)(Y v)) + (mean((X u)^2) - 1)^2 / 2 + (mean((Y v)^2) - 1)^2 / 2`` for two views
    ``X`` (50x4), ``Y`` (50x3) sharing a latent direction plus noise; ``u``, ``v`` start ``N(0,
    1/4)``; blocks ``u`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    z = rng.standard_normal(50)
    Xn = np.outer(z, rng.standard_normal(4)) + rng.standard_normal((50, 4))
    Yn = np.outer(z, rng.standard_normal(3)) + rng.standard_normal((50, 3))
    X, Y = _t64(Xn - Xn.mean(0)), _t64(Yn - Yn.mean(0))
    params = {"u": _t64(rng.standard_normal(4) / 2), "v": _t64(rng.standard_normal(3) / 2)}

    def loss(p):
        """Negative covariance of the projections plus penalties on their variances."""
        a, b = X @ p["u"], Y @ p["v"]
        return (-(a * b).mean() + 0.5 * ((a ** 2).mean() - 1) ** 2
                + 0.5 * ((b ** 2).mean() - 1) ** 2)

    return _task(params, loss, "cca_penalised", seed)


def affine_coupling32(seed: int = 0) -> Task:
    """Negative log-likelihood of 60 points in 2-D (a banana-shaped cloud) under one affine
    coupling layer to a standard normal, ``z_1 = x_1``, ``z_2 = x_2 exp(s(x_1)) + t(x_1)`` with
    ``s(x_1) = tanh(x_1 a) . c`` and ``t(x_1) = tanh(x_1 d) . e`` (4 units each, ``N(0, 1/4)``),
    ``log det = s(x_1)``; blocks scale (``a``, ``c``) and shift (``d``, ``e``); float32."""
    rng = np.random.default_rng(int(seed))
    x1 = rng.standard_normal(60)
    x2 = 0.5 * x1 ** 2 - 0.5 + 0.4 * rng.standard_normal(60)
    X1, X2 = _t32(x1[:, None]), _t32(x2)
    params = {n: _t32(rng.standard_normal(4) / 2) for n in ("a", "c", "d", "e")}

    def loss(p):
        """Mean negative log-likelihood up to a constant."""
        s = torch.tanh(X1 * p["a"]) @ p["c"]
        z2 = X2 * torch.exp(s) + torch.tanh(X1 * p["d"]) @ p["e"]
        return (0.5 * z2 ** 2 - s).mean()

    return _task(params, loss, "affine_coupling32", seed,
                 {"scale": ["a", "c"], "shift": ["d", "e"]})


def wide_relu_net(seed: int = 0) -> Task:
    """``1/2 mean((relu(X W^T + b) . v - y)^2)`` on 40 examples of 3 features ``N(0, I)``, 64
    hidden units, targets ``sin(x . a) + x_1 x_2 / 2``; ``W`` ``N(0, 1/3)``, ``b`` ``N(0, 0.01)``,
    ``v`` ``N(0, 1/64)``; blocks hidden layer (``W``, ``b``) and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    y = _t64(np.sin(Xn @ rng.standard_normal(3)) + Xn[:, 0] * Xn[:, 1] / 2)
    X = _t64(Xn)
    params = {"W": _t64(rng.standard_normal((64, 3)) / np.sqrt(3)),
              "b": _t64(0.1 * rng.standard_normal(64)), "v": _t64(rng.standard_normal(64) / 8)}

    def loss(p):
        """Squared error of the wide network (halved)."""
        return 0.5 * ((torch.relu(X @ p["W"].T + p["b"]) @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "wide_relu_net", seed, {"hidden": ["W", "b"], "v": ["v"]})


def fourier_features32(seed: int = 0) -> Task:
    """``1/2 mean(([cos(X B^T), sin(X B^T)] . w - y)^2)`` on 40 points of 2 coordinates in
    ``[-1, 1]``, targets a smooth bump ``exp(-2 |x|^2)`` plus ``sin(3 x_1)``; frequencies ``B``
    (6x2) start ``N(0, 1)``, weights ``w`` (12) ``N(0, 1/12)``; blocks ``B`` and ``w``;
    float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.uniform(-1, 1, (40, 2))
    y = _t32(np.exp(-2 * (Xn ** 2).sum(1)) + np.sin(3 * Xn[:, 0]))
    X = _t32(Xn)
    params = {"B": _t32(rng.standard_normal((6, 2))),
              "w": _t32(rng.standard_normal(12) / np.sqrt(12))}

    def loss(p):
        """Squared error of the Fourier-feature read-out (halved)."""
        z = X @ p["B"].T
        return 0.5 * ((torch.cat([torch.cos(z), torch.sin(z)], 1) @ p["w"] - y) ** 2).mean()

    return _task(params, loss, "fourier_features32", seed)


def elastic_net_smooth32(seed: int = 0) -> Task:
    """``1/2 mean((X [w1, w2] - y)^2) + 0.05 sum sqrt(w^2 + 0.01) + 0.01 / 2 |w|^2`` on 40
    examples of 8 correlated features (pairs sharing a factor), targets from a 3-sparse vector
    plus noise 0.1; ``w1``, ``w2`` (the first and last four coefficients) start at 0; float32."""
    rng = np.random.default_rng(int(seed))
    base = rng.standard_normal((40, 4))
    Xn = np.repeat(base, 2, axis=1) + 0.5 * rng.standard_normal((40, 8))
    wt = np.zeros(8)
    wt[rng.choice(8, 3, replace=False)] = rng.choice([-1.0, 1.0], 3)
    X, y = _t32(Xn), _t32(Xn @ wt + 0.1 * rng.standard_normal(40))
    params = {"w1": _t32(np.zeros(4)), "w2": _t32(np.zeros(4))}

    def loss(p):
        """Squared error (halved) plus the smoothed L1 and the L2 penalties."""
        w = torch.cat([p["w1"], p["w2"]])
        fit = 0.5 * ((X @ w - y) ** 2).mean()
        return fit + 0.05 * torch.sqrt(w ** 2 + 0.01).sum() + 0.005 * (w ** 2).sum()

    return _task(params, loss, "elastic_net_smooth32", seed)
