"""The extreme eigenpairs of a Hessian with a few parameter-sized vectors in memory: Lanczos.

:func:`lanczos_extremes` returns ``lambda_max`` and ``lambda_min`` of a symmetric ``H`` known only
through products ``v -> H v`` (dicts of tensors keyed like the parameters), both pairs to

    ||H v - lambda v|| <= tol ||H||,   ||H|| = max(|lambda_max|, |lambda_min|),

its basis parked in the protocol's store (:mod:`crosscurv.numeric.offload`) as it is built. One
cycle is ``m`` steps of the symmetric Lanczos recurrence with full reorthogonalisation (Golub and
Van Loan, Algorithm 10.1.1)::

    w = H v_j - alpha_j v_j - beta_{j-1} v_{j-1},   w <- w - sum_i (v_i^T w) v_i,   beta_j = ||w||,
    v_{j+1} = w / beta_j,

the ends from the Ritz pairs of ``T_m``; a cycle that misses the tolerance restarts from the sum of
its two Ritz vectors.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from . import tree
from .eigenpairs import SHARPNESS_TOL, Extremes, init_power_vector, pair_residual
from .inplace import shares

__all__ = ["lanczos_extremes", "LANCZOS_STEPS", "LANCZOS_CYCLES"]

#: Largest Krylov dimension of one cycle (the basis parked: it costs disk or host memory, not device
#: memory).
LANCZOS_STEPS = 80
#: Cycles (explicit restarts from the last Ritz vectors) before the best pairs found are returned.
LANCZOS_CYCLES = 8


def _dot(a: Mapping, b: Mapping) -> float:
    """``a^T b`` as a Python float: each block's ``torch.dot`` in the vectors' dtype, summed in
    float64."""
    return math.fsum(float(torch.dot(a[k].reshape(-1), b[k].reshape(-1))) for k in a)


def _axpy_(y: dict, alpha: float, x: Mapping) -> None:
    """``y <- y + alpha x`` in place."""
    for k in y:
        y[k].add_(x[k], alpha=alpha)


def _owned(h: torch.Tensor, *held: torch.Tensor) -> torch.Tensor:
    """``h`` itself, or a copy where it shares memory with a tensor still in use (an ``hvp`` may
    hand back its input): the recurrence then updates it in place."""
    return h.clone() if any(shares(h, t) for t in held) else h


class _Basis:
    """The Lanczos vectors ``v_0, v_1, ...``, parked in ``store`` (or kept in a list without one).
    """

    def __init__(self, store):
        self._store, self._kept = store, []

    def put(self, j: int, v: Mapping) -> None:
        if self._store is None:
            del self._kept[j:]
            self._kept.append(v)
        else:
            self._store.park(f"lanczos.{j}", v)

    def get(self, j: int) -> dict:
        return self._kept[j] if self._store is None else self._store.fetch(f"lanczos.{j}")

    def clear(self, m: int) -> None:
        self._kept = []
        if self._store is not None:
            for j in range(m):
                self._store.park(f"lanczos.{j}", None)


def _start(like: Mapping, v0: Mapping | None, seed: int) -> dict:
    """``v0 / ||v0||`` in ``like``'s dtype (the seeded vector where ``v0`` is missing, zero or not
    finite)."""
    if v0 is not None:
        v = {k: v0[k].detach().to(dtype=like[k].dtype, device=like[k].device).clone() for k in like}
        n = math.sqrt(max(_dot(v, v), 0.0))
        if n > 0 and math.isfinite(n):
            return {k: t.div_(n) for k, t in v.items()}
    return init_power_vector(like, seed)


def _cycle(hvp, like: Mapping, basis: _Basis, tol: float, steps: int):
    """One Lanczos cycle from the unit vector put in ``basis`` as ``v_0``: ``(theta_min, theta_max,
    s_min, s_max, m, products)``.

    Beside the product and the new vector ``w``, one basis vector at a time is held: ``v_j`` is
    dropped once its product and ``alpha_j`` are taken, and every ``v_i`` of the recurrence and of
    the reorthogonalisation is fetched from the basis for its use (parked: a map of its file; kept
    in a list without a store: the vector itself)."""
    import numpy as np
    from scipy.linalg import eigh_tridiagonal

    alphas, betas = [], []
    v = basis.get(0)
    products = 0
    for j in range(steps):
        Hv = hvp(v)
        products += 1
        w = {k: _owned(Hv[k].detach().to(dtype=like[k].dtype), v[k], like[k]) for k in like}
        del Hv
        alpha = _dot(w, v)
        _axpy_(w, -alpha, v)
        del v
        if j:  # v_{j-1}
            v_prev = basis.get(j - 1)
            _axpy_(w, -betas[-1], v_prev)
            del v_prev
        # full reorthogonalisation (classical Gram-Schmidt against the parked basis)
        for i in range(j + 1):
            vi = basis.get(i)
            c = _dot(w, vi)
            _axpy_(w, -c, vi)
            if i == j:
                alpha += c
            del vi
        alphas.append(alpha)
        beta = math.sqrt(max(_dot(w, w), 0.0))
        if not (math.isfinite(alpha) and math.isfinite(beta)):
            raise ArithmeticError("non-finite Hessian-vector product in the Lanczos recurrence")
        theta, S = eigh_tridiagonal(np.array(alphas), np.array(betas)) if j else (np.array(alphas),
                                                                                  np.ones((1, 1)))
        scale = max(abs(theta[0]), abs(theta[-1]))
        est = beta * max(abs(S[-1, 0]), abs(S[-1, -1]))
        if est <= 0.5 * tol * scale or beta <= 1e-30 or j + 1 == steps:
            return theta[0], theta[-1], S[:, 0], S[:, -1], j + 1, products
        betas.append(beta)
        v = {k: t.div_(beta) for k, t in w.items()}
        del w
        basis.put(j + 1, v)
    raise AssertionError("unreachable")


def _assemble(basis: _Basis, coeffs, m: int, like: Mapping) -> dict:
    """``sum_j coeffs[j] v_j`` over the first ``m`` basis vectors, normalised."""
    x = {k: torch.zeros_like(t) for k, t in like.items()}
    for j in range(m):
        vj = basis.get(j)
        _axpy_(x, float(coeffs[j]), vj)
        del vj
    n = math.sqrt(max(_dot(x, x), 0.0))
    return {k: t.div_(n) for k, t in x.items()} if n > 0 else x


def lanczos_extremes(hvp, like: Mapping, v0: Mapping | None = None, tol: float = SHARPNESS_TOL,
                     seed: int = 0, store=None, steps: int = LANCZOS_STEPS,
                     cycles: int = LANCZOS_CYCLES) -> Extremes:
    """``lambda_max`` and ``lambda_min`` of ``H`` by Lanczos with its basis parked in ``store``.

    ``hvp(v) -> H v`` on dicts laid out like ``like``; ``v0``: the start (default the seeded vector
    of ``seed``); ``store``: ``park``/``fetch`` of :mod:`crosscurv.numeric.offload` (``None``: a
    list); ``steps``: largest Krylov dimension of a cycle; ``cycles``: restarts before the best
    pairs are returned. Returns :class:`Extremes` with ``hvps`` counting every product.
    """
    n = sum(t.numel() for t in like.values())
    steps = max(1, min(steps, n))
    basis = _Basis(store)
    start = _start(like, v0, seed)
    best, products, used = None, 0, 0
    ritz = _Ritz(store)
    try:
        for cycle in range(cycles):
            basis.put(0, start)
            del start
            lo, hi, s_lo, s_hi, m, c = _cycle(hvp, like, basis, tol, steps)
            used = max(used, m)
            products += c
            # the Ritz vectors wait in the store while the other one's product runs (and while a
            # later cycle runs, as the best pair so far)
            x_hi = ritz.keep(f"hi{cycle}", _assemble(basis, s_hi, m, like))
            x_lo = ritz.keep(f"lo{cycle}", _assemble(basis, s_lo, m, like))
            res = pair_residual(hvp, (float(hi), x_hi), (float(lo), x_lo))
            products += 2
            if best is None or not res >= best[4]:
                best = (hi, lo, x_hi, x_lo, res)
            if res <= tol:
                break
            start = _start(like, {k: x_hi[k] + x_lo[k] for k in x_hi}, seed)  # noqa: F841 (next cycle)
        hi, lo, x_hi, x_lo, res = best
        x_hi, x_lo = ritz.take(x_hi), ritz.take(x_lo)
    finally:
        basis.clear(used)
        ritz.clear()
    return Extremes(hi, lo, x_hi, x_lo, products, res, True)


class _Ritz:
    """Ritz vectors parked in ``store`` and read back entry by entry where used (kept as they are
    without one)."""

    def __init__(self, store):
        self._store, self._names = store, []

    def keep(self, name: str, v: dict) -> Mapping:
        if self._store is None:
            return v
        name = f"lanczos.ritz.{name}"
        self._store.park(name, v)
        self._names.append(name)
        store = self._store
        lazy = tree.lazy(v, lambda k: store.fetch_entry(name, k))
        lazy.parked_as = name
        return lazy

    def take(self, v: Mapping) -> dict:
        """``v`` as a dict of tensors (fetched whole from the store where it was parked)."""
        return v if isinstance(v, dict) else self._store.fetch(v.parked_as)

    def clear(self) -> None:
        for name in self._names:
            self._store.park(name, None)
        self._names = []
