"""Fresh problems of an eleventh round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after
those of :mod:`crosscurv.experiments.problems.fresh_likelihoods`): kinds no earlier round has,
most of them a recurrence unrolled inside the loss, defined before any of their runs and never
consulted in any choice, to test the rule unchanged since round 10. Three are float32 (names
ending in 32).

* ``euler_ode_net32``: a neural ODE, five explicit Euler steps of a tanh vector field, blocks
  field and read-out (float32);
* ``system_identification``: a linear dynamical system fitted to an input-output sequence, blocks
  ``A``, ``B`` and ``C``;
* ``linear_chain_crf``: a linear-chain conditional random field by the forward recursion, blocks
  emission and transition weights;
* ``graph_conv32``: a two-layer graph convolution on a random graph (float32);
* ``hawkes_process``: the likelihood of a self-exciting point process, blocks base rate and
  excitation;
* ``poincare_embedding``: a graph embedded in the Poincare ball, blocks head and tail
  embeddings;
* ``temperature_softmax32``: softmax regression with a learned temperature (float32);
* ``multitask_net``: a shared tanh trunk with a regression head and a classification head.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["euler_ode_net32", "system_identification", "linear_chain_crf", "graph_conv32",
           "hawkes_process", "poincare_embedding", "temperature_softmax32", "multitask_net"]


def euler_ode_net32(seed: int = 0) -> Task:
    """``1/2 mean((u . x_5 - y)^2)`` with ``x_0`` the input (3 features ``N(0, I)``, 40 examples)
    and ``x_{t+1} = x_t + 0.2 tanh(W x_t + b)``; ``W`` (3x3) ``N(0, 1/3)``, ``b`` 0, ``u``
    ``N(0, 1/3)``; targets ``tanh(x . v)`` for a random ``v``; blocks field (``W``, ``b``) and
    ``u``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    y = _t32(np.tanh(Xn @ rng.standard_normal(3)))
    X = _t32(Xn)
    params = {"W": _t32(rng.standard_normal((3, 3)) / np.sqrt(3)), "b": _t32(np.zeros(3)),
              "u": _t32(rng.standard_normal(3) / np.sqrt(3))}

    def loss(p):
        """Squared error of the read-out after five Euler steps (halved)."""
        x = X
        for _ in range(5):
            x = x + 0.2 * torch.tanh(x @ p["W"].T + p["b"])
        return 0.5 * ((x @ p["u"] - y) ** 2).mean()

    return _task(params, loss, "euler_ode_net32", seed, {"field": ["W", "b"], "u": ["u"]})


def system_identification(seed: int = 0) -> Task:
    """``1/2 mean_t |C x_t - y_t|^2`` over 15 steps of ``x_{t+1} = A x_t + B u_t`` (``x_0 = 0``,
    inputs ``u_t ~ N(0, 1)``), outputs of a stable 2-state, 2-output system plus noise 0.05;
    ``A`` (2x2) starts ``N(0, 0.09)``, ``B`` (2x1) and ``C`` (2x2) ``N(0, 1/4)``; blocks ``A``,
    ``B``, ``C``."""
    rng = np.random.default_rng(int(seed))
    At = np.array([[0.7, 0.2], [-0.2, 0.6]])
    Bt, Ct = rng.standard_normal((2, 1)), rng.standard_normal((2, 2))
    un = rng.standard_normal((15, 1))
    ys, x = [], np.zeros(2)
    for t in range(15):
        ys.append(Ct @ x + 0.05 * rng.standard_normal(2))
        x = At @ x + Bt @ un[t]
    U, Y = _t64(un), _t64(np.array(ys))
    params = {"A": _t64(0.3 * rng.standard_normal((2, 2))),
              "B": _t64(rng.standard_normal((2, 1)) / 2),
              "C": _t64(rng.standard_normal((2, 2)) / 2)}

    def loss(p):
        """Mean squared output error over the simulated sequence (halved)."""
        x = torch.zeros(2, dtype=U.dtype)
        err = []
        for t in range(15):
            err.append(((p["C"] @ x - Y[t]) ** 2).sum())
            x = p["A"] @ x + p["B"] @ U[t]
        return 0.5 * torch.stack(err).mean()

    return _task(params, loss, "system_identification", seed)


def linear_chain_crf(seed: int = 0) -> Task:
    """Mean negative log-likelihood of 12 label sequences of length 6 (3 labels, 4 features ``N(0,
    I)`` per position, labels from a random emission and a sticky transition) under a linear-chain
    CRF, the partition function by the forward recursion; emission ``W`` (3x4) and transition
    ``T`` (3x3) start at 0; blocks ``W`` and ``T``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((12, 6, 4))
    We = rng.standard_normal((3, 4))
    lab = np.zeros((12, 6), dtype=np.int64)
    for n in range(12):
        for t in range(6):
            s = Xn[n, t] @ We.T + (1.5 * (np.arange(3) == lab[n, t - 1]) if t else 0.0)
            pr = np.exp(s - s.max())
            lab[n, t] = rng.choice(3, p=pr / pr.sum())
    X, Y = _t64(Xn), torch.tensor(lab)
    params = {"W": _t64(np.zeros((3, 4))), "T": _t64(np.zeros((3, 3)))}

    def loss(p):
        """Mean of ``log Z - score(labels)`` over the sequences."""
        em = X @ p["W"].T  # (12, 6, 3)
        score = em.gather(2, Y[:, :, None]).squeeze(2).sum(1)
        score = score + p["T"][Y[:, :-1], Y[:, 1:]].sum(1)
        alpha = em[:, 0]
        for t in range(1, 6):
            alpha = torch.logsumexp(alpha[:, :, None] + p["T"][None], dim=1) + em[:, t]
        return (torch.logsumexp(alpha, dim=1) - score).mean()

    return _task(params, loss, "linear_chain_crf", seed)


def graph_conv32(seed: int = 0) -> Task:
    """``1/2 mean((A_hat tanh(A_hat X W1) w2 - y)^2)`` on a random graph of 15 nodes (edge
    probability 0.25, self-loops, symmetric normalisation ``A_hat``), 4 node features ``N(0,
    I)``, targets a smoothed random linear map; ``W1`` (4x5) ``N(0, 1/4)``, ``w2`` (5)
    ``N(0, 1/5)``; blocks ``W1`` and ``w2``; float32."""
    rng = np.random.default_rng(int(seed))
    adj = np.triu(rng.random((15, 15)) < 0.25, 1)
    adj = adj + adj.T + np.eye(15)
    d = 1 / np.sqrt(adj.sum(1))
    An = d[:, None] * adj * d[None, :]
    Xn = rng.standard_normal((15, 4))
    y = _t32(An @ np.tanh(An @ Xn @ rng.standard_normal(4)))
    A, X = _t32(An), _t32(Xn)
    params = {"W1": _t32(rng.standard_normal((4, 5)) / 2),
              "w2": _t32(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Squared error of the node read-outs (halved)."""
        return 0.5 * ((A @ torch.tanh(A @ X @ p["W1"]) @ p["w2"] - y) ** 2).mean()

    return _task(params, loss, "graph_conv32", seed)


def hawkes_process(seed: int = 0) -> Task:
    """Negative log-likelihood (per event) of about 40 event times on ``[0, 20]`` under a Hawkes
    process with intensity ``mu + alpha sum_{t_i < t} beta exp(-beta (t - t_i))``, ``mu =
    softplus(a)``, ``alpha = sigmoid(c)``, ``beta = softplus(d)``; the events simulated by
    thinning at ``mu = 1, alpha = 0.5, beta = 1.5``; ``a`` starts at 0, ``(c, d)`` at ``(0,
    0.5)``; blocks base rate ``a`` and excitation ``(c, d)``."""
    rng = np.random.default_rng(int(seed))
    ts, t = [], 0.0
    while True:
        lam_bar = 1.0 + 0.75 * sum(np.exp(-1.5 * (t - s)) for s in ts) + 0.75 * 2
        t += rng.exponential(1 / lam_bar)
        if t > 20.0:
            break
        lam = 1.0 + 0.75 * sum(np.exp(-1.5 * (t - s)) for s in ts)
        if rng.random() < lam / lam_bar:
            ts.append(t)
    T = _t64(np.array(ts))
    n = len(ts)
    lag = T[:, None] - T[None, :]
    before = lag > 0
    params = {"a": _t64(np.zeros(1)), "exc": _t64(np.array([0.0, 0.5]))}
    softplus = torch.nn.functional.softplus

    def loss(p):
        """Compensator minus the sum of log-intensities at the events, per event."""
        mu = softplus(p["a"])[0]
        alpha, beta = torch.sigmoid(p["exc"][0]), softplus(p["exc"][1])
        kern = torch.where(before, beta * torch.exp(-beta * lag.clamp(min=0)), 0.0)
        lam = mu + alpha * kern.sum(1)
        comp = mu * 20.0 + alpha * (1 - torch.exp(-beta * (20.0 - T))).sum()
        return (comp - torch.log(lam).sum()) / n

    return _task(params, loss, "hawkes_process", seed, {"base": ["a"], "excitation": ["exc"]})


def poincare_embedding(seed: int = 0) -> Task:
    """Mean ``softplus(d(h_i, t_j) - 1)`` over the edges of a random graph of 10 nodes plus
    ``softplus(1 - d(h_i, t_j))`` over as many non-edges, ``d`` the Poincare-ball distance
    ``arccosh(1 + 2 |u - v|^2 / ((1 - |u|^2)(1 - |v|^2)))`` (finite only inside the ball: a step
    leaving it gives a non-finite loss); head ``H`` and tail embeddings ``Tl`` (10x2) start
    ``N(0, 0.01)``; blocks ``H`` and ``Tl``."""
    rng = np.random.default_rng(int(seed))
    pos = rng.random((10, 10)) < 0.3
    np.fill_diagonal(pos, False)
    ei, ej = np.nonzero(pos)
    ni, nj = np.nonzero(~pos & ~np.eye(10, dtype=bool))
    pick = rng.choice(len(ni), size=len(ei), replace=False)
    I, J = torch.tensor(np.r_[ei, ni[pick]]), torch.tensor(np.r_[ej, nj[pick]])
    sign = _t64(np.r_[np.ones(len(ei)), -np.ones(len(ei))])
    params = {"H": _t64(0.1 * rng.standard_normal((10, 2))),
              "Tl": _t64(0.1 * rng.standard_normal((10, 2)))}

    def loss(p):
        """Mean softplus margin loss on the hyperbolic distances."""
        u, v = p["H"][I], p["Tl"][J]
        den = (1 - (u ** 2).sum(1)) * (1 - (v ** 2).sum(1))
        dist = torch.acosh(1 + 2 * ((u - v) ** 2).sum(1) / den)
        return torch.nn.functional.softplus(sign * (dist - 1.0)).mean()

    return _task(params, loss, "poincare_embedding", seed)


def temperature_softmax32(seed: int = 0) -> Task:
    """Mean cross-entropy of ``softmax(exp(s) X W^T)`` over 3 classes on 50 examples of 4 features
    ``N(0, I)``, labels from a random linear map with noise; ``W`` (3x4) ``N(0, 1/4)``, ``s``
    (the log inverse temperature) at 0; blocks ``W`` and ``s``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((50, 4))
    lab = (Xn @ rng.standard_normal((4, 3)) + 0.5 * rng.standard_normal((50, 3))).argmax(1)
    X, Y = _t32(Xn), torch.tensor(lab)
    params = {"W": _t32(rng.standard_normal((3, 4)) / 2), "s": _t32(np.zeros(1))}

    def loss(p):
        """Mean cross-entropy at the learned temperature."""
        return torch.nn.functional.cross_entropy(torch.exp(p["s"]) * (X @ p["W"].T), Y)

    return _task(params, loss, "temperature_softmax32", seed)


def multitask_net(seed: int = 0) -> Task:
    """A shared trunk ``h = tanh(X W^T)`` (``W`` 5x4) with a regression head ``r`` (5; squared
    error, halved) and a logistic head ``c`` (5; targets a sign of the features), the two losses
    summed, on 40 examples of 4 features ``N(0, I)``; all ``N(0, 1/fan_in)``; blocks trunk and the
    two heads."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4))
    yr = _t64(np.sin(Xn @ rng.standard_normal(4)))
    yc = _t64((Xn @ rng.standard_normal(4) > 0).astype(float))
    X = _t64(Xn)
    params = {"W": _t64(rng.standard_normal((5, 4)) / 2),
              "r": _t64(rng.standard_normal(5) / np.sqrt(5)),
              "c": _t64(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Regression error (halved) plus the logistic loss of the second head."""
        h = torch.tanh(X @ p["W"].T)
        reg = 0.5 * ((h @ p["r"] - yr) ** 2).mean()
        cls = torch.nn.functional.binary_cross_entropy_with_logits(h @ p["c"], yc)
        return reg + cls

    return _task(params, loss, "multitask_net", seed)
