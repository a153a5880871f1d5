"""Layer-wise updates by back-propagation as user step functions (paper, Appendix E.1).

A tanh MLP ``z_l = W_l h_{l-1} + b_l``, ``h_l = tanh(z_l)`` (``l < N``), softmax cross-entropy on
``z_N``, one block ``theta_l = (W_l, b_l)`` per layer. Back-propagation computes ``delta_N =
softmax(z_N) - y`` and ``delta_l = (W_{l+1}^T delta_{l+1}) * tanh'(z_l)``, and the gradients
``g_{W_l} = mean delta_l h_{l-1}^T``, ``g_{b_l} = mean delta_l`` (eqs. E.1.6-E.1.10). Three user
steps, written by hand:

* :func:`jc_backprop` -- one forward, one backward, then update every layer
  (JC: "the reverse order of derivative evaluation does not imply GS");
* :func:`exact_gs_backprop` -- output-to-input GS: before updating layer
  ``l`` the forward states above ``l`` and the adjoints are recomputed at
  the mixed state ``(theta_1^t..theta_l^t, theta_{l+1}^{t+1}..theta_N^{t+1})``
  (eqs. E.1.11-E.1.14); exact GS in order ``N, ..., 1``;
* :func:`inplace_backprop` -- the paper's "GS-like" panel (a): one backward
  recursion that uses the *updated* weights ``W_{l+1}^{t+1}`` while keeping
  the original forward states and output residual.  Neither JC nor GS.

All three declare ``gs:layer3,layer2,layer1`` except ``jc_backprop`` (declares ``jc``)::

    crosscurv validate-step examples/mlp_backprop.py:inplace_backprop
"""

from __future__ import annotations

import torch

from crosscurv.numeric import Task

WIDTHS = (4, 5, 4, 3)  # d_0 .. d_N, N = 3 layers
M = 6


def mlp_task(seed: int = 0) -> Task:
    """The tanh MLP with softmax cross-entropy on ``M`` fixed examples (float64)."""
    gen = torch.Generator().manual_seed(seed)
    kw = dict(generator=gen, dtype=torch.float64)
    params, blocks = {}, {}
    for l in range(1, len(WIDTHS)):
        fan_in, fan_out = WIDTHS[l - 1], WIDTHS[l]
        # Xavier normal
        params[f"W{l}"] = torch.randn(fan_out, fan_in, **kw) * (2.0 / (fan_in + fan_out)) ** 0.5
        params[f"b{l}"] = 0.1 * torch.randn(fan_out, **kw)
        blocks[f"layer{l}"] = [f"W{l}", f"b{l}"]
    X = torch.randn(M, WIDTHS[0], **kw)
    labels = torch.arange(M) % WIDTHS[-1]
    Y = torch.nn.functional.one_hot(labels, WIDTHS[-1]).to(torch.float64)

    def loss(p):
        h = X
        for l in range(1, len(WIDTHS)):
            z = h @ p[f"W{l}"].T + p[f"b{l}"]
            h = torch.tanh(z) if l < len(WIDTHS) - 1 else z
        return (torch.logsumexp(h, dim=1) - (h * Y).sum(dim=1)).mean()

    task = Task(params, loss, blocks, name="tiny-mlp", info={"widths": list(WIDTHS), "examples": M},
                default_pattern="gs:layer3,layer2,layer1")
    task.data = {"X": X, "Y": Y}
    return task


N_LAYERS = len(WIDTHS) - 1


def _forward(p, h0, start=1):
    """Forward from layer ``start`` with input ``h0``; returns ``(hs, zs)`` keyed by layer."""
    hs, zs = {start - 1: h0}, {}
    h = h0
    for l in range(start, N_LAYERS + 1):
        z = h @ p[f"W{l}"].T + p[f"b{l}"]
        zs[l] = z
        h = torch.tanh(z) if l < N_LAYERS else z
        hs[l] = h
    return hs, zs


def _residual(zN, Y):
    """``delta_N = softmax(z_N) - y`` (softmax cross-entropy)."""
    return torch.softmax(zN, dim=1) - Y


def _update(p, l, delta, h_prev, lr):
    p[f"W{l}"] = p[f"W{l}"] - lr * delta.T @ h_prev / delta.shape[0]
    p[f"b{l}"] = p[f"b{l}"] - lr * delta.mean(dim=0)


def jc_backprop():
    """One forward and one backward at theta^t, then update every layer (JC)."""
    task = mlp_task()
    X, Y = task.data["X"], task.data["Y"]

    def step(params, lr):
        old = dict(params)
        hs, zs = _forward(old, X)
        delta = _residual(zs[N_LAYERS], Y)
        new = dict(old)
        for l in range(N_LAYERS, 0, -1):
            _update(new, l, delta, hs[l - 1], lr)
            if l > 1:
                delta = (delta @ old[f"W{l}"]) * (1 - torch.tanh(zs[l - 1]) ** 2)  # old weights
        return new

    return task, step, "jc"


def inplace_backprop():
    """'GS-like' (paper panel (a)): one backward recursion with updated weights, stale states and
    residual."""
    task = mlp_task()
    X, Y = task.data["X"], task.data["Y"]

    def step(params, lr):
        p = dict(params)
        hs, zs = _forward(p, X)
        delta = _residual(zs[N_LAYERS], Y)  # output residual at theta^t, never recomputed
        for l in range(N_LAYERS, 0, -1):
            _update(p, l, delta, hs[l - 1], lr)  # layer l now holds theta_l^{t+1}
            if l > 1:
                # UPDATED W_l, stale z_{l-1}
                delta = (delta @ p[f"W{l}"]) * (1 - torch.tanh(zs[l - 1]) ** 2)
        return p

    return task, step, "gs:layer3,layer2,layer1"


def exact_gs_backprop():
    """Output-to-input GS: forward states and adjoints recomputed at each mixed state (eq. E.1.14).
    """
    task = mlp_task()
    X, Y = task.data["X"], task.data["Y"]

    def step(params, lr):
        p = dict(params)
        hs0, _ = _forward(p, X)  # h_{l-1}^t is reused: layers below l have not changed
        for l in range(N_LAYERS, 0, -1):
            hs, zs = _forward(p, hs0[l - 1], start=l)  # layers l+1..N already hold new values
            delta = _residual(zs[N_LAYERS], Y)
            for j in range(N_LAYERS, l, -1):
                delta = (delta @ p[f"W{j}"]) * (1 - torch.tanh(zs[j - 1]) ** 2)
            _update(p, l, delta, hs0[l - 1], lr)
        return p

    return task, step, "gs:layer3,layer2,layer1"
