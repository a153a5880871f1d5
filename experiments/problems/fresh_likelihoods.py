"""Fresh problems of a tenth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those
of :mod:`crosscurv.experiments.problems.fresh_structures`): kinds no earlier round has, defined
before any of their runs and never consulted in any choice, to test the rule with the pair's two
read-outs. Three are float32 (names ending in 32).

* ``tucker_decomposition``: a Tucker model of a 4x4x4 tensor, blocks core and the three factors;
* ``zero_inflated_poisson``: a zero-inflated Poisson regression, blocks count and zero weights;
* ``attention_pool32``: attention pooling with a learned query over 6 items (float32);
* ``von_mises_regression``: circular regression under a von Mises likelihood, blocks weights and
  log concentration;
* ``additive_model32``: a neural additive model, one small tanh network per feature (float32);
* ``sparse_autoencoder``: a sigmoid autoencoder with a KL sparsity penalty, blocks encoder and
  decoder;
* ``triplet_embedding``: a two-tower embedding under the softplus triplet loss;
* ``beta_regression32``: beta regression with a logit mean and a log precision (float32).

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["tucker_decomposition", "zero_inflated_poisson", "attention_pool32",
           "von_mises_regression", "additive_model32", "sparse_autoencoder", "triplet_embedding",
           "beta_regression32"]


def tucker_decomposition(seed: int = 0) -> Task:
    """``1/2 mean((G x1 A x2 B x3 C - T)^2)`` for a Tucker target of ranks 2 (4x4x4); core ``G``
    (2x2x2) and factors ``A``, ``B``, ``C`` (4x2) start ``N(0, 1/4)``; blocks ``G``, ``A``, ``B``,
    ``C``."""
    rng = np.random.default_rng(int(seed))
    Gt = rng.standard_normal((2, 2, 2))
    At, Bt, Ct = (rng.standard_normal((4, 2)) for _ in range(3))
    T = _t64(np.einsum("abc,ia,jb,kc->ijk", Gt, At, Bt, Ct))
    params = {"G": _t64(rng.standard_normal((2, 2, 2)) / 2)}
    params.update({n: _t64(rng.standard_normal((4, 2)) / 2) for n in ("A", "B", "C")})

    def loss(p):
        """Mean squared error of the Tucker reconstruction (halved)."""
        fit = torch.einsum("abc,ia,jb,kc->ijk", p["G"], p["A"], p["B"], p["C"])
        return 0.5 * ((fit - T) ** 2).mean()

    return _task(params, loss, "tucker_decomposition", seed)


def zero_inflated_poisson(seed: int = 0) -> Task:
    """Negative log-likelihood of a zero-inflated Poisson regression on 50 examples of 3
    features ``N(0, I)`` (rate ``exp(x . b)``, zero probability ``sigmoid(x . z)``); ``b`` and
    ``z`` start at 0; blocks ``b`` and ``z``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((50, 3))
    lam = np.exp(Xn @ (rng.standard_normal(3) / 2) + 0.5)
    zero = rng.random(50) < 1 / (1 + np.exp(-(Xn @ rng.standard_normal(3) - 0.5)))
    yn = np.where(zero, 0, rng.poisson(lam)).astype(float)
    X, y = _t64(Xn), _t64(yn)
    is0 = y == 0
    params = {"b": _t64(np.zeros(3)), "z": _t64(np.zeros(3))}

    def loss(p):
        """Mean negative log-likelihood up to a constant in the counts."""
        eta, logit = X @ p["b"], X @ p["z"]
        softplus = torch.nn.functional.softplus
        log_pi, log_1mpi = -softplus(-logit), -softplus(logit)
        log_pois = y * eta - torch.exp(eta)
        ll0 = torch.logaddexp(log_pi, log_1mpi - torch.exp(eta))
        return -torch.where(is0, ll0, log_1mpi + log_pois).mean()

    return _task(params, loss, "zero_inflated_poisson", seed)


def attention_pool32(seed: int = 0) -> Task:
    """``1/2 mean((softmax(X_n q) . (X_n V) . u - y_n)^2)`` over 20 sets of 6 items of 3 features
    ``N(0, I)``: a learned query ``q`` (3), values ``V`` (3x3), read-out ``u`` (3), all ``N(0,
    1/3)``; targets the largest first feature of each set; blocks ``q``, ``V`` and ``u``;
    float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 6, 3))
    y = _t32(Xn[:, :, 0].max(1))
    X = _t32(Xn)
    params = {"q": _t32(rng.standard_normal(3) / np.sqrt(3)),
              "V": _t32(rng.standard_normal((3, 3)) / np.sqrt(3)),
              "u": _t32(rng.standard_normal(3) / np.sqrt(3))}

    def loss(p):
        """Squared error of the pooled read-out (halved)."""
        a = torch.softmax(X @ p["q"], dim=1)
        pooled = (a[:, :, None] * (X @ p["V"])).sum(1)
        return 0.5 * ((pooled @ p["u"] - y) ** 2).mean()

    return _task(params, loss, "attention_pool32", seed)


def von_mises_regression(seed: int = 0) -> Task:
    """Negative log-likelihood of angles under a von Mises distribution with mean ``2 atan(x .
    w)`` and concentration ``exp(s)``, ``mean(-kappa cos(y - mu) + log I0(kappa))``, on 40
    examples of 3 features ``N(0, I)``; ``w`` starts at 0 and ``s`` at 0; blocks ``w`` and
    ``s``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    yn = 2 * np.arctan(Xn @ (rng.standard_normal(3) / 2)) + rng.vonmises(0.0, 4.0, 40)
    X, y = _t64(Xn), _t64(yn)
    params = {"w": _t64(np.zeros(3)), "s": _t64(np.zeros(1))}

    def loss(p):
        """Mean von Mises negative log-likelihood up to a constant."""
        kappa = torch.exp(p["s"])
        mu = 2 * torch.atan(X @ p["w"])
        return (-kappa * torch.cos(y - mu) + torch.log(torch.special.i0(kappa))).mean()

    return _task(params, loss, "von_mises_regression", seed)


def additive_model32(seed: int = 0) -> Task:
    """``1/2 mean((sum_j v_j . tanh(a_j x_j + c_j) - y)^2)`` on 40 examples of 3 features ``N(0,
    I)``, one network of 4 tanh units per feature (``a_j``, ``c_j``, ``v_j`` ``N(0, 1/4)``),
    targets ``sin x_1 + x_2^2 / 2 - |x_3|``; one block per feature; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    y = _t32(np.sin(Xn[:, 0]) + Xn[:, 1] ** 2 / 2 - np.abs(Xn[:, 2]))
    X = _t32(Xn)
    params = {f"{n}{j}": _t32(rng.standard_normal(4) / 2) for j in range(3) for n in "acv"}

    def loss(p):
        """Squared error of the sum of the per-feature networks (halved)."""
        out = sum(torch.tanh(X[:, j:j + 1] * p[f"a{j}"] + p[f"c{j}"]) @ p[f"v{j}"]
                  for j in range(3))
        return 0.5 * ((out - y) ** 2).mean()

    return _task(params, loss, "additive_model32", seed,
                 {f"feature{j}": [f"a{j}", f"c{j}", f"v{j}"] for j in range(3)})


def sparse_autoencoder(seed: int = 0) -> Task:
    """``1/2 mean(|D sigmoid(E x) - x|^2) + 0.5 KL(0.1 || mean activation)`` on 40 examples of 5
    features (a sparse mixture of 3 directions plus noise); encoder ``E`` (4x5) and decoder ``D``
    (5x4) start ``N(0, 1/5)``; blocks ``E`` and ``D``."""
    rng = np.random.default_rng(int(seed))
    dirs = rng.standard_normal((3, 5))
    codes = rng.standard_normal((40, 3)) * (rng.random((40, 3)) < 0.3)
    X = _t64(codes @ dirs + 0.1 * rng.standard_normal((40, 5)))
    params = {"E": _t64(rng.standard_normal((4, 5)) / np.sqrt(5)),
              "D": _t64(rng.standard_normal((5, 4)) / np.sqrt(5))}

    def loss(p):
        """Reconstruction error (halved) plus the KL sparsity penalty."""
        h = torch.sigmoid(X @ p["E"].T)
        rho = h.mean(0)
        kl = (0.1 * torch.log(0.1 / rho) + 0.9 * torch.log(0.9 / (1 - rho))).sum()
        return 0.5 * ((h @ p["D"].T - X) ** 2).sum(1).mean() + 0.5 * kl

    return _task(params, loss, "sparse_autoencoder", seed)


def triplet_embedding(seed: int = 0) -> Task:
    """``mean softplus(|f(a) - g(p)|^2 - |f(a) - g(n)|^2 + 1)`` over 30 triplets of 4 features:
    positives are noisy copies of anchors, negatives independent ``N(0, I)``; towers ``f(x) =
    tanh(F x)`` and ``g(x) = tanh(G x)`` (``F``, ``G`` 3x4, ``N(0, 1/4)``); blocks ``F`` and
    ``G``."""
    rng = np.random.default_rng(int(seed))
    An = rng.standard_normal((30, 4))
    A, P = _t64(An), _t64(An + 0.3 * rng.standard_normal((30, 4)))
    N = _t64(rng.standard_normal((30, 4)))
    params = {"F": _t64(rng.standard_normal((3, 4)) / 2),
              "G": _t64(rng.standard_normal((3, 4)) / 2)}

    def loss(p):
        """Mean softplus triplet loss with margin 1."""
        fa = torch.tanh(A @ p["F"].T)
        dp = ((fa - torch.tanh(P @ p["G"].T)) ** 2).sum(1)
        dn = ((fa - torch.tanh(N @ p["G"].T)) ** 2).sum(1)
        return torch.nn.functional.softplus(dp - dn + 1.0).mean()

    return _task(params, loss, "triplet_embedding", seed)


def beta_regression32(seed: int = 0) -> Task:
    """Negative log-likelihood of proportions under a beta distribution with mean ``sigmoid(x .
    b)`` and precision ``exp(x . d + 2)``, 40 examples of 3 features ``N(0, I)``; ``b`` and ``d``
    start at 0; blocks ``b`` and ``d``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    m = 1 / (1 + np.exp(-(Xn @ rng.standard_normal(3) / 2)))
    phi = np.exp(2.0 + Xn @ (rng.standard_normal(3) / 4))
    yn = np.clip(rng.beta(m * phi, (1 - m) * phi), 1e-4, 1 - 1e-4)
    X, y = _t32(Xn), _t32(yn)
    params = {"b": _t32(np.zeros(3)), "d": _t32(np.zeros(3))}

    def loss(p):
        """Mean beta negative log-likelihood."""
        mu = torch.sigmoid(X @ p["b"])
        phi = torch.exp(X @ p["d"] + 2.0)
        a, c = mu * phi, (1 - mu) * phi
        ll = (torch.lgamma(phi) - torch.lgamma(a) - torch.lgamma(c)
              + (a - 1) * torch.log(y) + (c - 1) * torch.log1p(-y))
        return -ll.mean()

    return _task(params, loss, "beta_regression32", seed)
