"""Fresh problems of a fourteenth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after
those of :mod:`crosscurv.experiments.problems.fresh_pairings`): kinds no earlier round has, every
one of three or four blocks, so that advise weighs eight or twenty-six candidates and the full GS
orders differ from one another; defined before any of their runs and never consulted in any
choice, to test the rule unchanged since round 12. Three are float32 (names ending in 32).

* ``factor_analysis``: the Gaussian likelihood of a two-factor model, blocks mean, loadings and log
  specific variances;
* ``hmm_forward32``: a hidden Markov model's log-likelihood by the forward recursion, blocks
  initial, transition and emission logits (float32);
* ``mixture_density_net``: a one-hidden-layer network whose heads give a two-component Gaussian
  mixture, blocks hidden layer, mixture logits, means and log scales (four blocks);
* ``neural_recommender``: user and item embeddings read out by a small network, blocks users,
  items and read-out;
* ``vae_fixed_noise32``: a linear VAE's negative ELBO at fixed reparameterisation noise, blocks
  encoder mean, encoder log variance and decoder (float32);
* ``tobit_regression``: regression censored at 0, blocks two halves of the coefficients and the
  log scale;
* ``kalman_likelihood``: a scalar linear-Gaussian state-space model's likelihood by the Kalman
  filter, blocks transition, observation and log noise variances;
* ``deep_sets32``: a permutation-invariant network ``rho(sum_i phi(x_i))``, blocks the two layers
  of ``phi`` and ``rho`` (float32).

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

__all__ = ["factor_analysis", "hmm_forward32", "mixture_density_net", "neural_recommender",
           "vae_fixed_noise32", "tobit_regression", "kalman_likelihood", "deep_sets32"]


def factor_analysis(seed: int = 0) -> Task:
    """Mean Gaussian negative log-likelihood of 60 points in 5 dimensions under ``N(mu, L L^T +
    diag(exp(s)))``, data drawn from a random two-factor model; ``mu`` starts at 0, ``L`` (5x2)
    ``N(0, 1/4)``, ``s`` at 0; blocks ``mu``, ``L``, ``s``."""
    rng = np.random.default_rng(int(seed))
    L0 = rng.standard_normal((5, 2))
    x = rng.standard_normal((60, 2)) @ L0.T + 0.5 * rng.standard_normal((60, 5)) + 0.3
    X = _t64(x)
    params = {"mu": _t64(np.zeros(5)), "L": _t64(0.5 * rng.standard_normal((5, 2))),
              "s": _t64(np.zeros(5))}

    def loss(p):
        """Mean negative log-likelihood (constant dropped)."""
        C = p["L"] @ p["L"].T + torch.diag(torch.exp(p["s"]))
        ch = torch.linalg.cholesky(C)
        z = torch.cholesky_solve((X - p["mu"]).T, ch)
        quad = ((X - p["mu"]).T * z).sum(0).mean()
        return 0.5 * quad + torch.log(torch.diagonal(ch)).sum()

    return _task(params, loss, "factor_analysis", seed)


def hmm_forward32(seed: int = 0) -> Task:
    """Mean negative log-likelihood per symbol of 8 sequences of 12 symbols (4 symbols, drawn from a
    random 3-state HMM) by the forward recursion in log space; initial (3), transition (3x3) and
    emission (3x4) logits start ``N(0, 1/4)``; blocks ``a0``, ``A``, ``B``."""
    rng = np.random.default_rng(int(seed))
    T0 = rng.dirichlet(np.ones(3) * 0.7, 3)
    E0 = rng.dirichlet(np.ones(4) * 0.7, 3)
    seqs = np.zeros((8, 12), dtype=np.int64)
    for n in range(8):
        h = rng.integers(0, 3)
        for t in range(12):
            seqs[n, t] = rng.choice(4, p=E0[h])
            h = rng.choice(3, p=T0[h])
    S = torch.tensor(seqs)
    params = {n: _t32(0.5 * rng.standard_normal(shape))
              for n, shape in (("a0", (3,)), ("A", (3, 3)), ("B", (3, 4)))}

    def loss(p):
        """Forward recursion with log-softmax rows."""
        la, lA, lB = (torch.log_softmax(p[n], -1) for n in ("a0", "A", "B"))
        alpha = la + lB[:, S[:, 0]].T
        for t in range(1, 12):
            alpha = torch.logsumexp(alpha[:, :, None] + lA[None], 1) + lB[:, S[:, t]].T
        return -torch.logsumexp(alpha, 1).mean() / 12

    return _task(params, loss, "hmm_forward32", seed)


def mixture_density_net(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 50 points ``y = +-(x + 0.3 x^2) + N(0, 0.1^2)`` (the sign a
    fair coin, ``x`` uniform on ``[-1, 1]``) under a two-component Gaussian mixture whose logits,
    means and log scales are linear heads on ``tanh(x w + b)`` (6 units); hidden ``N(0, 1)``,
    heads ``N(0, 1/6)``; blocks hidden ``H`` (6x2), logits ``P``, means ``M``, log scales ``S``
    (each 2x7, bias included)."""
    rng = np.random.default_rng(int(seed))
    xs = rng.uniform(-1, 1, 50)
    sign = np.where(rng.random(50) < 0.5, 1, -1)
    ys = sign * (xs + 0.3 * xs ** 2) + 0.1 * rng.standard_normal(50)
    X, Y = _t64(np.stack([xs, np.ones(50)], 1)), _t64(ys)
    params = {"H": _t64(rng.standard_normal((6, 2)))}
    params.update({n: _t64(rng.standard_normal((2, 7)) / np.sqrt(6)) for n in ("P", "M", "S")})

    def loss(p):
        """Mixture negative log-likelihood."""
        h = torch.cat([torch.tanh(X @ p["H"].T), X[:, 1:]], 1)
        logit, mean, logs = h @ p["P"].T, h @ p["M"].T, h @ p["S"].T
        z = (Y[:, None] - mean) / torch.exp(logs)
        comp = torch.log_softmax(logit, 1) - 0.5 * z ** 2 - logs - 0.5 * math.log(2 * math.pi)
        return -torch.logsumexp(comp, 1).mean()

    return _task(params, loss, "mixture_density_net", seed)


def neural_recommender(seed: int = 0) -> Task:
    """Mean squared error on 40 observed ratings of 8 users and 7 items, ``r = w . tanh(u_i * v_j)
    + c`` (ratings from a random rank-2 model), plus ``0.01 / 2`` of the embeddings' squared norm;
    embeddings (4 per user and item) ``N(0, 1/2)``, read-out ``w`` (4) and ``c`` ``N(0, 1/4)``;
    blocks ``U``, ``V``, ``w`` (``w`` and ``c``)."""
    rng = np.random.default_rng(int(seed))
    i, j = rng.integers(0, 8, 40), rng.integers(0, 7, 40)
    r = (rng.standard_normal((8, 2)) @ rng.standard_normal((7, 2)).T)[i, j]
    I, J, R = torch.tensor(i), torch.tensor(j), _t64(r)
    params = {"U": _t64(rng.standard_normal((8, 4)) / np.sqrt(2)),
              "V": _t64(rng.standard_normal((7, 4)) / np.sqrt(2)),
              "w": _t64(0.5 * rng.standard_normal(5))}

    def loss(p):
        """Mean squared rating error plus a ridge on the embeddings."""
        pred = torch.tanh(p["U"][I] * p["V"][J]) @ p["w"][:4] + p["w"][4]
        reg = 0.005 * ((p["U"] ** 2).sum() + (p["V"] ** 2).sum())
        return 0.5 * ((pred - R) ** 2).mean() + reg

    return _task(params, loss, "neural_recommender", seed)


def vae_fixed_noise32(seed: int = 0) -> Task:
    """Mean negative ELBO of 30 points in 4 dimensions (a noisy 2-D linear embedding) for a linear
    VAE with latent 2: ``z = x Wm^T + exp(x Wv^T / 2) * eps`` at a fixed draw ``eps ~ N(0, I)``,
    reconstruction ``1/2 |x - z D^T|^2`` plus the Gaussian KL; ``Wm``, ``Wv`` (2x4) and ``D`` (4x2)
    ``N(0, 1/4)``; blocks ``Wm``, ``Wv``, ``D``."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 4)) + 0.3 * rng.standard_normal(
        (30, 4))
    X, eps = _t32(x), _t32(rng.standard_normal((30, 2)))
    params = {n: _t32(0.5 * rng.standard_normal(shape))
              for n, shape in (("Wm", (2, 4)), ("Wv", (2, 4)), ("D", (4, 2)))}

    def loss(p):
        """Reconstruction plus KL, mean over the points."""
        mu, lv = X @ p["Wm"].T, X @ p["Wv"].T
        z = mu + torch.exp(0.5 * lv) * eps
        rec = 0.5 * ((X - z @ p["D"].T) ** 2).sum(1)
        kl = 0.5 * (mu ** 2 + torch.exp(lv) - lv - 1).sum(1)
        return (rec + kl).mean()

    return _task(params, loss, "vae_fixed_noise32", seed)


def tobit_regression(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 60 responses ``y = max(0, x . b + N(0, 1))`` on 6 features
    ``N(0, I)`` (about a third censored), ``-log N(y; x . b, s^2)`` where ``y > 0`` and ``-log
    Phi(-x . b / s)`` where ``y = 0``; ``b`` starts at 0, ``log s`` at 0; blocks ``b1`` (first three
    coefficients), ``b2`` (the other three and the intercept), ``log_s``."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((60, 6))
    y = np.maximum(0.0, x @ rng.standard_normal(6) * 0.7 + 0.4 + rng.standard_normal(60))
    X1, X2 = _t64(x[:, :3]), _t64(np.concatenate([x[:, 3:], np.ones((60, 1))], 1))
    Y, pos = _t64(y), torch.tensor(y > 0)
    params = {"b1": _t64(np.zeros(3)), "b2": _t64(np.zeros(4)), "log_s": _t64(np.zeros(1))}

    def loss(p):
        """Censored Gaussian likelihood."""
        m, ls = X1 @ p["b1"] + X2 @ p["b2"], p["log_s"]
        z = (Y - m) / torch.exp(ls)
        obs = 0.5 * z ** 2 + ls
        cen = -torch.special.log_ndtr(-m / torch.exp(ls))
        return torch.where(pos, obs, cen).mean()

    return _task(params, loss, "tobit_regression", seed)


def kalman_likelihood(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 40 observations of ``h_t = a h_{t-1} + N(0, q)``, ``y_t = c
    h_t + N(0, r)`` (``a = 0.8``, ``c = 1``, ``q = 0.3``, ``r = 0.2``) by the Kalman filter from
    ``h_0 ~ N(0, 1)``; ``a``, ``c`` start at 0.5 and 0.7, ``(log q, log r)`` at ``(0, 0)``;
    blocks ``a``, ``c``, ``log_qr``."""
    rng = np.random.default_rng(int(seed))
    h, ys = 0.0, []
    for _ in range(40):
        h = 0.8 * h + math.sqrt(0.3) * rng.standard_normal()
        ys.append(h + math.sqrt(0.2) * rng.standard_normal())
    Y = _t64(ys)
    params = {"a": _t64([0.5]), "c": _t64([0.7]), "log_qr": _t64([0.0, 0.0])}

    def loss(p):
        """Prediction-error decomposition of the likelihood."""
        a, c = p["a"][0], p["c"][0]
        q, r = torch.exp(p["log_qr"][0]), torch.exp(p["log_qr"][1])
        m, P, total = Y.new_zeros(()), Y.new_ones(()), Y.new_zeros(())
        for t in range(40):
            m, P = a * m, a * a * P + q
            S = c * c * P + r
            v = Y[t] - c * m
            total = total + 0.5 * (torch.log(S) + v * v / S)
            K = P * c / S
            m, P = m + K * v, (1 - K * c) * P
        return total / 40

    return _task(params, loss, "kalman_likelihood", seed)


def deep_sets32(seed: int = 0) -> Task:
    """Mean squared error of ``rho(mean_i phi(x_i))`` on 24 sets of 5 scalars, target the set's
    standard deviation; ``phi(x) = tanh(tanh(x w1 + b1) W2^T)`` (8 then 6 units), ``rho`` linear
    with a bias; ``w1`` (8x2, bias included) ``N(0, 1)``, ``W2`` (6x8) ``N(0, 1/8)``, ``rho`` (7)
    ``N(0, 1/6)``; blocks ``phi1``, ``phi2``, ``rho`` (float32)."""
    rng = np.random.default_rng(int(seed))
    sets = rng.standard_normal((24, 5)) * rng.uniform(0.3, 1.5, (24, 1))
    X, T = _t32(np.stack([sets, np.ones_like(sets)], -1)), _t32(sets.std(1))
    params = {"phi1": _t32(rng.standard_normal((8, 2))),
              "phi2": _t32(rng.standard_normal((6, 8)) / np.sqrt(8)),
              "rho": _t32(rng.standard_normal(7) / np.sqrt(6))}

    def loss(p):
        """Mean squared error of the set regression (halved)."""
        h = torch.tanh(torch.tanh(X @ p["phi1"].T) @ p["phi2"].T).mean(1)
        pred = h @ p["rho"][:6] + p["rho"][6]
        return 0.5 * ((pred - T) ** 2).mean()

    return _task(params, loss, "deep_sets32", seed)
