"""Fresh problems of an eighth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those
of :mod:`crosscurv.experiments.problems.fresh_float32`): defined before any of their runs and never
consulted in any choice. Half start where a block's gradient vanishes or nearly does (a layer
initialised at zero, a small initialisation), the start of the seventh round's failure; the rest are
other kinds. Four are float32, four float64.

* ``zero_head_mlp``: a tanh MLP whose read-out starts at 0, blocks hidden layer and read-out;
* ``deep_linear_zero32``: a three-factor linear network whose last factor starts at 0 (float32);
* ``adapter_residual32``: a residual bottleneck adapter ``x + U tanh(D x)`` with ``U = 0``
  (float32);
* ``small_init_sensing``: matrix sensing from a small initialisation, blocks ``U`` and ``V``;
* ``nmf_poisson32``: a Poisson non-negative factorisation through a softplus (float32);
* ``softmax_policy``: a softmax policy's expected reward on a contextual bandit, its last layer
  starting at 0 (the uniform policy);
* ``weibull_survival32``: a censored Weibull survival model with a learned scale (float32);
* ``zero_gate_glu``: a gated linear unit whose value weights start at 0, three blocks.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["zero_head_mlp", "deep_linear_zero32", "adapter_residual32", "small_init_sensing",
           "nmf_poisson32", "softmax_policy", "weibull_survival32", "zero_gate_glu"]


def zero_head_mlp(seed: int = 0) -> Task:
    """``1/2 mean((v . tanh(W x + b) - y)^2)`` on 30 examples of 4 features ``N(0, I)``, targets
    ``sin`` of the first feature plus half the second's square; ``W`` (6x4) ``N(0, 1/4)``, ``b``
    0, ``v`` (6) starts at 0; blocks ``hidden`` (``W``, ``b``) and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 4))
    y = _t64(np.sin(Xn[:, 0]) + 0.5 * Xn[:, 1] ** 2)
    X = _t64(Xn)
    params = {"W": _t64(rng.standard_normal((6, 4)) / 2), "b": _t64(np.zeros(6)),
              "v": _t64(np.zeros(6))}

    def loss(p):
        """Squared error of the read-out (halved)."""
        return 0.5 * ((torch.tanh(X @ p["W"].T + p["b"]) @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "zero_head_mlp", seed, {"hidden": ["W", "b"], "v": ["v"]})


def deep_linear_zero32(seed: int = 0) -> Task:
    """``1/2 mean(|W3 W2 W1 x - T x|^2)`` on 40 examples ``N(0, I_4)``, ``T`` (2x4) ``N(0, 1)``;
    ``W1``, ``W2`` (4x4) start ``I + N(0, 1/16)``, ``W3`` (2x4) at 0; one block per factor;
    float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4))
    Tn = rng.standard_normal((2, 4))
    X, Y = _t32(Xn), _t32(Xn @ Tn.T)
    params = {f"W{i}": _t32(np.eye(4) + rng.standard_normal((4, 4)) / 4) for i in (1, 2)}
    params["W3"] = _t32(np.zeros((2, 4)))

    def loss(p):
        """Squared error of the product (halved)."""
        return 0.5 * ((X @ p["W1"].T @ p["W2"].T @ p["W3"].T - Y) ** 2).sum(1).mean()

    return _task(params, loss, "deep_linear_zero32", seed)


def adapter_residual32(seed: int = 0) -> Task:
    """``1/2 mean(|O (x + U tanh(D x)) - y|^2)`` with a frozen read-out ``O`` (3x5) ``N(0,
    1/5)``, 30 examples ``N(0, I_5)``, targets ``O`` applied to ``x + 0.5 tanh(x)``; ``D`` (2x5)
    starts ``N(0, 1/5)`` and ``U`` (5x2) at 0, as a residual adapter starts; blocks ``D`` and
    ``U``; float32."""
    rng = np.random.default_rng(int(seed))
    O = rng.standard_normal((3, 5)) / np.sqrt(5)
    Xn = rng.standard_normal((30, 5))
    Y = _t32((Xn + 0.5 * np.tanh(Xn)) @ O.T)
    X, On = _t32(Xn), _t32(O)
    params = {"D": _t32(rng.standard_normal((2, 5)) / np.sqrt(5)), "U": _t32(np.zeros((5, 2)))}

    def loss(p):
        """Squared error of the adapted features' read-out (halved)."""
        h = X + torch.tanh(X @ p["D"].T) @ p["U"].T
        return 0.5 * ((h @ On.T - Y) ** 2).sum(1).mean()

    return _task(params, loss, "adapter_residual32", seed)


def small_init_sensing(seed: int = 0) -> Task:
    """``1/2 mean((<A_i, U V^T> - y_i)^2)`` over 40 Gaussian measurements ``A_i`` (6x5) of a
    rank-2 matrix; ``U`` (6x2) and ``V`` (5x2) start ``N(0, 0.05^2)`` (a small initialisation,
    near the saddle at 0); blocks ``U`` and ``V``."""
    rng = np.random.default_rng(int(seed))
    M = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 5)) / np.sqrt(2)
    An = rng.standard_normal((40, 6, 5))
    y = _t64(np.einsum("nij,ij->n", An, M))
    A = _t64(An)
    params = {"U": _t64(0.05 * rng.standard_normal((6, 2))),
              "V": _t64(0.05 * rng.standard_normal((5, 2)))}

    def loss(p):
        """Squared measurement error (halved)."""
        return 0.5 * ((torch.einsum("nij,ij->n", A, p["U"] @ p["V"].T) - y) ** 2).mean()

    return _task(params, loss, "small_init_sensing", seed)


def nmf_poisson32(seed: int = 0) -> Task:
    """The Poisson deviance's likelihood part ``mean(mu - C log mu)`` of counts ``C`` (8x6, Poisson
    of a rank-2 non-negative rate) under ``mu = softplus(W) softplus(H)^T + 0.01``; ``W`` (8x2),
    ``H`` (6x2) start ``N(0, 1/4)``; blocks ``W`` and ``H``; float32."""
    rng = np.random.default_rng(int(seed))
    rate = rng.gamma(2.0, 1.0, (8, 2)) @ rng.gamma(2.0, 1.0, (2, 6)) / 2
    C = _t32(rng.poisson(rate))
    params = {"W": _t32(rng.standard_normal((8, 2)) / 2),
              "H": _t32(rng.standard_normal((6, 2)) / 2)}

    def loss(p):
        """Poisson negative log-likelihood up to a constant."""
        sp = torch.nn.functional.softplus
        mu = sp(p["W"]) @ sp(p["H"]).T + 0.01
        return (mu - C * torch.log(mu)).mean()

    return _task(params, loss, "nmf_poisson32", seed)


def softmax_policy(seed: int = 0) -> Task:
    """The negative expected reward of a two-layer softmax policy on a contextual bandit, ``-mean_x
    sum_a pi(a | x) R(x, a)`` with ``pi = softmax(V tanh(W x))``, 40 contexts of 4 features ``N(0,
    I)``, 3 actions, rewards ``R`` ``N(0, 1)`` plus a linear function of the context; ``W`` (5x4)
    starts ``N(0, 1/4)``, ``V`` (3x5) at 0 (the uniform policy); blocks ``W`` and ``V``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4))
    R = _t64(rng.standard_normal((40, 3)) + Xn @ rng.standard_normal((4, 3)))
    X = _t64(Xn)
    params = {"W": _t64(rng.standard_normal((5, 4)) / 2), "V": _t64(np.zeros((3, 5)))}

    def loss(p):
        """Negative expected reward of the policy."""
        pi = torch.softmax(torch.tanh(X @ p["W"].T) @ p["V"].T, dim=1)
        return -(pi * R).sum(1).mean()

    return _task(params, loss, "softmax_policy", seed)


def weibull_survival32(seed: int = 0) -> Task:
    """Negative log-likelihood of a Weibull accelerated-failure-time model with right censoring,
    ``log T = x . w + s e`` (``e`` standard Gumbel-min), 40 subjects of 4 features ``N(0, I)``, a
    third censored; ``w`` starts at 0 and the log scale ``log_s`` at 0; blocks ``w`` and
    ``log_s``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4))
    logt = Xn @ (rng.standard_normal(4) / 2) + 0.5 * np.log(rng.exponential(size=40))
    cens = rng.random(40) < 1 / 3
    logc = np.where(cens, logt - rng.exponential(0.5, size=40), logt)
    X, z, d = _t32(Xn), _t32(logc), _t32((~cens).astype(float))
    params = {"w": _t32(np.zeros(4)), "log_s": _t32(np.zeros(1))}

    def loss(p):
        """Mean negative log-likelihood: density for events, survival for the censored."""
        s = torch.exp(p["log_s"])
        u = (z - X @ p["w"]) / s
        return -(d * (u - p["log_s"]) - torch.exp(u)).mean()

    return _task(params, loss, "weibull_survival32", seed)


def zero_gate_glu(seed: int = 0) -> Task:
    """``1/2 mean((u . ((W x) * sigmoid(V x)) - y)^2)`` on 30 examples of 4 features ``N(0, I)``,
    targets ``tanh`` of a random linear score; ``W`` (5x4) starts at 0, ``V`` (5x4) ``N(0, 1/4)``,
    ``u`` (5) ``N(0, 1/5)``; blocks ``W``, ``V``, ``u`` (the gate's gradient vanishes at the
    start)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 4))
    y = _t64(np.tanh(Xn @ rng.standard_normal(4)))
    X = _t64(Xn)
    params = {"W": _t64(np.zeros((5, 4))), "V": _t64(rng.standard_normal((5, 4)) / 2),
              "u": _t64(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Squared error of the gated unit's read-out (halved)."""
        h = (X @ p["W"].T) * torch.sigmoid(X @ p["V"].T)
        return 0.5 * ((h @ p["u"] - y) ** 2).mean()

    return _task(params, loss, "zero_gate_glu", seed)
