"""A deep matrix factorisation as a block problem: one block per factor.

``L(W_1, ..., W_N) = 1/(2n) ||W_N ... W_1 X - Y||_F^2`` with ``X (d x n)`` Gaussian and targets ``Y
= T X + 0.1 E`` from a random ``T (d x d)``; each factor ``W_l (d x d)`` starts at ``I + 0.3 G_l /
sqrt(d)`` (``G_l`` Gaussian), so the factors are strongly coupled (each block's Hessian column
reaches every other block) and the loss is a polynomial of degree ``2N`` in the parameters. All
draws from ``numpy.random.default_rng(seed)``; float64.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from crosscurv.numeric.task import Task

from .curvature_scale import curvature_scale
from .problem import DTYPE, Problem

__all__ = ["factorisation_problem"]


def factorisation_problem(
    seed: int, n_factors: int = 3, dim: int = 3, n_examples: int = 8
) -> Problem:
    """The factorisation ``W_N ... W_1 X ~ Y`` over ``n_factors`` blocks ``W1..WN`` (module
    docstring)."""
    rng = np.random.default_rng(int(seed))
    d, n = int(dim), int(n_examples)
    X = torch.tensor(rng.standard_normal((d, n)), dtype=DTYPE)
    T = torch.tensor(rng.standard_normal((d, d)), dtype=DTYPE)
    Y = T @ X + 0.1 * torch.tensor(rng.standard_normal((d, n)), dtype=DTYPE)
    names = [f"W{i + 1}" for i in range(n_factors)]
    params = {
        nm: torch.eye(d, dtype=DTYPE)
        + 0.3 * torch.tensor(rng.standard_normal((d, d)), dtype=DTYPE) / math.sqrt(d)
        for nm in names
    }

    def loss(p: dict) -> torch.Tensor:
        """Mean squared residual of the product of the factors."""
        z = X
        for nm in names:
            z = p[nm] @ z
        return 0.5 * ((z - Y) ** 2).sum() / n

    info = {
        "family": "factorisation",
        "seed": int(seed),
        "factors": n_factors,
        "dim": d,
        "examples": n,
    }
    task = Task(params, loss, {nm: [nm] for nm in names}, "factorisation", info, "gs")
    return Problem(task, "factorisation", curvature_scale(task), None, info)
