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
  (scale-invariant) and the log-temperature ``s``;
* ``elman_rnn``: a tanh recurrence over 5 steps with a linear read-out, blocks ``U`` (input),
  ``W`` (recurrent) and ``v`` (read-out): the same weights at every step;
* ``linear_ica``: maximum-likelihood ICA, ``-log|det W| + mean(sum log cosh(W x))``, ``W`` in two
  row blocks (a log-determinant couples them);
* ``mixture_of_experts``: two linear experts mixed by a softmax gate, blocks ``G`` (gate) and
  ``E`` (experts);
* ``exponential_loss``: the exponential (boosting) loss of a linear classifier, two blocks of 3
  (curvature growing exponentially along the margins);
* ``elu_net``: a 3-5-5-2 ELU network without biases, one block per layer (a second derivative
  that jumps at 0);
* ``matrix_sensing``: symmetric rank-2 matrix sensing ``1/2 mean((<A_i, u u^T + v v^T> - b_i)^2)``,
  blocks ``u`` and ``v`` (quartic, coupled through the sensed sum);
* ``tied_autoencoder``: ``W^T tanh(W x + c)`` with the same ``W`` in both layers, blocks ``W`` and
  ``c``;
* ``lstm_cell``: an LSTM cell over 4 steps, blocks the gates, the candidate and the read-out;
* ``ordinal_regression``: cumulative-logit regression with ordered thresholds, blocks ``w`` and
  the thresholds;
* ``batchnorm_net``: a tanh network with batch normalisation (statistics over the examples),
  one block per layer;
* ``contrastive_pairs``: InfoNCE between two linear encoders of paired views, blocks ``A`` and
  ``B``;
* ``negative_binomial``: negative-binomial regression with a learned dispersion, blocks ``w``
  and ``s``;
* ``sparse_coding``: a dictionary and its codes under a smoothed L1 penalty, blocks ``D`` and
  ``Z``;
* ``nonneg_factorisation``: a factorisation through ``softplus`` factors, blocks ``U`` and ``V``.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only; float64.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t, _task, two_hidden_net
from crosscurv.numeric.task import Task

__all__ = ["swish_net", "gamma_regression", "student_t_regression", "bilinear_logistic",
           "gated_unit", "square_activation_net", "rbf_net", "cosine_classifier", "elman_rnn",
           "linear_ica", "mixture_of_experts", "exponential_loss", "elu_net", "matrix_sensing",
           "tied_autoencoder", "lstm_cell", "ordinal_regression", "batchnorm_net",
           "contrastive_pairs", "negative_binomial", "sparse_coding", "nonneg_factorisation"]


def swish_net(seed: int = 0) -> Task:
    """:func:`crosscurv.experiments.problems.beyond.two_hidden_net` with SiLU activations and
    targets ``tanh(N(0, I))``."""
    return two_hidden_net(seed, torch.nn.functional.silu, np.tanh, "swish_net")


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


def elman_rnn(seed: int = 0) -> Task:
    """``1/2 mean((v . h_5 - y)^2)``, ``h_{t+1} = tanh(W h_t + U x_t)``, ``h_0 = 0``, on 12
    sequences of 5 inputs of 2 features ``N(0, I)``, targets ``tanh`` of their sum's first
    feature; ``U`` (4x2) starts ``N(0, 1/2)``, ``W`` (4x4) ``N(0, 1/16)``, ``v`` (4) ``N(0,
    1/4)``; blocks ``U``, ``W`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((12, 5, 2))
    y = _t(np.tanh(Xn.sum(axis=1)[:, 0] / 2))
    X = _t(Xn)
    params = {"U": _t(rng.standard_normal((4, 2)) / np.sqrt(2)),
              "W": _t(rng.standard_normal((4, 4)) / 4), "v": _t(rng.standard_normal(4) / 2)}

    def loss(p):
        """Squared error of the recurrence's read-out (halved)."""
        h = torch.zeros(12, 4, dtype=X.dtype)
        for t in range(5):
            h = torch.tanh(h @ p["W"].T + X[:, t] @ p["U"].T)
        return 0.5 * ((h @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "elman_rnn", seed)


def linear_ica(seed: int = 0) -> Task:
    """``-log|det W| + mean(sum_j log cosh((W x_i)_j))`` on 40 mixtures ``x_i = A s_i / 2`` of 3
    Laplace sources (``A`` with ``N(0, 1)`` entries plus ``2 I``); ``W`` starts ``I / 2 + N(0,
    1/100)``; blocks ``Wa`` (its first row) and ``Wb`` (the other two)."""
    rng = np.random.default_rng(int(seed))
    A = rng.standard_normal((3, 3)) + 2 * np.eye(3)
    X = _t(rng.laplace(size=(40, 3)) @ A.T / 2)
    W0 = np.eye(3) / 2 + rng.standard_normal((3, 3)) / 10
    params = {"Wa": _t(W0[:1]), "Wb": _t(W0[1:])}

    def loss(p):
        """The ICA negative log-likelihood (``log cosh z = softplus(2 z) - z - log 2``, constants
        dropped)."""
        W = torch.cat([p["Wa"], p["Wb"]])
        z = X @ W.T
        lc = torch.nn.functional.softplus(2 * z) - z
        return -torch.linalg.slogdet(W)[1] + lc.sum(dim=1).mean()

    return _task(params, loss, "linear_ica", seed)


def mixture_of_experts(seed: int = 0) -> Task:
    """``1/2 mean((sum_e softmax(G x)_e (E x)_e - y)^2)`` with 2 experts on 30 examples of 4
    features ``N(0, I)``, targets ``|x . a| / 2`` for a random ``a``; ``G``, ``E`` (2x4) start
    ``N(0, 1/4)``; blocks ``G`` and ``E``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 4))
    y = _t(np.abs(Xn @ rng.standard_normal(4)) / 2)
    X = _t(Xn)
    params = {"G": _t(rng.standard_normal((2, 4)) / 2), "E": _t(rng.standard_normal((2, 4)) / 2)}

    def loss(p):
        """Squared error of the gated mixture (halved)."""
        gate = torch.softmax(X @ p["G"].T, dim=1)
        return 0.5 * (((gate * (X @ p["E"].T)).sum(dim=1) - y) ** 2).mean()

    return _task(params, loss, "mixture_of_experts", seed)


def exponential_loss(seed: int = 0) -> Task:
    """``mean(exp(-y_i x_i . w))`` on 30 examples of 6 features ``N(0, 1/4)``, labels of a random
    ``w*`` with a fifth flipped (not separable); ``w`` starts at 0; blocks ``w1``, ``w2`` (3
    weights each)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 6)) / 2
    y = np.sign(Xn @ rng.standard_normal(6))
    y[rng.permutation(30)[:6]] *= -1
    X, Y = _t(Xn), _t(y)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3))}

    def loss(p):
        """The exponential loss of the margins."""
        return torch.exp(-Y * (X @ torch.cat([p["w1"], p["w2"]]))).mean()

    return _task(params, loss, "exponential_loss", seed)


def elu_net(seed: int = 0) -> Task:
    """:func:`crosscurv.experiments.problems.beyond.two_hidden_net` with ELU activations (a second
    derivative that jumps at 0) and targets ``tanh(N(0, I))``."""
    return two_hidden_net(seed, torch.nn.functional.elu, np.tanh, "elu_net")


def matrix_sensing(seed: int = 0) -> Task:
    """``1/2 mean((<A_i, u u^T + v v^T> - b_i)^2)`` for 30 symmetric sensing matrices ``A_i``
    (5x5, ``N(0, 1/2)`` entries symmetrised) and ``b_i`` those of a random rank-2 ``M*``; ``u``,
    ``v`` (5) start ``N(0, 1/4)``; blocks ``u`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    G = rng.standard_normal((30, 5, 5)) / np.sqrt(2)
    A = (G + G.transpose(0, 2, 1)) / 2
    F = rng.standard_normal((5, 2)) / np.sqrt(2)
    b = _t(np.einsum("nij,ij->n", A, F @ F.T))
    A = _t(A)
    params = {"u": _t(rng.standard_normal(5) / 2), "v": _t(rng.standard_normal(5) / 2)}

    def loss(p):
        """Squared error of the sensed measurements (halved)."""
        M = torch.outer(p["u"], p["u"]) + torch.outer(p["v"], p["v"])
        return 0.5 * ((torch.einsum("nij,ij->n", A, M) - b) ** 2).mean()

    return _task(params, loss, "matrix_sensing", seed)


def tied_autoencoder(seed: int = 0) -> Task:
    """``1/2 mean((tanh(X W^T + c) W - X)^2)`` on 20 examples of 5 features ``N(0, I)``; ``W``
    (3x5) starts ``N(0, 1/5)``, ``c`` (3) at 0; blocks ``W`` (both layers) and ``c``."""
    rng = np.random.default_rng(int(seed))
    X = _t(rng.standard_normal((20, 5)))
    params = {"W": _t(rng.standard_normal((3, 5)) / np.sqrt(5)), "c": _t(np.zeros(3))}

    def loss(p):
        """Reconstruction error of the tied autoencoder (halved)."""
        return 0.5 * ((torch.tanh(X @ p["W"].T + p["c"]) @ p["W"] - X) ** 2).mean()

    return _task(params, loss, "tied_autoencoder", seed)


def lstm_cell(seed: int = 0) -> Task:
    """``1/2 mean((v . h_4 - y)^2)`` of an LSTM cell over 4 steps of 2 inputs ``N(0, I)``
    (``c <- sigmoid(F u) * c + sigmoid(I u) * tanh(G u)``, ``h = tanh(c)``, ``u = [x_t, h]``),
    12 sequences, targets ``tanh`` of their last input's first feature plus the first's second;
    ``F``, ``I``, ``G`` (3x5) start ``N(0, 1/5)``, ``v`` (3) ``N(0, 1/4)``; blocks ``F`` and ``I``
    (the gates), ``G`` and ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((12, 4, 2))
    y = _t(np.tanh(Xn[:, -1, 0] + Xn[:, 0, 1]))
    X = _t(Xn)
    params = {n: _t(rng.standard_normal((3, 5)) / np.sqrt(5)) for n in ("F", "I", "G")}
    params["v"] = _t(rng.standard_normal(3) / 2)

    def loss(p):
        """Squared error of the cell's read-out (halved)."""
        h = c = torch.zeros(12, 3, dtype=X.dtype)
        for t in range(4):
            u = torch.cat([X[:, t], h], dim=1)
            c = torch.sigmoid(u @ p["F"].T) * c + torch.sigmoid(u @ p["I"].T) * torch.tanh(
                u @ p["G"].T)
            h = torch.tanh(c)
        return 0.5 * ((h @ p["v"] - y) ** 2).mean()

    return _task(params, loss, "lstm_cell", seed, {"gates": ["F", "I"], "G": ["G"], "v": ["v"]})


def ordinal_regression(seed: int = 0) -> Task:
    """Cumulative-logit ordinal regression over 4 ordered classes on 40 examples of 5 features
    ``N(0, I)``: ``P(y <= j) = sigmoid(t_j - x . w)`` with thresholds ``t = (a, a + exp(b_1), a +
    exp(b_1) + exp(b_2))``; labels from a random ``w*``; ``w`` starts at 0, ``a`` at -1, ``b`` at
    0; blocks ``w`` and the thresholds ``(a, b)``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 5))
    z = Xn @ rng.standard_normal(5) + rng.logistic(size=40)
    y = torch.tensor(np.digitize(z, [-1.0, 0.0, 1.0]))
    X = _t(Xn)
    params = {"w": _t(np.zeros(5)), "a": _t([-1.0]), "b": _t(np.zeros(2))}

    def loss(p):
        """Mean negative log-likelihood of the observed classes."""
        t = torch.cat([p["a"], p["a"] + torch.cumsum(torch.exp(p["b"]), 0)])
        cdf = torch.sigmoid(t[None, :] - (X @ p["w"])[:, None])
        one = torch.ones(40, 1, dtype=X.dtype)
        probs = torch.cat([cdf, one], dim=1) - torch.cat([0 * one, cdf], dim=1)
        return -torch.log(probs.gather(1, y[:, None]).clamp_min(1e-300)).mean()

    return _task(params, loss, "ordinal_regression", seed,
                 {"w": ["w"], "thresholds": ["a", "b"]})


def batchnorm_net(seed: int = 0) -> Task:
    """``1/2 mean((tanh(BN(X W1^T)) W2^T - y)^2)`` with batch normalisation over the 24 examples
    (mean 0, variance 1 per unit, ``eps = 1e-5``, no affine part), widths 4-6-1, inputs ``N(0,
    I)``, targets ``sin`` of a random projection; weights ``N(0, 1/fan_in)``; blocks ``W1`` and
    ``W2`` (the statistics couple the examples)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((24, 4))
    y = _t(np.sin(Xn @ rng.standard_normal(4)))
    X = _t(Xn)
    params = {"W1": _t(rng.standard_normal((6, 4)) / 2),
              "W2": _t(rng.standard_normal(6) / np.sqrt(6))}

    def loss(p):
        """Squared error of the batch-normalised network (halved)."""
        z = X @ p["W1"].T
        z = (z - z.mean(dim=0)) / torch.sqrt(z.var(dim=0, unbiased=False) + 1e-5)
        return 0.5 * ((torch.tanh(z) @ p["W2"] - y) ** 2).mean()

    return _task(params, loss, "batchnorm_net", seed)


def contrastive_pairs(seed: int = 0) -> Task:
    """InfoNCE between two linear encoders: cross-entropy of ``(X A^T)(Z B^T)^T / 0.5`` against
    the diagonal, on 16 pairs of views ``x_i``, ``z_i`` (4 and 5 features) of a shared 3-d latent
    plus noise; ``A`` (3x4), ``B`` (3x5) start ``N(0, 1/4)``; blocks ``A`` and ``B``."""
    rng = np.random.default_rng(int(seed))
    s = rng.standard_normal((16, 3))
    X = _t(s @ rng.standard_normal((3, 4)) + 0.3 * rng.standard_normal((16, 4)))
    Z = _t(s @ rng.standard_normal((3, 5)) + 0.3 * rng.standard_normal((16, 5)))
    params = {"A": _t(rng.standard_normal((3, 4)) / 2), "B": _t(rng.standard_normal((3, 5)) / 2)}
    target = torch.arange(16)

    def loss(p):
        """The InfoNCE loss of the paired views."""
        logits = (X @ p["A"].T) @ (Z @ p["B"].T).T / 0.5
        return torch.nn.functional.cross_entropy(logits, target)

    return _task(params, loss, "contrastive_pairs", seed)


def negative_binomial(seed: int = 0) -> Task:
    """Negative-binomial regression (log link ``mu = exp(x . w)``, log-dispersion ``r = exp(s)``)
    on 40 examples of 4 features ``N(0, 1/4)``, counts drawn at a random ``w*`` with ``r = 2``;
    ``w`` starts at 0, ``s`` at 0; blocks ``w`` and ``s``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4)) / 2
    mu = np.exp(Xn @ rng.standard_normal(4) + 1.0)
    y = _t(rng.negative_binomial(2.0, 2.0 / (2.0 + mu)))
    X = _t(Xn)
    params = {"w": _t(np.zeros(4)), "s": _t([0.0])}

    def loss(p):
        """Mean negative log-likelihood (``log y!`` dropped; ``lgamma(y + r) - lgamma(r)`` kept:
        ``r`` is learned)."""
        r, eta = torch.exp(p["s"]), X @ p["w"]
        ll = (torch.lgamma(y + r) - torch.lgamma(r) + r * (p["s"] - torch.logaddexp(p["s"], eta))
              + y * (eta - torch.logaddexp(p["s"], eta)))
        return -ll.mean()

    return _task(params, loss, "negative_binomial", seed)


def sparse_coding(seed: int = 0) -> Task:
    """``1/2 mean((Z D^T - X)^2) + 0.1 mean(sqrt(Z^2 + 0.01))`` (a smoothed L1 penalty) for 15
    signals of 6 features built from 4 sparse atoms; dictionary ``D`` (6x4) starts ``N(0, 1/4)``,
    codes ``Z`` (15x4) ``N(0, 1/16)``; blocks ``D`` and ``Z``."""
    rng = np.random.default_rng(int(seed))
    codes = rng.standard_normal((15, 4)) * (rng.random((15, 4)) < 0.4)
    X = _t(codes @ rng.standard_normal((4, 6)))
    params = {"D": _t(rng.standard_normal((6, 4)) / 2), "Z": _t(rng.standard_normal((15, 4)) / 4)}

    def loss(p):
        """Reconstruction error plus the smoothed sparsity penalty."""
        fit = 0.5 * ((p["Z"] @ p["D"].T - X) ** 2).mean()
        return fit + 0.1 * torch.sqrt(p["Z"] ** 2 + 0.01).mean()

    return _task(params, loss, "sparse_coding", seed)


def nonneg_factorisation(seed: int = 0) -> Task:
    """``1/2 mean((softplus(U) softplus(V)^T - M)^2)`` for a nonnegative rank-2 ``M`` (8x6);
    ``U`` (8x2), ``V`` (6x2) start ``N(0, 1/4)``; blocks ``U`` and ``V`` (a factorisation through
    a positive reparametrisation)."""
    rng = np.random.default_rng(int(seed))
    M = _t(rng.random((8, 2)) @ rng.random((2, 6)))
    params = {"U": _t(rng.standard_normal((8, 2)) / 2), "V": _t(rng.standard_normal((6, 2)) / 2)}
    sp = torch.nn.functional.softplus

    def loss(p):
        """Reconstruction error of the nonnegative factors (halved)."""
        return 0.5 * ((sp(p["U"]) @ sp(p["V"]).T - M) ** 2).mean()

    return _task(params, loss, "nonneg_factorisation", seed)
