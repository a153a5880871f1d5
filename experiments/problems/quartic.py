"""Random quartic polynomials in blocks, with an exact ``mpmath`` calculus.

:func:`quartic_problem` builds a random quartic polynomial in ``d = sum d_i``
variables split into ``N`` blocks (:class:`QuarticPolynomial`),

    L(x) = a.x + 1/2 x^T A x + 1/6 sum_r s_r (v_r.x)^3 + 1/24 sum_r (w_r.x)^4,

with ``A`` SPD (eigenvalues in ``[0.1, 1]``), ``|s_r| <= 1``, unit ``v_r``, ``||w_r|| <= 1`` (so the
quartic part is convex and ``L`` is bounded below). The polynomial can also be evaluated exactly in
``mpmath`` (arbitrary precision): loss, gradient, Hessian, third-derivative tensor and the exact
step of any delay pattern (:meth:`QuarticPolynomial.scheme_step_mp`), which the tests use below the
float64 round-off floor. All randomness comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from crosscurv.numeric.task import Task
from crosscurv.theory.patterns import DelayPattern

from .curvature_scale import curvature_scale
from .problem import DTYPE, Problem

if TYPE_CHECKING:
    import mpmath


@dataclass
class QuarticPolynomial:
    """``L(x) = a.x + 1/2 x^T A x + 1/6 sum_r s_r (v_r.x)^3 + 1/24 sum_r (w_r.x)^4``.

    Attributes (float64 numpy arrays, exactly representable in ``mpmath``):
        block_dims: ``d_i`` of the ``N`` blocks; ``x`` is their concatenation.
        a: ``(d,)``;  A: ``(d, d)`` symmetric;  s: ``(R,)``;  V: ``(R, d)``;  W: ``(R4, d)``.
        x0: ``(d,)`` starting point ``theta^0``.

    Derivatives at ``x``: ``g = a + A x + 1/2 sum s_r (v_r.x)^2 v_r + 1/6 sum (w_r.x)^3 w_r``, ``H =
    A + sum s_r (v_r.x) v_r v_r^T + 1/2 sum (w_r.x)^2 w_r w_r^T``, ``T = sum s_r v_r^{(x)3} + sum
    (w_r.x) w_r^{(x)3}``.

    An optional cubic *tilt* ``sigma/6 (u.(x - x0))^3`` (:meth:`tilted`) leaves the gradient and
    Hessian at ``x0`` unchanged and adds ``sigma u^{(x)3}`` to the third-derivative tensor there.
    """

    block_dims: tuple
    a: np.ndarray
    A: np.ndarray
    s: np.ndarray
    V: np.ndarray
    W: np.ndarray
    x0: np.ndarray
    tilt_sigma: float = 0.0
    tilt_u: np.ndarray | None = None

    @property
    def d(self) -> int:
        return int(sum(self.block_dims))

    @property
    def n_blocks(self) -> int:
        return len(self.block_dims)

    def tilted(self, sigma: float, u: np.ndarray) -> "QuarticPolynomial":
        """A copy with the cubic tilt ``sigma/6 (u.(x - x0))^3`` (replacing any previous tilt)."""
        return QuarticPolynomial(self.block_dims, self.a, self.A, self.s, self.V, self.W, self.x0,
                                 float(sigma), np.asarray(u, dtype=np.float64).copy())

    def slices(self) -> list[slice]:
        out, i = [], 0
        for n in self.block_dims:
            out.append(slice(i, i + n))
            i += n
        return out

    # -- torch ---------------------------------------------------------------
    def _tilt_arrays(self) -> tuple[np.ndarray, float]:
        u = np.zeros(self.d) if self.tilt_u is None else self.tilt_u
        return u, float(u @ self.x0)

    def task(self, name: str = "quartic") -> Task:
        """A float64 task with one parameter tensor ``theta{i}`` (1-based) per block."""
        names = [f"theta{i + 1}" for i in range(self.n_blocks)]
        params = {n: torch.tensor(self.x0[sl], dtype=DTYPE) for n, sl in zip(names, self.slices())}
        consts = {k: torch.tensor(getattr(self, k), dtype=DTYPE) for k in ("a", "A", "s", "V", "W")}
        u, ux0 = self._tilt_arrays()
        consts["u"] = torch.tensor(u, dtype=DTYPE)
        sigma = self.tilt_sigma

        def loss(p: dict) -> torch.Tensor:
            """The quartic polynomial ``L(x)`` of the blocks' concatenation ``x``."""
            x = torch.cat([p[n] for n in names])
            vx = consts["V"] @ x
            wx = consts["W"] @ x
            val = consts["a"] @ x + 0.5 * (x @ (consts["A"] @ x)) + (consts["s"]
                * vx**3).sum() / 6 + (wx**4).sum() / 24
            if sigma:
                val = val + sigma * (consts["u"] @ x - ux0) ** 3 / 6
            return val

        info = {"family": "quartic", "block_dims": list(self.block_dims), "tilt_sigma": sigma}
        return Task(params, loss, {n: [n] for n in names}, name, info, "gs")

    # -- mpmath (exact to the working precision) ------------------------------
    def _mp_consts(self):
        import mpmath

        key = mpmath.mp.prec
        cache = getattr(self, "_mp_cache", None)
        if cache is None or cache[0] != key:
            conv = lambda arr: [mpmath.mpf(float(v)) for v in np.asarray(arr).ravel()]  # noqa: E731
            d = self.d
            a = conv(self.a)
            A = conv(self.A)
            A = [A[i * d : (i + 1) * d] for i in range(d)]
            s = conv(self.s)
            V = [conv(r) for r in self.V]
            W = [conv(r) for r in self.W]
            u, ux0 = self._tilt_arrays()
            cache = (key, a, A, s, V, W, conv(u), mpmath.mpf(float(self.tilt_sigma)), conv(self.x0))
            object.__setattr__(self, "_mp_cache", cache)
        return cache[1:]

    def _tilt_mp(self, x):
        """``(sigma, u, t)`` with ``t = u.(x - x0)`` in mpmath (``sigma = 0`` without tilt)."""
        import mpmath

        *_, u, sigma, x0 = self._mp_consts()
        t = mpmath.fsum(u[i] * (x[i] - x0[i]) for i in range(self.d))
        return sigma, u, t

    def x0_mp(self) -> list:
        import mpmath

        return [mpmath.mpf(float(v)) for v in self.x0]

    def loss_mp(self, x: Sequence) -> "mpmath.mpf":
        """``L(x)`` in ``mpmath`` at the current ``mpmath.mp`` precision."""
        import mpmath

        a, A, s, V, W = self._mp_consts()[:5]
        d = self.d
        val = mpmath.fsum(a[i] * x[i] for i in range(d))
        val += mpmath.fsum(x[i] * A[i][j] * x[j] for i in range(d) for j in range(d)) / 2
        for sr, vr in zip(s, V):
            t = mpmath.fsum(vr[i] * x[i] for i in range(d))
            val += sr * t**3 / 6
        for wr in W:
            t = mpmath.fsum(wr[i] * x[i] for i in range(d))
            val += t**4 / 24
        sigma, _, t = self._tilt_mp(x)
        return val + sigma * t**3 / 6

    def grad_mp(self, x: Sequence) -> list:
        """``grad L(x)`` in ``mpmath``."""
        import mpmath

        a, A, s, V, W = self._mp_consts()[:5]
        d = self.d
        g = [a[i] + mpmath.fsum(A[i][j] * x[j] for j in range(d)) for i in range(d)]
        for sr, vr in zip(s, V):
            t = mpmath.fsum(vr[i] * x[i] for i in range(d))
            c = sr * t**2 / 2
            for i in range(d):
                g[i] += c * vr[i]
        for wr in W:
            t = mpmath.fsum(wr[i] * x[i] for i in range(d))
            c = t**3 / 6
            for i in range(d):
                g[i] += c * wr[i]
        sigma, u, t = self._tilt_mp(x)
        if sigma:
            for i in range(d):
                g[i] += sigma * t**2 / 2 * u[i]
        return g

    def hessian_mp(self, x: Sequence) -> list:
        """``H(x)`` in ``mpmath`` (nested lists)."""
        import mpmath

        a, A, s, V, W = self._mp_consts()[:5]
        d = self.d
        H = [[A[i][j] for j in range(d)] for i in range(d)]
        for sr, vr in zip(s, V):
            c = sr * mpmath.fsum(vr[i] * x[i] for i in range(d))
            for i in range(d):
                ci = c * vr[i]
                for j in range(d):
                    H[i][j] += ci * vr[j]
        for wr in W:
            t = mpmath.fsum(wr[i] * x[i] for i in range(d))
            c = t**2 / 2
            for i in range(d):
                ci = c * wr[i]
                for j in range(d):
                    H[i][j] += ci * wr[j]
        sigma, u, t = self._tilt_mp(x)
        if sigma:
            c = sigma * t
            for i in range(d):
                for j in range(d):
                    H[i][j] += c * u[i] * u[j]
        return H

    def derivatives_mp(self, x: Sequence | None = None) -> tuple[list, list, list]:
        """``(g, H, T)`` at ``x`` (default ``x0``) as nested lists of ``mpmath.mpf``."""
        import mpmath

        x = self.x0_mp() if x is None else x
        a, A, s, V, W = self._mp_consts()[:5]
        d = self.d
        g = self.grad_mp(x)
        H = [[A[i][j] for j in range(d)] for i in range(d)]
        T = [[[mpmath.mpf(0)] * d for _ in range(d)] for _ in range(d)]
        for sr, vr in zip(s, V):
            t = mpmath.fsum(vr[i] * x[i] for i in range(d))
            for i in range(d):
                for j in range(d):
                    H[i][j] += sr * t * vr[i] * vr[j]
                    for k in range(d):
                        T[i][j][k] += sr * vr[i] * vr[j] * vr[k]
        for wr in W:
            t = mpmath.fsum(wr[i] * x[i] for i in range(d))
            for i in range(d):
                for j in range(d):
                    H[i][j] += t**2 / 2 * wr[i] * wr[j]
                    for k in range(d):
                        T[i][j][k] += t * wr[i] * wr[j] * wr[k]
        sigma, u, t = self._tilt_mp(x)
        if sigma:
            for i in range(d):
                for j in range(d):
                    H[i][j] += sigma * t * u[i] * u[j]
                    for k in range(d):
                        T[i][j][k] += sigma * u[i] * u[j] * u[k]
        return g, H, T

    def scheme_step_mp(self, pattern: DelayPattern, eta, x: Sequence | None = None) -> list:
        """The exact step of ``pattern`` (docs/design.md) from ``x`` (default ``x0``), in
        ``mpmath``.

        Block ``i``'s gradient is evaluated where exactly the blocks ``j`` with ``(i, j) in S`` hold
        their new values; blocks are visited in ``pattern.order()`` so every fresh value exists when
        needed.
        """
        import mpmath

        x = self.x0_mp() if x is None else list(x)
        eta = mpmath.mpf(eta)
        sl = self.slices()
        new = list(x)
        for i in pattern.order():
            state = list(x)
            for j in pattern.fresh(i):
                state[sl[j]] = new[sl[j]]
            gi = self.grad_mp(state)[sl[i]]
            new[sl[i]] = [xi - eta * gv for xi, gv in zip(x[sl[i]], gi)]
        return new


def _unit_rows(rng, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def quartic_polynomial(seed: int, block_dims: Sequence[int]) -> QuarticPolynomial:
    """A random quartic with bounded coefficients (module docstring).

    ``A = Q diag(lam) Q^T`` with ``lam ~ U[0.1, 1]`` (SPD by construction), ``a`` and ``x0``
    Gaussian with norms about 1 and 1/2, ``R = d`` cubic terms with ``s_r ~ U[-1, 1]`` and unit
    ``v_r``, ``R = d`` quartic terms with ``w_r`` of norm ``U[0.3, 1]``.
    """
    dims = tuple(int(n) for n in block_dims)
    if len(dims) < 1 or min(dims) < 1:
        raise ValueError(f"block_dims must be positive, got {block_dims}")
    rng = np.random.default_rng(int(seed))
    d = sum(dims)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = rng.uniform(0.1, 1.0, d)
    A = (q * lam) @ q.T
    A = 0.5 * (A + A.T)
    a = rng.standard_normal(d) / math.sqrt(d)
    s = rng.uniform(-1.0, 1.0, d)
    V = _unit_rows(rng, d, d)
    W = _unit_rows(rng, d, d) * rng.uniform(0.3, 1.0, (d, 1))
    x0 = 0.5 * rng.standard_normal(d) / math.sqrt(d)
    return QuarticPolynomial(dims, a, A, s, V, W, x0)


def quartic_problem(seed: int, block_dims: Sequence[int]) -> Problem:
    """:func:`quartic_polynomial` as a :class:`Problem` (float64 task plus the mpmath path)."""
    poly = quartic_polynomial(seed, block_dims)
    task = poly.task()
    info = {"family": "quartic", "seed": int(seed), "block_dims": list(poly.block_dims)}
    return Problem(task, "quartic", curvature_scale(task), poly, info)
