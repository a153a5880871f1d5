"""Fresh problems of a later round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those of
:mod:`crosscurv.experiments.problems.fresh`): curve fits, likelihoods and a smooth maximum, defined
before any of their runs and never consulted in any choice.

* ``quantile_regression``: a smoothed pinball loss at the 0.8 quantile, two blocks of 3;
* ``logsumexp_max``: a soft maximum of 12 affine functions with a small ridge, three blocks of 2;
* ``weight_norm_net``: a weight-normalised tanh layer, blocks directions ``V``, gains ``g`` and
  the read-out ``u``;
* ``cox_regression``: the Cox partial likelihood (log-sum-exp over risk sets), two blocks of 3;
* ``periodic_fit``: a sinusoid's frequency and phase against its amplitude;
* ``lotka_volterra``: the rates of a predator-prey system fitted through 20 Euler steps, blocks
  ``prey`` and ``predator``;
* ``rational_fit``: a cubic over ``1 + softplus`` of a quadratic, blocks numerator and
  denominator.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only; float64.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t, _task
from crosscurv.experiments.problems.problem import DTYPE
from crosscurv.numeric.task import Task

__all__ = ["quantile_regression", "logsumexp_max", "weight_norm_net", "cox_regression",
           "periodic_fit", "lotka_volterra", "rational_fit"]
def quantile_regression(seed: int = 0) -> Task:
    """Smoothed pinball loss at the 0.8 quantile, ``mean(0.8 r + 0.1 softplus(-10 r))`` (``r = y -
    X w``, a softplus of sharpness 10 in place of the kink), on 40 examples of 6 features ``N(0,
    I)`` with skewed noise; ``w`` starts at 0; blocks ``w1``, ``w2`` (3 weights each)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 6))
    y = _t(Xn @ rng.standard_normal(6) + rng.exponential(1.0, 40))
    X = _t(Xn)
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3))}

    def loss(p):
        """The smoothed pinball loss of the residuals."""
        r = y - X @ torch.cat([p["w1"], p["w2"]])
        return (0.8 * r + 0.1 * torch.nn.functional.softplus(-10 * r)).mean()

    return _task(params, loss, "quantile_regression", seed)


def logsumexp_max(seed: int = 0) -> Task:
    """``log sum_i exp(a_i . x + b_i) + 0.05 |x|^2``, a smooth maximum of 12 affine functions of
    ``x`` in 6 dimensions (``a_i`` ``N(0, I)``, ``b_i`` ``N(0, 1)``); ``x`` starts ``N(0, 1)``;
    blocks ``x1``, ``x2``, ``x3`` (2 coordinates each)."""
    rng = np.random.default_rng(int(seed))
    A, b = _t(rng.standard_normal((12, 6))), _t(rng.standard_normal(12))
    params = {n: _t(rng.standard_normal(2)) for n in ("x1", "x2", "x3")}

    def loss(p):
        """The soft maximum with a small ridge."""
        x = torch.cat([p["x1"], p["x2"], p["x3"]])
        return torch.logsumexp(A @ x + b, 0) + 0.05 * (x**2).sum()

    return _task(params, loss, "logsumexp_max", seed)


def weight_norm_net(seed: int = 0) -> Task:
    """``1/2 mean((tanh(X (g * V / |V|_rows)^T) u - y)^2)``: a weight-normalised hidden layer of 5
    units on 20 examples of 4 features ``N(0, I)``, targets ``tanh`` of a random projection;
    directions ``V`` (5x4) start ``N(0, 1)``, gains ``g`` (5) at 1, ``u`` (5) ``N(0, 1/5)``;
    blocks ``V``, ``g`` and ``u``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((20, 4))
    y = _t(np.tanh(Xn @ rng.standard_normal(4)))
    X = _t(Xn)
    params = {"V": _t(rng.standard_normal((5, 4))), "g": _t(np.ones(5)),
              "u": _t(rng.standard_normal(5) / np.sqrt(5))}

    def loss(p):
        """Squared error of the weight-normalised network (halved)."""
        W = p["g"][:, None] * p["V"] / p["V"].norm(dim=1, keepdim=True)
        return 0.5 * ((torch.tanh(X @ W.T) @ p["u"] - y) ** 2).mean()

    return _task(params, loss, "weight_norm_net", seed)


def cox_regression(seed: int = 0) -> Task:
    """Cox proportional hazards: minus the mean partial log-likelihood ``z_i - log sum_{t_j >= t_i}
    exp(z_j)`` (``z = X w``) over the 20 events among 30 subjects of 6 features ``N(0, 1/4)``,
    times exponential at a random ``w*``; ``w`` starts at 0; blocks ``w1``, ``w2`` (3 each)."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 6)) / 2
    t = rng.exponential(np.exp(-Xn @ rng.standard_normal(6)))
    order = np.argsort(-t)  # latest first: each risk set is a prefix
    X = _t(Xn[order])
    event = torch.tensor(np.isin(np.arange(30), rng.permutation(30)[:20]))
    params = {"w1": _t(np.zeros(3)), "w2": _t(np.zeros(3))}

    def loss(p):
        """Minus the mean partial log-likelihood of the events."""
        z = X @ torch.cat([p["w1"], p["w2"]])
        risk = torch.logcumsumexp(z, 0)
        return -(z - risk)[event].mean()

    return _task(params, loss, "cox_regression", seed)


def periodic_fit(seed: int = 0) -> Task:
    """``1/2 mean((a sin(w x + f) - y)^2)`` on 30 points ``x`` uniform in ``[-2, 2]``, ``y`` a sine
    of frequency 1.5 plus noise; ``(w, f)`` start ``(1.2, 0) + N(0, 0.1^2)``, ``a`` at 0.5;
    blocks ``wf`` (frequency and phase) and ``a`` (the amplitude)."""
    rng = np.random.default_rng(int(seed))
    xn = rng.uniform(-2, 2, 30)
    y = _t(np.sin(1.5 * xn + 0.3) + 0.1 * rng.standard_normal(30))
    x = _t(xn)
    params = {"wf": _t(np.array([1.2, 0.0]) + 0.1 * rng.standard_normal(2)), "a": _t([0.5])}

    def loss(p):
        """Squared error of the sinusoid (halved)."""
        return 0.5 * ((p["a"] * torch.sin(p["wf"][0] * x + p["wf"][1]) - y) ** 2).mean()

    return _task(params, loss, "periodic_fit", seed)


def lotka_volterra(seed: int = 0) -> Task:
    """Fitting the rates of a Lotka-Volterra system by 20 explicit Euler steps of 0.1 from
    ``(1, 0.5)``: ``1/2 mean((traj - obs)^2)`` against a trajectory at random rates near ``(1,
    0.5, 0.5, 1)`` plus noise; rates start at ``(0.8, 0.4, 0.4, 0.8)``; blocks ``prey`` (growth,
    predation) and ``predator`` (conversion, death)."""
    rng = np.random.default_rng(int(seed))
    true = np.array([1.0, 0.5, 0.5, 1.0]) * (1 + 0.1 * rng.standard_normal(4))

    def simulate(prey, pred):
        x, z, out = torch.tensor(1.0, dtype=DTYPE), torch.tensor(0.5, dtype=DTYPE), []
        for _ in range(20):
            x, z = (x + 0.1 * (prey[0] * x - prey[1] * x * z),
                    z + 0.1 * (pred[0] * x * z - pred[1] * z))
            out.append(torch.stack([x, z]))
        return torch.stack(out)

    obs = simulate(_t(true[:2]), _t(true[2:])) + _t(0.02 * rng.standard_normal((20, 2)))
    params = {"prey": _t([0.8, 0.4]), "predator": _t([0.4, 0.8])}

    def loss(p):
        """Squared error of the simulated trajectory (halved)."""
        return 0.5 * ((simulate(p["prey"], p["predator"]) - obs) ** 2).mean()

    return _task(params, loss, "lotka_volterra", seed)


def rational_fit(seed: int = 0) -> Task:
    """``1/2 mean((p(x) / (1 + softplus(q(x))) - y)^2)`` with cubic ``p`` and quadratic ``q`` on
    30 points uniform in ``[-2, 2]``, ``y = tanh(2 x)`` plus noise; coefficients start ``N(0,
    1/16)``; blocks ``num`` (4) and ``den`` (3)."""
    rng = np.random.default_rng(int(seed))
    xn = rng.uniform(-2, 2, 30)
    y = _t(np.tanh(2 * xn) + 0.05 * rng.standard_normal(30))
    V = _t(np.vander(xn, 4, increasing=True))
    params = {"num": _t(rng.standard_normal(4) / 4), "den": _t(rng.standard_normal(3) / 4)}

    def loss(p):
        """Squared error of the rational function (halved)."""
        q = 1 + torch.nn.functional.softplus(V[:, :3] @ p["den"])
        return 0.5 * ((V @ p["num"] / q - y) ** 2).mean()

    return _task(params, loss, "rational_fit", seed)
