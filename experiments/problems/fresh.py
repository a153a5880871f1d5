"""Fresh problems: kinds added after the certificate's safety factor was chosen, only to test it
(:data:`crosscurv.experiments.problems.zoo.FRESH`; never consulted in any choice).

* ``swish_net``: a 3-5-5-2 SiLU network without biases, one block per layer;
* ``gamma_regression``: a Gamma GLM with a log link, blocks ``w1``, ``w2`` (3 weights each) and
  the bias ``b``;
* ``student_t_regression``: linear regression under a Student-t likelihood (3 degrees of
  freedom: non-convex, bounded influence), two blocks of 3;
* ``bilinear_logistic``: logistic regression with a rank-2 factored weight ``u V^T``, blocks
  ``U`` and ``V`` (a bilinear GLM);
* ``gated_unit``: a gated unit ``(sigmoid(X G^T) * tanh(X W^T)) v``, blocks ``G``, ``W``, ``v``
  (multiplicative gating);
* ``square_activation_net``: ``(X W1^T)^2 W2^T``, blocks ``W1`` and ``W2`` (a polynomial network:
  the loss is of degree 6 in the weights);
* ``rbf_net``: a Gaussian radial-basis network with learned centres, blocks ``centres`` and
  ``weights``;
* ``cosine_classifier``: softmax over scaled cosine similarities ``s cos(x, w_c)``, blocks ``W``
  (scale-invariant) and the log-temperature ``s``.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only; float64.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t, _task
from crosscurv.numeric.task import Task

__all__ = ["swish_net", "gamma_regression", "student_t_regression", "bilinear_logistic",
           "gated_unit", "square_activation_net", "rbf_net", "cosine_classifier"]


def swish_net(seed: int = 0) -> Task:
    """``1/2 mean((silu(silu(X W1^T) W2^T) W3^T - Y)^2)``, widths 3-5-5-2, 16 examples ``N(0, I)``
    with targets ``tanh(N(0, I))``; blocks ``W1``, ``W2``, ``W3``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((16, 3)))
    Y = _t(np.tanh(rng.standard_normal((16, 2))))
    params = {"W1": _t(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "W2": _t(rng.standard_normal((5, 5)) / np.sqrt(5)),
              "W3": _t(rng.standard_normal((2, 5)) / np.sqrt(5))}
    silu = torch.nn.functional.silu

    def loss(p):
        """Squared error of the network (halved)."""
        return 0.5 * ((silu(silu(X @ p["W1"].T) @ p["W2"].T) @ p["W3"].T - Y) ** 2).mean()

    return _task(params, loss, "swish_net", seed)


def gamma_regression(seed: int = 0) -> Task:
    """Mean Gamma negative log-likelihood ``y exp(-z) + z`` (``z = X w + b``, shape fixed) on 40
    examples of 6 features ``N(0, 1/4)``, responses drawn at a random ``w*`` (shape 2); ``w``,
    ``b`` start at 0; blocks ``w1``, ``w2`` (3 weights each) and ``b``."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((40, 6)) / 2
    mean = np.exp(X @ (rng.standard_normal(6) / 2) + 0.5)
    y = _t(rng.gamma(2.0, mean / 2.0))
    X = _t(X)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3)), "b": _t(np.zeros(1))}

    def loss(p):
        """Gamma regression's loss (constant terms dropped)."""
        z = X @ torch.cat([p["w1"], p["w2"]]) + p["b"]
        return (y * torch.exp(-z) + z).mean()

    return _task(params, loss, "gamma_regression", seed)


def student_t_regression(seed: int = 0) -> Task:
    """``mean(log(1 + r^2 / 3))``, ``r = X w - y``, on 30 examples of 6 features ``N(0, I)`` with
    Cauchy noise; ``w`` starts ``N(0, 1/4)``; blocks ``a`` and ``b`` (3 weights each)."""
    rng = np.random.default_rng(int(seed))
    X = rng.standard_normal((30, 6))
    y = _t(X @ rng.standard_normal(6) + 0.5 * rng.standard_cauchy(30))
    X = _t(X)
    params = {"a": _t(rng.standard_normal(3) / 2), "b": _t(rng.standard_normal(3) / 2)}

    def loss(p):
        """Student-t negative log-likelihood (3 degrees of freedom, constants dropped)."""
        r = X @ torch.cat([p["a"], p["b"]]) - y
        return torch.log1p(r**2 / 3.0).mean()

    return _task(params, loss, "student_t_regression", seed)


def bilinear_logistic(seed: int = 0) -> Task:
    """Mean logistic loss of ``x_i^T U V^T z_i`` on 40 pairs ``(x_i, z_i)`` of 4 features ``N(0,
    I)`` each, labels from a random rank-1 ``u* v*^T``; ``U``, ``V`` (4x2) start ``N(0, 1/4)``;
    blocks ``U`` and ``V``."""
    rng = np.random.default_rng(int(seed))
    Xn, Zn = rng.standard_normal((40, 4)), rng.standard_normal((40, 4))
    score = np.einsum("ni,i,j,nj->n", Xn, rng.standard_normal(4), rng.standard_normal(4), Zn)
    y = _t(np.where(score + 0.5 * rng.standard_normal(40) > 0, 1.0, -1.0))
    X, Z = _t(Xn), _t(Zn)
    params = {"U": _t(rng.standard_normal((4, 2)) / 2), "V": _t(rng.standard_normal((4, 2)) / 2)}

    def loss(p):
        """Logistic loss of the bilinear scores."""
        s = ((X @ p["U"]) * (Z @ p["V"])).sum(dim=1)
        return torch.nn.functional.softplus(-y * s).mean()

    return _task(params, loss, "bilinear_logistic", seed)


def gated_unit(seed: int = 0) -> Task:
    """``1/2 mean(((sigmoid(X G^T) * tanh(X W^T)) v - y)^2)`` on 20 examples of 4 features ``N(0,
    I)``, targets ``sin`` of a random projection; ``G``, ``W`` (3x4) start ``N(0, 1/4)``, ``v`` (3)
    ``N(0, 1)``; blocks ``G``, ``W`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 4))
    y = _t(np.sin(Xn @ rng.standard_normal(4)))
    X = _t(Xn)
    params = {"G": _t(rng.standard_normal((3, 4)) / 2), "W": _t(rng.standard_normal((3, 4)) / 2),
              "v": _t(rng.standard_normal(3))}

    def loss(p):
        """Squared error of the gated unit (halved)."""
        h = torch.sigmoid(X @ p["G"].T) * torch.tanh(X @ p["W"].T)
        return 0.5 * ((h @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "gated_unit", seed)


def square_activation_net(seed: int = 0) -> Task:
    """``1/2 mean(((X W1^T)^2 W2^T - Y)^2)``, widths 3-4-2, 20 examples ``N(0, I)`` with targets
    those of a random network of the same form; weights start ``N(0, 1/(2 fan_in))``; blocks
    ``W1`` and ``W2``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 3))
    Y = _t((Xn @ rng.standard_normal((4, 3)).T / np.sqrt(3)) ** 2
           @ rng.standard_normal((2, 4)).T / 2)
    X = _t(Xn)
    params = {"W1": _t(rng.standard_normal((4, 3)) / np.sqrt(6)),
              "W2": _t(rng.standard_normal((2, 4)) / np.sqrt(8))}

    def loss(p):
        """Squared error of the quadratic-activation network (halved)."""
        return 0.5 * ((((X @ p["W1"].T) ** 2) @ p["W2"].T - Y) ** 2).mean()

    return _task(params, loss, "square_activation_net", seed)


def rbf_net(seed: int = 0) -> Task:
    """``1/2 mean((sum_j w_j exp(-|x - c_j|^2 / 2) - y)^2)`` with 4 centres in 2-D on 25 examples
    ``N(0, I)``, targets ``sin(x_1) cos(x_2)``; centres start ``N(0, I)``, weights ``N(0, 1/4)``;
    blocks ``centres`` (4x2) and ``weights`` (4)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((25, 2))
    y = _t(np.sin(Xn[:, 0]) * np.cos(Xn[:, 1]))
    X = _t(Xn)
    params = {"centres": _t(rng.standard_normal((4, 2))),
              "weights": _t(rng.standard_normal(4) / 2)}

    def loss(p):
        """Squared error of the radial-basis network (halved)."""
        d2 = ((X[:, None, :] - p["centres"][None, :, :]) ** 2).sum(dim=2)
        return 0.5 * ((torch.exp(-d2 / 2) @ p["weights"] - y) ** 2).mean()

    return _task(params, loss, "rbf_net", seed)


def cosine_classifier(seed: int = 0) -> Task:
    """Mean cross-entropy of ``softmax(exp(s) cos(x_i, w_c))`` over 3 classes, 30 examples of 4
    features (class means ``N(0, I)`` plus ``N(0, I)`` noise); ``W`` (3x4) starts ``N(0, 1)``, ``s``
    at ``log 2``; blocks ``W`` and ``s``."""
    rng = np.random.default_rng(int(seed))
    labels = rng.integers(0, 3, 30)
    Xn = rng.standard_normal((3, 4))[labels] + rng.standard_normal((30, 4))
    X = _t(Xn / np.linalg.norm(Xn, axis=1, keepdims=True))
    y = torch.tensor(labels)
    params = {"W": _t(rng.standard_normal((3, 4))), "s": _t([np.log(2.0)])}

    def loss(p):
        """Cross-entropy of the scaled cosine logits."""
        w = p["W"] / p["W"].norm(dim=1, keepdim=True)
        return torch.nn.functional.cross_entropy(torch.exp(p["s"]) * (X @ w.T), y)

    return _task(params, loss, "cosine_classifier", seed)
