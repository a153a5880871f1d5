"""Fresh problems of a sixth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those of
:mod:`crosscurv.experiments.problems.fresh_fits`): models an outside user brings, defined before
any of their runs and never consulted in any choice.

* ``multihead_attention``: two softmax attention heads over 5 tokens, blocks queries and keys,
  values, the read-out;
* ``gru_cell``: a gated recurrent unit over 4 steps, blocks gates, candidate and read-out;
* ``skipgram_embeddings``: word2vec's skip-gram with negative sampling, blocks input and output
  embeddings;
* ``variational_regression``: the negative ELBO of Bayesian linear regression under a mean-field
  Gaussian, blocks means and log standard deviations;
* ``factorisation_machine``: a logistic factorisation machine, blocks linear weights and factors;
* ``mixed_effects``: the marginal likelihood of a random-intercept model, blocks fixed effects and
  the two log variances;
* ``focal_loss``: a linear two-class classifier under the focal loss (``gamma = 2``), two blocks
  of 3 weights.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only; float64.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t, _task
from crosscurv.numeric.task import Task

__all__ = ["multihead_attention", "gru_cell", "skipgram_embeddings", "variational_regression",
           "factorisation_machine", "mixed_effects", "focal_loss"]


def multihead_attention(seed: int = 0) -> Task:
    """``1/2 mean((sum_h softmax(Q_h K_h^T / sqrt 2) V_h)[:, 0] . u - y)^2)`` over 10 sequences of
    5 tokens of 4 features ``N(0, I)``, two heads of width 2 written out (matrix products and a
    softmax, no fused kernel); targets ``tanh`` of the mean first feature plus the last token's
    second; ``Wq``, ``Wk``, ``Wv`` (2x4x2) start ``N(0, 1/4)``, ``u`` (2) ``N(0, 1/2)``; blocks
    ``qk`` (``Wq``, ``Wk``), ``Wv`` and ``u``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((10, 5, 4))
    y = _t(np.tanh(Xn[:, :, 0].mean(1) + Xn[:, -1, 1]))
    X = _t(Xn)
    params = {n: _t(rng.standard_normal((2, 4, 2)) / 2) for n in ("Wq", "Wk", "Wv")}
    params["u"] = _t(rng.standard_normal(2) / np.sqrt(2))

    def loss(p):
        """Squared error of the first token's read-out (halved)."""
        out = 0
        for h in range(2):
            q, k, v = (X @ p[n][h] for n in ("Wq", "Wk", "Wv"))
            a = torch.softmax(q @ k.transpose(1, 2) / np.sqrt(2), dim=-1)
            out = out + (a @ v)[:, 0]
        return 0.5 * ((out @ p["u"] - y) ** 2).mean()

    return _task(params, loss, "multihead_attention", seed,
                 {"qk": ["Wq", "Wk"], "Wv": ["Wv"], "u": ["u"]})


def gru_cell(seed: int = 0) -> Task:
    """``1/2 mean((v . h_4 - y)^2)`` of a GRU over 4 steps of 2 inputs ``N(0, I)`` (``z =
    sigmoid(Z u)``, ``r = sigmoid(R u)``, ``h <- (1 - z) h + z tanh(C [x, r h])``, ``u = [x,
    h]``), 12 sequences, targets ``tanh`` of the first input's first feature minus the last's
    second; ``Z``, ``R``, ``C`` (3x5) start ``N(0, 1/5)``, ``v`` (3) ``N(0, 1/4)``; blocks ``gates``
    (``Z``, ``R``), ``C`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((12, 4, 2))
    y = _t(np.tanh(Xn[:, 0, 0] - Xn[:, -1, 1]))
    X = _t(Xn)
    params = {n: _t(rng.standard_normal((3, 5)) / np.sqrt(5)) for n in ("Z", "R", "C")}
    params["v"] = _t(rng.standard_normal(3) / 2)

    def loss(p):
        """Squared error of the unit's read-out (halved)."""
        h = torch.zeros(12, 3, dtype=X.dtype)
        for t in range(4):
            u = torch.cat([X[:, t], h], dim=1)
            z, r = torch.sigmoid(u @ p["Z"].T), torch.sigmoid(u @ p["R"].T)
            c = torch.tanh(torch.cat([X[:, t], r * h], dim=1) @ p["C"].T)
            h = (1 - z) * h + z * c
        return 0.5 * ((h @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "gru_cell", seed, {"gates": ["Z", "R"], "C": ["C"], "v": ["v"]})


def skipgram_embeddings(seed: int = 0) -> Task:
    """Skip-gram with negative sampling on 8 words in dimension 3: ``-mean(log sigmoid(e_i .
    o_j))`` over 24 observed (word, context) pairs from a random co-occurrence table, plus the
    same with ``-e_i . o_n`` over 3 negatives per pair, plus ``0.01 (|E|^2 + |O|^2)``; ``E``,
    ``O`` (8x3) start ``N(0, 1/9)``; blocks ``E`` and ``O``."""
    rng = np.random.default_rng(int(seed))
    weights = rng.dirichlet(np.ones(8), 8)
    words = rng.integers(0, 8, 24)
    ctx = torch.tensor([rng.choice(8, p=weights[w]) for w in words])
    neg = torch.tensor(rng.integers(0, 8, (24, 3)))
    words = torch.tensor(words)
    params = {"E": _t(rng.standard_normal((8, 3)) / 3), "O": _t(rng.standard_normal((8, 3)) / 3)}

    def loss(p):
        """Negative-sampling loss with a small ridge."""
        e = p["E"][words]
        pos = torch.nn.functional.logsigmoid((e * p["O"][ctx]).sum(1))
        negs = torch.nn.functional.logsigmoid(-(e[:, None] * p["O"][neg]).sum(2)).sum(1)
        ridge = 0.01 * ((p["E"] ** 2).sum() + (p["O"] ** 2).sum())
        return -(pos + negs).mean() + ridge

    return _task(params, loss, "skipgram_embeddings", seed)


def variational_regression(seed: int = 0) -> Task:
    """The negative ELBO of Bayesian linear regression (noise variance 1/4, prior ``N(0, I)``) on
    30 examples of 5 features ``N(0, I)`` under ``q = N(m, diag(exp(2 s)))``, the expected
    log-likelihood in closed form, divided by 30; ``m`` starts at 0, ``s`` at -1; blocks ``m`` and
    ``s``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 5))
    y = _t(Xn @ rng.standard_normal(5) + 0.5 * rng.standard_normal(30))
    X = _t(Xn)
    params = {"m": _t(np.zeros(5)), "s": _t(-np.ones(5))}

    def loss(p):
        """Expected squared error plus the KL divergence to the prior, per example."""
        var = torch.exp(2 * p["s"])
        fit = 2.0 * (((y - X @ p["m"]) ** 2).sum() + (X**2 @ var).sum())
        kl = 0.5 * (var + p["m"] ** 2 - 1 - 2 * p["s"]).sum()
        return (fit + kl) / 30

    return _task(params, loss, "variational_regression", seed)


def factorisation_machine(seed: int = 0) -> Task:
    """A logistic factorisation machine ``f(x) = w . x + 1/2 sum_f ((x . V_f)^2 - (x^2 . V_f^2))``
    on 40 examples of 6 features ``N(0, I)``, labels from a random FM, mean logistic loss plus
    ``0.01 |V|^2``; ``w`` starts at 0, ``V`` (6x2) ``N(0, 1/4)``; blocks ``w`` and ``V``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 6))

    def fm(x, w, V):
        return x @ w + 0.5 * (((x @ V) ** 2) - (x**2) @ (V**2)).sum(-1)

    z = fm(Xn, rng.standard_normal(6), rng.standard_normal((6, 2)) / 2)
    y = _t(np.where(z + rng.logistic(size=40) > 0, 1.0, -1.0))
    X = _t(Xn)
    params = {"w": _t(np.zeros(6)), "V": _t(rng.standard_normal((6, 2)) / 2)}

    def loss(p):
        """Mean logistic loss of the factorisation machine with a small ridge on the factors."""
        f = fm(X, p["w"], p["V"])
        return torch.nn.functional.softplus(-y * f).mean() + 0.01 * (p["V"] ** 2).sum()

    return _task(params, loss, "factorisation_machine", seed)


def mixed_effects(seed: int = 0) -> Task:
    """The negative log marginal likelihood of a random-intercept model, 6 groups of 5 examples of
    3 features ``N(0, I)``: ``y_g ~ N(X_g b, exp(2 a) 11^T + exp(2 e) I)``, divided by 30; ``b``
    starts at 0, the log standard deviations ``a``, ``e`` at 0; blocks ``b`` and ``logsd`` (``a``,
    ``e``)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((6, 5, 3))
    yn = Xn @ rng.standard_normal(3) + rng.standard_normal((6, 1)) + 0.5 * rng.standard_normal(
        (6, 5))
    X, y = _t(Xn), _t(yn)
    params = {"b": _t(np.zeros(3)), "a": _t([0.0]), "e": _t([0.0])}
    ones = torch.ones(5, 5, dtype=X.dtype)
    eye = torch.eye(5, dtype=X.dtype)

    def loss(p):
        """Gaussian negative log-likelihood of every group's residuals (constants dropped)."""
        cov = torch.exp(2 * p["a"]) * ones + torch.exp(2 * p["e"]) * eye
        r = (y - X @ p["b"]).unsqueeze(-1)
        quad = (r.transpose(1, 2) @ torch.linalg.solve(cov, r)).sum()
        return 0.5 * (quad + 6 * torch.logdet(cov)) / 30

    return _task(params, loss, "mixed_effects", seed, {"b": ["b"], "logsd": ["a", "e"]})


def focal_loss(seed: int = 0) -> Task:
    """The focal loss ``-mean((1 - p_t)^2 log p_t)`` (``p_t = sigmoid(y x . w)``) of a linear
    classifier on 40 examples of 6 features ``N(0, I)`` with labels from a random ``w*`` and 10%
    flipped, plus ``0.01 |w|^2``; ``w`` starts ``N(0, 1/4)``; blocks ``w1``, ``w2`` (3 weights
    each)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 6))
    yn = np.sign(Xn @ rng.standard_normal(6) + 1e-12)
    yn[rng.random(40) < 0.1] *= -1
    X, y = _t(Xn), _t(yn)
    w = rng.standard_normal(6) / 2
    params = {"w1": _t(w[:3]), "w2": _t(w[3:])}

    def loss(p):
        """Mean focal loss with a small ridge."""
        m = y * (X @ torch.cat([p["w1"], p["w2"]]))
        pt = torch.sigmoid(m)
        return -((1 - pt) ** 2 * torch.nn.functional.logsigmoid(m)).mean() + 0.01 * (
            (p["w1"] ** 2).sum() + (p["w2"] ** 2).sum())

    return _task(params, loss, "focal_loss", seed)
