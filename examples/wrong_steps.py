"""Block steps with deliberate bugs, for the validation harness's tests and as a gallery of failure
modes.

Task: a coupled quartic over three blocks ``x = (x1, x2, x3)``,

    L(x) = 1/2 x^T A x - b^T x + 1/4 sum_m (w_m^T x)^4,

whose cross-Hessian blocks and third derivatives are all non-zero. Every step below *claims* full
Gauss-Seidel in block order 1, 2, 3 (declared ``gs``) and uses autograd the way training code does:

* :func:`correct_gs` -- the real thing (reference for the others);
* :func:`wrong_order` -- sweeps the blocks 3, 2, 1: exactly GS, but in the other order;
* :func:`stale_gradient` -- block 3 reuses the gradient computed at the start of the sweep instead
  of recomputing it: exactly the partial pattern ``{2<-1}``;
* :func:`wrong_sign` -- builds the fresh state as ``x_j + eta g_j``: the freshness term ``eta^2 M_S
  g`` enters with the wrong sign;
* :func:`cached_gradient` -- keeps block 1's gradient from the previous call (a stale gradient
  across calls): not even a function of its input;
* :func:`linearised_gs` -- ``x - eta (g - eta L g)`` (Lemma 1's first-order correction with HVPs):
  matches GS to ``O(eta^2)`` but not exactly -- it differs from GS at ``O(eta^3)``, and the harness
  does not call it GS.
"""

from __future__ import annotations

import torch

from crosscurv.numeric import Task

SIZES = (2, 3, 2)


def quartic_task(seed: int = 0) -> Task:
    gen = torch.Generator().manual_seed(seed)
    kw = dict(generator=gen, dtype=torch.float64)
    d = sum(SIZES)
    Q = torch.randn(d, d, **kw)
    A = Q @ Q.T / d + 0.5 * torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, **kw)
    W = torch.randn(3, d, **kw) / d**0.5
    x0 = torch.randn(d, **kw) * 0.5

    def loss(p):
        x = torch.cat([p["x1"], p["x2"], p["x3"]])
        return 0.5 * x @ A @ x - b @ x + 0.25 * ((W @ x) ** 4).sum()

    names = ["x1", "x2", "x3"]
    parts = torch.split(x0, SIZES)
    return Task(dict(zip(names, parts)), loss, {n: [n] for n in names}, name="coupled-quartic",
                default_pattern="gs")


def _grad(loss, params, name):
    p = {k: v.detach().clone().requires_grad_(k == name) for k, v in params.items()}
    (g,) = torch.autograd.grad(loss(p), [p[name]])
    return g


def _full_grad(loss, params):
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    gs = torch.autograd.grad(loss(p), list(p.values()))
    return dict(zip(p, gs))


def _sweep(order):
    task = quartic_task()

    def step(params, lr):
        p = dict(params)
        for n in order:
            p[n] = p[n] - lr * _grad(task.loss, p, n)
        return p

    return task, step


def correct_gs():
    task, step = _sweep(["x1", "x2", "x3"])
    return task, step, "gs"


def wrong_order():
    task, step = _sweep(["x3", "x2", "x1"])
    return task, step, "gs"


def stale_gradient():
    task = quartic_task()

    def step(params, lr):
        g0 = _full_grad(task.loss, params)  # gradients at the start of the sweep
        p = dict(params)
        p["x1"] = p["x1"] - lr * g0["x1"]
        p["x2"] = p["x2"] - lr * _grad(task.loss, p, "x2")
        p["x3"] = p["x3"] - lr * g0["x3"]  # BUG: stale, should be recomputed at the fresh state
        return p

    return task, step, "gs"


def wrong_sign():
    task = quartic_task()

    def step(params, lr):
        old = dict(params)
        fresh = dict(params)
        new = {}
        for n in ["x1", "x2", "x3"]:
            g = _grad(task.loss, fresh, n)
            new[n] = old[n] - lr * g
            fresh[n] = old[n] + lr * g  # BUG: the fresh state others see has the wrong sign
        return new

    return task, step, "gs"


def cached_gradient():
    task = quartic_task()
    cache = {}

    def step(params, lr):
        p = dict(params)
        g1 = cache.get("x1")
        if g1 is None:
            g1 = _grad(task.loss, p, "x1")
        cache["x1"] = _grad(task.loss, p, "x1")  # BUG: used on the *next* call
        p["x1"] = p["x1"] - lr * g1
        for n in ["x2", "x3"]:
            p[n] = p[n] - lr * _grad(task.loss, p, n)
        return p

    return task, step, "gs"


def linearised_gs():
    task = quartic_task()
    names = ["x1", "x2", "x3"]

    def step(params, lr):
        g = _full_grad(task.loss, params)
        # (L g)_i = sum_{j<i} H_ij g_j, from HVPs along the earlier blocks' gradients
        corr = {}
        for i, n in enumerate(names):
            v = {m: (g[m] if j < i else torch.zeros_like(g[m])) for j, m in enumerate(names)}
            _, hv = torch.func.jvp(torch.func.grad(task.loss), (dict(params),), (v,))
            corr[n] = hv[n]
        return {n: params[n] - lr * (g[n] - lr * corr[n]) for n in names}

    return task, step, "gs"
