"""Toy losses written once: the golden cases, the scaling study's networks and the tests build from
these.

Each builder takes the problem's data (float64 tensors, shapes as stated) and returns
``loss(params)`` over a ``{name: Tensor}`` dict; the callers own their sizes, seeds and blocks.

* :func:`coupled_spd`: ``Q Q^T / d + shift I`` (``d x d``), the coupled curvature of the quadratics;
* :func:`quadratic_loss`: ``L(x) = 1/2 x^T A x - b^T x`` over the blocks concatenated;
* :func:`quartic_ridge_loss`: ``L(x) = 1/2 x^T A x - b^T x + gamma/4 sum_m ((W x)_m)^4``;
* :func:`mlp_forward`: ``h_l = act(h_{l-1} W_l^T + b_l)``, no activation after the last layer;
* :func:`adapted_weight`: the low-rank adapted weight ``W0 + s B A`` of LoRA;
* :func:`coupled_quadratic`: a seeded task of the first two (``torch`` draws), the tests' small
  quadratic.

The arithmetic is fixed here (operation by operation), so a records file of a problem built from
these does not depend on which caller built it.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

from crosscurv.numeric.task import Task

__all__ = ["concat", "coupled_spd", "quadratic_loss", "quartic_ridge_loss", "mlp_forward",
           "adapted_weight", "coupled_quadratic"]


def concat(p: Mapping, names: Sequence[str]) -> torch.Tensor:
    """``x = concat(p[n].reshape(-1) for n in names)``: the flat vector of the blocks, in ``names``
    order."""
    return torch.cat([p[n].reshape(-1) for n in names])


def coupled_spd(randn: Callable, d: int, shift: float) -> torch.Tensor:
    """``Q Q^T / d + shift I`` (``d x d``, float64) with ``Q = randn(d, d)``: symmetric, eigenvalues
    ``>= shift``."""
    Q = randn(d, d)
    return Q @ Q.T / d + shift * torch.eye(d, dtype=torch.float64)


def quadratic_loss(A: torch.Tensor, b: torch.Tensor, names: Sequence[str]) -> Callable:
    """``L(x) = 0.5 * x^T (A x) - b^T x`` with ``x = concat(names)`` (``A``: ``d x d``, ``b``:
    ``d``).
    """

    def loss(p):
        x = concat(p, names)
        return 0.5 * x @ (A @ x) - b @ x

    return loss


def quartic_ridge_loss(A: torch.Tensor, b: torch.Tensor, W: torch.Tensor, gamma: float,
                       names: Sequence[str]) -> Callable:
    """``L(x) = 0.5 x^T (A x) - b^T x + (gamma / 4) sum_m ((W x)_m)^4`` (``W``: ``m x d``): non-zero
    third and fourth derivatives."""

    def loss(p):
        x = concat(p, names)
        return 0.5 * x @ (A @ x) - b @ x + 0.25 * gamma * ((W @ x) ** 4).sum()

    return loss


def mlp_forward(p: Mapping, x: torch.Tensor, layers: Sequence[tuple[str, str]],
                activation: Callable = torch.tanh) -> torch.Tensor:
    """The output of a multilayer perceptron: ``h_0 = x`` (``n x d_0``), ``h_l = h_{l-1} W_l^T +
    b_l`` with ``activation`` applied to every layer but the last; ``layers`` names ``(W_l, b_l)``
    in order (``W_l``: ``d_l x d_{l-1}``)."""
    h = x
    for i, (w, b) in enumerate(layers):
        h = h @ p[w].T + p[b]
        if i < len(layers) - 1:
            h = activation(h)
    return h


def adapted_weight(w0: torch.Tensor, B: torch.Tensor, A: torch.Tensor, s: float
                   | None = None) -> torch.Tensor:
    """``W0 + s B A`` (LoRA; ``B``: ``m x r``, ``A``: ``r x n``), computed as ``W0 + (s B) A``; ``W0
    +
    B A`` when ``s`` is ``None``."""
    return w0 + (B @ A if s is None else s * B @ A)


def coupled_quadratic(sizes: Sequence[int], seed: int = 0, shift: float = 1.0, quartic: float = 0.0,
                      dtype=torch.float64, name: str = "quadratic") -> tuple[Task, torch.Tensor,
                                                                             torch.Tensor]:
    """A seeded quadratic task ``1/2 x^T A x - b^T x (+ quartic * sum x^4)`` over blocks of
    ``sizes``.

    ``A = coupled_spd(randn, d, shift)``, then ``b`` and the start ``x`` (``d = sum(sizes)``), drawn
    in that order from ``torch.Generator().manual_seed(seed)``; the blocks are ``x1, x2, ...`` (one
    tensor each).

    Returns:
        ``(task, A, b)``.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    d = sum(sizes)
    A = coupled_spd(randn, d, shift).to(dtype)
    b = randn(d)
    x = randn(d)
    names = [f"x{i + 1}" for i in range(len(sizes))]
    offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    params = {n: x[offsets[i]:offsets[i + 1]].clone() for i, n in enumerate(names)}
    quad = quadratic_loss(A, b, names)
    loss = quad if not quartic else (lambda p: quad(p) + quartic * (concat(p, names) ** 4).sum())
    return Task(params, loss, {n: [n] for n in names}, name=name), A, b
