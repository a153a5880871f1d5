"""Fresh problems of a twelfth round (:data:`crosscurv.experiments.problems.zoo.FRESH`, after those
of :mod:`crosscurv.experiments.problems.fresh_recurrences`): losses whose curvature grows along the
run (a learned scale, temperature or precision, products of parameters), the kind that found the
eleventh round's failure, defined before any of their runs and never consulted in any choice, to
test the rule with the records' rising-loss withdrawal. Three are float32 (names ending in 32).

* ``scaled_logistic``: logistic regression with a learned logit scale on nearly separable data;
* ``diagonal_linear_net``: sparse regression through ``w = u * u - v * v``, blocks ``u``, ``v``;
* ``scalar_chain``: a product of four scalars fitted to a target, one block each;
* ``gaussian_precision_fit``: a tanh regression with a learned noise precision;
* ``attention_temperature32``: attention over 5 items with a learned temperature (float32);
* ``output_scale_mlp32``: a tanh network with a learned output scale (float32);
* ``psd_quadratic_fit32``: a quadratic form ``x . L L^T x`` fitted to targets, ``L``'s two
  columns in two blocks (float32);
* ``growth_curve``: an exponential growth curve ``a exp(b t)``, blocks ``a`` and ``b``.

Every factory takes ``seed`` and draws from ``numpy.random.default_rng(seed)`` only.
"""

from __future__ import annotations

import numpy as np
import torch
from crosscurv.experiments.problems.beyond import _t as _t64
from crosscurv.experiments.problems.beyond import _task
from crosscurv.experiments.problems.fresh_float32 import _t as _t32
from crosscurv.numeric.task import Task

__all__ = ["scaled_logistic", "diagonal_linear_net", "scalar_chain", "gaussian_precision_fit",
           "attention_temperature32", "output_scale_mlp32", "psd_quadratic_fit32",
           "growth_curve"]


def scaled_logistic(seed: int = 0) -> Task:
    """Mean logistic loss of ``exp(s) (x . w)`` on 40 examples of 3 features ``N(0, I)``, labels
    the sign of a random direction with 5% flipped; ``w`` starts ``N(0, 1/3)``, ``s`` at 0;
    blocks ``w`` and ``s``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    yn = np.sign(Xn @ rng.standard_normal(3))
    yn[rng.random(40) < 0.05] *= -1
    X, y = _t64(Xn), _t64(yn)
    params = {"w": _t64(rng.standard_normal(3) / np.sqrt(3)), "s": _t64(np.zeros(1))}

    def loss(p):
        """Mean logistic loss at the learned scale."""
        return torch.nn.functional.softplus(-y * torch.exp(p["s"]) * (X @ p["w"])).mean()

    return _task(params, loss, "scaled_logistic", seed)


def diagonal_linear_net(seed: int = 0) -> Task:
    """``1/2 mean((x . (u * u - v * v) - y)^2)`` on 30 examples of 8 features ``N(0, I)``, targets
    from a 2-sparse vector plus noise 0.1; ``u`` and ``v`` start at 0.5; blocks ``u`` and
    ``v``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((30, 8))
    wt = np.zeros(8)
    wt[rng.choice(8, 2, replace=False)] = rng.choice([-1.5, 1.5], 2)
    X, y = _t64(Xn), _t64(Xn @ wt + 0.1 * rng.standard_normal(30))
    params = {"u": _t64(np.full(8, 0.5)), "v": _t64(np.full(8, 0.5))}

    def loss(p):
        """Squared error of the diagonal network (halved)."""
        return 0.5 * ((X @ (p["u"] ** 2 - p["v"] ** 2) - y) ** 2).mean()

    return _task(params, loss, "diagonal_linear_net", seed)


def scalar_chain(seed: int = 0) -> Task:
    """``1/2 (a b c d - t)^2 + 0.01 / 2 (a^2 + b^2 + c^2 + d^2)`` with ``t`` drawn from ``[2,
    3]``; ``a``, ``b``, ``c``, ``d`` start ``0.8 + N(0, 0.01)``; one block each."""
    rng = np.random.default_rng(int(seed))
    t = float(rng.uniform(2.0, 3.0))
    params = {n: _t64(0.8 + 0.1 * rng.standard_normal(1)) for n in "abcd"}

    def loss(p):
        """Squared error of the product (halved) plus a small weight decay."""
        prod = p["a"] * p["b"] * p["c"] * p["d"]
        decay = sum((p[n] ** 2).sum() for n in "abcd")
        return 0.5 * ((prod - t) ** 2).sum() + 0.005 * decay

    return _task(params, loss, "scalar_chain", seed)


def gaussian_precision_fit(seed: int = 0) -> Task:
    """Gaussian negative log-likelihood ``mean(exp(s) r^2 / 2) - s / 2`` of the residuals ``r`` of
    ``tanh(X W^T) . v`` on 40 examples of 3 features ``N(0, I)``, targets ``sin(x . a)`` plus
    noise 0.1; ``W`` (4x3) ``N(0, 1/3)``, ``v`` ``N(0, 1/4)``, ``s`` (the log precision) at 0;
    blocks network (``W``, ``v``) and ``s``."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3))
    y = _t64(np.sin(Xn @ rng.standard_normal(3)) + 0.1 * rng.standard_normal(40))
    X = _t64(Xn)
    params = {"W": _t64(rng.standard_normal((4, 3)) / np.sqrt(3)),
              "v": _t64(rng.standard_normal(4) / 2), "s": _t64(np.zeros(1))}

    def loss(p):
        """Mean Gaussian negative log-likelihood up to a constant."""
        r = torch.tanh(X @ p["W"].T) @ p["v"] - y
        return (0.5 * torch.exp(p["s"]) * r ** 2).mean() - 0.5 * p["s"].sum()

    return _task(params, loss, "gaussian_precision_fit", seed,
                 {"network": ["W", "v"], "s": ["s"]})


def attention_temperature32(seed: int = 0) -> Task:
    """``1/2 mean((softmax(exp(s) X_n q) . X_n u - y_n)^2)`` over 25 sets of 5 items of 3 features
    ``N(0, I)``, targets the second feature of the item with the largest first; query ``q`` and
    read-out ``u`` ``N(0, 1/3)``, log temperature ``s`` at 0; blocks ``q``, ``u``, ``s``;
    float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((25, 5, 3))
    y = _t32(Xn[np.arange(25), Xn[:, :, 0].argmax(1), 1])
    X = _t32(Xn)
    params = {"q": _t32(rng.standard_normal(3) / np.sqrt(3)),
              "u": _t32(rng.standard_normal(3) / np.sqrt(3)), "s": _t32(np.zeros(1))}

    def loss(p):
        """Squared error of the attended read-out (halved)."""
        a = torch.softmax(torch.exp(p["s"]) * (X @ p["q"]), dim=1)
        return 0.5 * (((a * (X @ p["u"])).sum(1) - y) ** 2).mean()

    return _task(params, loss, "attention_temperature32", seed)


def output_scale_mlp32(seed: int = 0) -> Task:
    """``1/2 mean((exp(c) tanh(X W^T) . v - y)^2)`` on 40 examples of 4 features ``N(0, I)``,
    targets ``3 tanh(x . a)``; ``W`` (5x4) ``N(0, 1/4)``, ``v`` ``N(0, 1/5)``, ``c`` (the log
    output scale) at 0; blocks ``W``, ``v``, ``c``; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 4))
    y = _t32(3 * np.tanh(Xn @ rng.standard_normal(4)))
    X = _t32(Xn)
    params = {"W": _t32(rng.standard_normal((5, 4)) / 2),
              "v": _t32(rng.standard_normal(5) / np.sqrt(5)), "c": _t32(np.zeros(1))}

    def loss(p):
        """Squared error of the scaled network (halved)."""
        return 0.5 * ((torch.exp(p["c"]) * (torch.tanh(X @ p["W"].T) @ p["v"]) - y) ** 2).mean()

    return _task(params, loss, "output_scale_mlp32", seed)


def psd_quadratic_fit32(seed: int = 0) -> Task:
    """``1/2 mean((x . L L^T x - y)^2)`` on 40 examples of 3 features ``N(0, I)/2``, targets from
    a random rank-2 PSD form plus noise 0.05; ``L`` (3x2) starts ``N(0, 1/4)``, its two columns
    ``l1``, ``l2`` in two blocks; float32."""
    rng = np.random.default_rng(int(seed))
    Xn = rng.standard_normal((40, 3)) / 2
    Lt = rng.standard_normal((3, 2))
    y = _t32(((Xn @ Lt) ** 2).sum(1) + 0.05 * rng.standard_normal(40))
    X = _t32(Xn)
    params = {"l1": _t32(rng.standard_normal(3) / 2), "l2": _t32(rng.standard_normal(3) / 2)}

    def loss(p):
        """Squared error of the quadratic form (halved)."""
        fit = (X @ p["l1"]) ** 2 + (X @ p["l2"]) ** 2
        return 0.5 * ((fit - y) ** 2).mean()

    return _task(params, loss, "psd_quadratic_fit32", seed)


def growth_curve(seed: int = 0) -> Task:
    """``1/2 mean((a exp(b t) - y)^2)`` at 20 times ``t`` in ``[0, 2]``, targets ``a* exp(b*
    t)`` with ``a*`` in ``[0.5, 1.5]``, ``b*`` in ``[0.5, 1]``, times ``1 + N(0, 0.05^2)``; ``a``
    starts at 1, ``b`` at 0.1; blocks ``a`` and ``b``."""
    rng = np.random.default_rng(int(seed))
    tn = np.linspace(0.0, 2.0, 20)
    a0, b0 = rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.0)
    t = _t64(tn)
    y = _t64(a0 * np.exp(b0 * tn) * (1 + 0.05 * rng.standard_normal(20)))
    params = {"a": _t64(np.ones(1)), "b": _t64(np.full(1, 0.1))}

    def loss(p):
        """Squared error of the growth curve (halved)."""
        return 0.5 * ((p["a"] * torch.exp(p["b"] * t) - y) ** 2).mean()

    return _task(params, loss, "growth_curve", seed)
