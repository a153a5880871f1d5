"""Simultaneous and alternating LoRA factor updates as user step functions (paper, Appendix E.3).

One LoRA layer ``Y = (W0 + s B A) Z`` with ``s = alpha / r`` on a fixed
batch, loss ``L(A, B) = ||Y - T||_F^2 / (2 m)``.  With the output adjoint
``E = dL/dY = (Y - T) / m`` the factor gradients are (paper, eq. E.3.2)

    grad_B L = s E (A Z)^T,        grad_A L = s B^T E Z^T.

The steps are written the way training code writes them (explicit formulas, no crosscurv machinery),
so ``crosscurv validate-step`` can tell what they really do:

* :func:`alternating` -- B first, then a *new network evaluation* at
  ``(A^t, B^{t+1})`` for A's gradient: exact GS in block order (B, A);
* :func:`mislabelled_alternating` -- "alternating" in name and in the order
  of assignment, but both gradients come from one forward/backward pass at
  ``(A^t, B^t)``: a simultaneous (JC) step, however it is labelled;
* :func:`reused_adjoint` -- substitutes ``B^{t+1}`` into ``grad_A`` but keeps
  the old adjoint ``E``: the paper notes this "does not generally recover
  this partial derivative"; it is neither JC nor GS.

Each factory returns ``(task, step, declared_pattern)``::

    crosscurv validate-step examples/lora_steps.py:alternating
    crosscurv validate-step examples/lora_steps.py:mislabelled_alternating
"""

from __future__ import annotations

import torch

from crosscurv.numeric import Task

D_OUT, D_IN, RANK, M, ALPHA = 5, 4, 2, 8, 4.0
SCALE = ALPHA / RANK


def lora_task(seed: int = 0) -> Task:
    """The LoRA-like task: blocks ``B`` then ``A`` (float64)."""
    gen = torch.Generator().manual_seed(seed)
    kw = dict(generator=gen, dtype=torch.float64)
    W0 = torch.randn(D_OUT, D_IN, **kw) / D_IN**0.5
    Z = torch.randn(D_IN, M, **kw)
    T = torch.randn(D_OUT, M, **kw)
    A = torch.randn(RANK, D_IN, **kw) * (2.0 / D_IN) ** 0.5  # A ~ N(0, 2/d_in) as in the paper
    B = torch.randn(D_OUT, RANK, **kw) * 0.3  # non-zero so that the factors are coupled

    def loss(p):
        Y = (W0 + SCALE * p["B"] @ p["A"]) @ Z
        return 0.5 * ((Y - T) ** 2).sum() / M

    task = Task({"B": B, "A": A}, loss, {"B": ["B"], "A": ["A"]}, name="lora-like",
                info={"model": "Y = (W0 + s B A) Z", "loss": "||Y - T||^2 / (2m)"},
                default_pattern="gs:B,A")
    task.data = {"W0": W0, "Z": Z, "T": T}  # the user's step needs the batch
    return task


def _adjoint(data, A, B):
    """``E = dL/dY`` at ``(A, B)``: one forward pass."""
    Y = (data["W0"] + SCALE * B @ A) @ data["Z"]
    return (Y - data["T"]) / M


def alternating():
    """Correct alternating update: B, then recompute the network at (A^t, B^{t+1}) for A (GS, order
    B, A)."""
    task = lora_task()
    d = task.data

    def step(params, lr):
        A, B = params["A"], params["B"]
        E = _adjoint(d, A, B)
        B_new = B - lr * SCALE * E @ (A @ d["Z"]).T
        E_new = _adjoint(d, A, B_new)  # new network evaluation at the mixed state
        A_new = A - lr * SCALE * B_new.T @ E_new @ d["Z"].T
        return {"B": B_new, "A": A_new}

    return task, step, "gs:B,A"


def mislabelled_alternating():
    """Called "alternating": assigns B then A, but both gradients come from one pass at (A^t, B^t)
    (JC)."""
    task = lora_task()
    d = task.data

    def step(params, lr):
        A, B = params["A"], params["B"]
        E = _adjoint(d, A, B)
        gB = SCALE * E @ (A @ d["Z"]).T
        gA = SCALE * B.T @ E @ d["Z"].T
        B = B - lr * gB  # "first B ..."
        A = A - lr * gA  # "... then A" -- with a gradient computed before B changed
        return {"B": B, "A": A}

    return task, step, "gs:B,A"


def reused_adjoint():
    """B^{t+1} substituted into grad_A with the old adjoint E: neither JC nor GS."""
    task = lora_task()
    d = task.data

    def step(params, lr):
        A, B = params["A"], params["B"]
        E = _adjoint(d, A, B)
        B_new = B - lr * SCALE * E @ (A @ d["Z"]).T
        A_new = A - lr * SCALE * B_new.T @ E @ d["Z"].T  # stale adjoint
        return {"B": B_new, "A": A_new}

    return task, step, "gs:B,A"
