"""Fresh problems of a sixteenth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after
those of :mod:`crosscurv.experiments.problems.fresh_scale`): kinds no earlier round has, run at
rates no fresh round used (:data:`LR_FACTORS`: ``0.1``, ``0.6``, ``1.3`` and ``1.95`` over
``lambda_max(H^0)``, the last closer to the edge of stability than any problem's so far); defined
before any of their runs and never consulted in any choice, to test the rule unchanged since round
12. Three are float32 (names ending in 32).

* ``cauchy_regression``: robust regression under the Cauchy loss ``log(1 + r^2)``, the coefficients
  in two blocks;
* ``michaelis_menten``: enzyme kinetics fitted by nonlinear least squares, blocks the log maximal
  rate and the log half-saturation constant;
* ``entropic_ot_dual``: the dual of entropy-regularised optimal transport, blocks the two
  potentials (block coordinate ascent on it is Sinkhorn's algorithm);
* ``tweedie_regression32``: a Tweedie (power 1.5) GLM with log link (float32);
* ``two_exponentials``: a sum of two decaying exponentials, blocks one term each;
* ``nonlinear_autoregression32``: a tanh autoregression of order 3, blocks the linear and the
  nonlinear weights (float32);
* ``monomial_regression``: a cubic fitted on raw monomials, one block per degree;
* ``loglinear_table32``: a Poisson log-linear model of a 4x5 contingency table, blocks row, column
  and interaction effects (float32).

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["cauchy_regression", "michaelis_menten", "entropic_ot_dual", "tweedie_regression32",
           "two_exponentials", "nonlinear_autoregression32", "monomial_regression",
           "loglinear_table32"]

#: the round's learning rates, over ``lambda_max(H^0)``
LR_FACTORS = (0.1, 0.6, 1.3, 1.95)


def cauchy_regression(seed: int = 0) -> Task:
    """Mean ``log(1 + r^2)`` of the residuals of 60 responses on 6 features ``N(0, I)`` (a tenth of
    them outliers ``+-5``); coefficients start ``N(0, 1/4)``; blocks ``b1`` (first three) and
    ``b2`` (the other three and the intercept)."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((60, 6))
    y = x @ rng.standard_normal(6) + 0.3 + 0.3 * rng.standard_normal(60)
    y[rng.random(60) < 0.1] += 5 * rng.choice([-1, 1])
    X1, X2 = _t64(x[:, :3]), _t64(np.concatenate([x[:, 3:], np.ones((60, 1))], 1))
    Y = _t64(y)
    params = {"b1": _t64(0.5 * rng.standard_normal(3)), "b2": _t64(0.5 * rng.standard_normal(4))}

    def loss(p):
        """Mean Cauchy loss."""
        r = Y - X1 @ p["b1"] - X2 @ p["b2"]
        return torch.log1p(r ** 2).mean()

    return _task(params, loss, "cauchy_regression", seed)


def michaelis_menten(seed: int = 0) -> Task:
    """Half the mean squared error of ``v = exp(a) S / (exp(k) + S)`` on 20 substrate levels
    ``S`` log-uniform on ``[0.1, 10]``, rates drawn at ``V = 2``, ``K = 1.5`` with 5% noise; ``a``
    and ``k`` start at ``log 1`` and ``log 0.5`` plus ``N(0, 0.1^2)``; blocks ``a`` and ``k``."""
    rng = np.random.default_rng(int(seed))
    S = np.exp(rng.uniform(np.log(0.1), np.log(10), 20))
    v = 2 * S / (1.5 + S) * (1 + 0.05 * rng.standard_normal(20))
    St, V = _t64(S), _t64(v)
    params = {"a": _t64([0.1 * rng.standard_normal()]),
              "k": _t64([np.log(0.5) + 0.1 * rng.standard_normal()])}

    def loss(p):
        """Mean squared error (halved)."""
        pred = torch.exp(p["a"]) * St / (torch.exp(p["k"]) + St)
        return 0.5 * ((pred - V) ** 2).mean()

    return _task(params, loss, "michaelis_menten", seed)


def entropic_ot_dual(seed: int = 0) -> Task:
    """The negative dual of entropic optimal transport between 6 and 5 points in the plane
    (uniform weights ``a``, ``b``, squared distances ``C``, ``epsilon = 0.5``): ``-(f . a + g . b)
    + epsilon sum_ij a_i b_j exp((f_i + g_j - C_ij) / epsilon)``; potentials start at 0; blocks
    ``f`` and ``g``."""
    rng = np.random.default_rng(int(seed))
    xs, ys = rng.standard_normal((6, 2)), rng.standard_normal((5, 2)) + 0.5
    C = _t64(((xs[:, None] - ys[None]) ** 2).sum(-1))
    a, b = _t64(np.full(6, 1 / 6)), _t64(np.full(5, 1 / 5))
    params = {"f": _t64(np.zeros(6)), "g": _t64(np.zeros(5))}

    def loss(p):
        """Negative dual objective."""
        k = torch.exp((p["f"][:, None] + p["g"][None] - C) / 0.5)
        return -(p["f"] @ a + p["g"] @ b) + 0.5 * (a[:, None] * b[None] * k).sum()

    return _task(params, loss, "entropic_ot_dual", seed)


def tweedie_regression32(seed: int = 0) -> Task:
    """Mean Tweedie negative log-likelihood (power 1.5, log link) of 80 nonnegative responses
    (compound Poisson-gamma, a third exactly 0) on 4 features ``N(0, I)``: ``mu^0.5 / 0.5 + y
    mu^-0.5 / 0.5``; coefficients start at 0; blocks ``w`` (features) and ``c`` (intercept)
    (float32)."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((80, 4))
    mu = np.exp(0.4 * x @ rng.standard_normal(4) + 0.2)
    n = rng.poisson(mu ** 0.5 / 0.5 * 0.7)
    y = np.array([rng.gamma(max(k, 1) * 2.0, 0.4) if k else 0.0 for k in n])
    X, Y = _t32(x), _t32(y)
    params = {"w": _t32(np.zeros(4)), "c": _t32(np.zeros(1))}

    def loss(p):
        """Mean Tweedie negative log-likelihood up to terms free of the parameters."""
        m = torch.exp(X @ p["w"] + p["c"])
        return (m ** 0.5 / 0.5 + Y * m ** -0.5 / 0.5).mean()

    return _task(params, loss, "tweedie_regression32", seed)


def two_exponentials(seed: int = 0) -> Task:
    """Half the mean squared error of ``a1 exp(-exp(l1) t) + a2 exp(-exp(l2) t)`` on 30 times in
    ``[0, 5]``, data at ``(a, rate) = (1, 2)`` and ``(0.5, 0.3)`` with ``N(0, 0.02^2)`` noise;
    start ``(0.8, log 1.5)`` and ``(0.3, log 0.5)`` plus ``N(0, 0.05^2)``; blocks ``t1`` and ``t2``
    (each an amplitude and a log rate)."""
    rng = np.random.default_rng(int(seed))
    t = np.linspace(0, 5, 30)
    y = np.exp(-2 * t) + 0.5 * np.exp(-0.3 * t) + 0.02 * rng.standard_normal(30)
    T, Y = _t64(t), _t64(y)
    params = {"t1": _t64(np.array([0.8, np.log(1.5)]) + 0.05 * rng.standard_normal(2)),
              "t2": _t64(np.array([0.3, np.log(0.5)]) + 0.05 * rng.standard_normal(2))}

    def loss(p):
        """Mean squared error (halved)."""
        pred = sum(p[n][0] * torch.exp(-torch.exp(p[n][1]) * T) for n in ("t1", "t2"))
        return 0.5 * ((pred - Y) ** 2).mean()

    return _task(params, loss, "two_exponentials", seed)


def nonlinear_autoregression32(seed: int = 0) -> Task:
    """Half the mean squared one-step prediction error of a series of 120 steps from ``x_t = 0.6
    x_{t-1} - 0.3 x_{t-2} + 0.8 tanh(x_{t-3}) + N(0, 0.3^2)`` by ``x_t = l . lags + v . tanh(U
    lags)`` (5 hidden units); ``l`` at 0, ``U`` (5x3) ``N(0, 1/3)``, ``v`` ``N(0, 1/5)``; blocks
    ``l`` and ``Uv`` (``U`` and ``v``) (float32)."""
    rng = np.random.default_rng(int(seed))
    x = np.zeros(123)
    for t in range(3, 123):
        noise = 0.3 * rng.standard_normal()
        x[t] = 0.6 * x[t - 1] - 0.3 * x[t - 2] + 0.8 * np.tanh(x[t - 3]) + noise
    lags = np.stack([x[2:122], x[1:121], x[0:120]], 1)
    L, Y = _t32(lags), _t32(x[3:123])
    params = {"l": _t32(np.zeros(3)), "U": _t32(rng.standard_normal((5, 3)) / np.sqrt(3)),
              "v": _t32(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Mean squared one-step error (halved)."""
        pred = L @ p["l"] + torch.tanh(L @ p["U"].T) @ p["v"]
        return 0.5 * ((pred - Y) ** 2).mean()

    return _task(params, loss, "nonlinear_autoregression32", seed,
                 {"l": ["l"], "Uv": ["U", "v"]})


def monomial_regression(seed: int = 0) -> Task:
    """Half the mean squared error of ``c0 + c1 x + c2 x^2 + c3 x^3`` on 40 points ``x`` uniform on
    ``[-1.5, 1.5]``, data from a random cubic plus ``N(0, 0.1^2)``; coefficients start at 0; blocks
    ``c01`` (constant and linear), ``c2``, ``c3`` (raw monomials: an ill-conditioned design)."""
    rng = np.random.default_rng(int(seed))
    x = rng.uniform(-1.5, 1.5, 40)
    y = np.polyval(rng.standard_normal(4), x) + 0.1 * rng.standard_normal(40)
    X, Y = _t64(x), _t64(y)
    params = {"c01": _t64(np.zeros(2)), "c2": _t64(np.zeros(1)), "c3": _t64(np.zeros(1))}

    def loss(p):
        """Mean squared error (halved)."""
        pred = p["c01"][0] + p["c01"][1] * X + p["c2"][0] * X ** 2 + p["c3"][0] * X ** 3
        return 0.5 * ((pred - Y) ** 2).mean()

    return _task(params, loss, "monomial_regression", seed)


def loglinear_table32(seed: int = 0) -> Task:
    """Mean Poisson negative log-likelihood of a 4x5 table of counts, ``log mu_ij = r_i + c_j +
    t_ij`` plus ``0.05 / 2 |t|^2`` (counts drawn with main effects ``N(1.5, 0.5^2)`` and small
    interactions); effects start at 0; blocks ``r``, ``c``, ``t`` (float32)."""
    rng = np.random.default_rng(int(seed))
    lam = np.exp(rng.normal(1.5, 0.5, (4, 1)) + rng.normal(0, 0.5, (1, 5))
                 + 0.3 * rng.standard_normal((4, 5)))
    N = _t32(rng.poisson(lam).astype(float))
    params = {"r": _t32(np.zeros((4, 1))), "c": _t32(np.zeros((1, 5))),
              "t": _t32(np.zeros((4, 5)))}

    def loss(p):
        """Mean Poisson negative log-likelihood plus a ridge on the interactions."""
        eta = p["r"] + p["c"] + p["t"]
        return (torch.exp(eta) - N * eta).mean() + 0.025 * (p["t"] ** 2).sum()

    return _task(params, loss, "loglinear_table32", seed)
