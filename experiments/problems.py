"""Problem instances for the error-scaling study and the property tests.

Each builder turns a *seed* (plus a few sizes) into a :class:`Problem`: a
float64 :class:`numeric.Task` whose ``params`` are the common starting point
``theta^0``, and the instance's curvature scale, from which the step-size grid
``eta0 * 2^-k`` is derived (never drawn).  Matrices are bounded or SPD by
construction.  Families:

* :func:`quartic_problem`: a random quartic polynomial in ``d = sum d_i``
  variables split into ``N`` blocks (:class:`QuarticPolynomial`),

      L(x) = a.x + 1/2 x^T A x + 1/6 sum_r s_r (v_r.x)^3 + 1/24 sum_r (w_r.x)^4,

  with ``A`` SPD (eigenvalues in ``[0.1, 1]``), ``|s_r| <= 1``, unit
  ``v_r``, ``||w_r|| <= 1`` (so the quartic part is convex and ``L`` is
  bounded below).  The polynomial can also be evaluated exactly in ``mpmath``
  (arbitrary precision): loss, gradient, Hessian, third-derivative tensor and
  the exact step of any delay pattern (:meth:`QuarticPolynomial.scheme_step_mp`),
  which the tests use below the float64 round-off floor.
* :func:`tanh_mlp_problem`: a small tanh MLP (mean-squared error on seeded
  Gaussian data), its weight and bias tensors randomly grouped into ``N``
  blocks.
* :func:`bilinear_problem`: a LoRA-like two-block model
  ``1/(2n) ||(W0 + s B A) X - Y||_F^2`` with blocks ``B`` then ``A``.
* :func:`mnist_mlp_problem`: the paper's 8-layer ReLU MLP on real MNIST digits
  (:mod:`experiments.models.mlp`, :func:`experiments.data.load_mnist`), one
  block per layer.

All randomness comes from ``numpy.random.default_rng(seed)`` (or a forked,
seeded torch RNG for the MNIST network), so an instance is a pure function of
its arguments whatever the global RNG state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from numeric import tree
from numeric.task import Task
from theory.patterns import DelayPattern

__all__ = [
    "Problem",
    "QuarticPolynomial",
    "quartic_problem",
    "tanh_mlp_problem",
    "bilinear_problem",
    "mnist_mlp_problem",
    "curvature_scale",
    "grid_start",
    "dense_derivatives",
    "tilt_task",
    "c3_terms",
    "tilt_weights",
    "CubicGuard",
    "guard_cubic",
    "relu_kink_radius",
]

DTYPE = torch.float64


@dataclass
class Problem:
    """One problem instance.

    Attributes:
        task: float64 task; ``task.params`` is the common start ``theta^0``.
        family: ``"quartic"``, ``"tanh_mlp"``, ``"bilinear"`` or ``"mnist_mlp"``.
        scale: curvature scale ``lam`` at ``theta^0`` (:func:`curvature_scale`).
        poly: the polynomial for the exact ``mpmath`` path (quartic family only).
        info: sizes and seed, for reports.
        extras: non-JSON data some diagnostics need (the MNIST MLP's inputs).
    """

    task: Task
    family: str
    scale: float
    poly: "QuarticPolynomial | None" = None
    info: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict, repr=False)

    @property
    def params(self) -> dict:
        return self.task.params

    def eta0(self, factor: float = 1.0 / 16) -> float:
        """Largest power of two ``<= factor / scale`` (:func:`grid_start`)."""
        return grid_start(self.scale, factor)

    def tilted(self, sigma: float, u: dict) -> "Problem":
        """The same instance plus the cubic tilt ``sigma/6 (u.(theta - theta^0))^3`` (:func:`tilt_task`).

        For the quartic family the tilt becomes part of the polynomial, so the
        exact ``mpmath`` path sees it too.
        """
        info = dict(self.info, tilt_sigma=float(sigma))
        if self.poly is not None:
            uf = tree.flatten({n: u[n] for n in _flat_order(self.task)}).numpy()
            poly = self.poly.tilted(sigma, uf)
            task = poly.task(self.task.name)
        else:
            poly = None
            task = tilt_task(self.task, sigma, u)
        return Problem(task, self.family, curvature_scale(task), poly, info)


# ---------------------------------------------------------------------------
# curvature scale and the step-size grid
# ---------------------------------------------------------------------------
#: tasks with at most this many parameters get exact (dense) norms in :func:`curvature_scale`
DENSE_SCALE_MAX = 256


def curvature_scale(task: Task, params=None, iters: int = 12, seed: int = 0) -> float:
    """``lam = ||H|| + ||g|| ||D^3 L[g_hat]|| + ||g|| ||D^4 L[g_hat, g_hat]||^(1/2)`` at ``params``.

    The three norms are spectral norms of symmetric ``d x d`` matrices: the
    Hessian ``H``, ``D^3 L(theta)[g_hat, ., .]`` and ``D^4 L(theta)[g_hat, g_hat, ., .]``
    with ``g_hat = g/||g||``.  ``lam`` is the inverse step size on which the
    one-step expansion varies: the displacement is about ``eta g``, so
    ``eta H``, ``eta D^3 L[eta g]/eta`` and ``eta^2 D^4 L[g, g]`` are its
    dimensionless small quantities.

    Tasks with at most :data:`DENSE_SCALE_MAX` parameters: the matrices are
    formed (``torch.func.hessian`` of ``L``, ``DL[g_hat]`` and ``D^2 L[g_hat, g_hat]``)
    and the norms are exact.  Larger tasks: ``iters`` power-iteration steps
    on matrix-vector products (HVPs and their directional derivatives by
    nested ``jvp``), which never overestimate a norm.  A derivative that
    forward mode cannot take contributes 0.
    """
    from numeric.hvp import grad, hvp

    p = {k: v.detach() for k, v in (task.params if params is None else params).items()}
    _, g = grad(task.loss, p)
    gn = float(tree.norm(g))
    if task.num_params() <= DENSE_SCALE_MAX:
        return _dense_scale(task, p, g, gn)
    gen = torch.Generator().manual_seed(seed)
    v0 = {k: torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t) for k, t in p.items()}

    def power(apply) -> float:
        v = tree.scale(v0, 1.0 / float(tree.norm(v0)))
        est = 0.0
        for _ in range(iters):
            w = apply(v)
            n = float(tree.norm(w))
            if not (n > 0 and math.isfinite(n)):
                return est
            est = n
            v = tree.scale(w, 1.0 / n)
        return est

    h_norm = power(lambda v: hvp(task.loss, p, v))
    if gn == 0.0:
        return h_norm
    ghat = tree.scale(g, 1.0 / gn)

    def hv_at(v):
        return lambda q: torch.func.jvp(torch.func.grad(task.loss), (q,), (v,))[1]

    def t_apply(v):  # D^3 L[ghat] v = d/de H(theta + e ghat) v
        return {k: t.detach() for k, t in torch.func.jvp(hv_at(v), (p,), (ghat,))[1].items()}

    def q_apply(v):  # D^4 L[ghat, ghat] v
        inner = lambda q: torch.func.jvp(hv_at(v), (q,), (ghat,))[1]  # noqa: E731
        return {k: t.detach() for k, t in torch.func.jvp(inner, (p,), (ghat,))[1].items()}

    norms = []
    for apply in (t_apply, q_apply):
        try:
            norms.append(power(apply))
        except Exception:  # no forward-mode derivative for some operation
            norms.append(0.0)
    return h_norm + gn * norms[0] + gn * math.sqrt(norms[1])


def _dense_scale(task: Task, p: dict, g: dict, gn: float) -> float:
    """:func:`curvature_scale` with the three matrices formed (double/triple/quadruple backward)."""
    names = _flat_order(task)
    like = {n: p[n] for n in names}
    x0 = tree.flatten(like)

    def f(x):
        q = dict(p)
        q.update(tree.unflatten(x, like))
        return task.loss(q)

    def norm2(m: torch.Tensor) -> float:
        m = 0.5 * (m + m.T)
        return float(torch.linalg.eigvalsh(m).abs().max())

    hessian = torch.autograd.functional.hessian
    h_norm = norm2(hessian(f, x0))
    if gn == 0.0:
        return h_norm
    ghat = tree.flatten({n: g[n] for n in names}) / gn

    def f1(x):  # DL(x)[ghat]; its Hessian is D^3 L(x)[ghat]
        (gx,) = torch.autograd.grad(f(x), x, create_graph=True)
        return gx @ ghat

    def f2(x):  # D^2 L(x)[ghat, ghat]; its Hessian is D^4 L(x)[ghat, ghat]
        (hx,) = torch.autograd.grad(f1(x), x, create_graph=True, allow_unused=True)
        return (hx @ ghat) if hx is not None else x.sum() * 0

    out = h_norm
    for fn, power in ((f1, 1.0), (f2, 0.5)):
        try:
            out += gn * norm2(hessian(fn, x0)) ** power
        except RuntimeError:  # the derivative vanishes identically (no graph to differentiate)
            pass
    return out


def grid_start(scale: float, factor: float = 1.0 / 16) -> float:
    """``eta0 = 2^-m``, the largest power of two with ``eta0 * scale <= factor``.

    Powers of two keep the grid ``eta0 * 2^-k`` exact in binary floating point.
    """
    if not (scale > 0 and math.isfinite(scale)):
        return factor
    return 2.0 ** math.floor(math.log2(factor / scale))


def dense_derivatives(task: Task, params=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense ``g (d,)``, ``H (d, d)``, ``T (d, d, d)`` of ``task.loss`` at ``params`` (small tasks only).

    Coordinates are the parameters flattened in block order (block 0's
    tensors first), matching ``block_dims`` = :meth:`Task.block_sizes`.
    Computed with ``torch.func`` in float64; for tests and references.
    """
    p = {k: v.detach() for k, v in (task.params if params is None else params).items()}
    names = [n for b in task.block_names for n in task.blocks[b]]
    like = {n: p[n] for n in names}
    flat0 = tree.flatten(like).to(torch.float64)

    def f(x):
        q = dict(p)
        q.update(tree.unflatten(x, like))
        return task.loss(q)

    g = torch.func.grad(f)(flat0)
    H = torch.func.hessian(f)(flat0)
    T = torch.func.jacfwd(torch.func.hessian(f))(flat0)
    return g.numpy().copy(), H.numpy().copy(), T.numpy().copy()


def _flat_order(task: Task) -> list[str]:
    return [n for b in task.block_names for n in task.blocks[b]]


# ---------------------------------------------------------------------------
# quartic polynomials
# ---------------------------------------------------------------------------
@dataclass
class QuarticPolynomial:
    """``L(x) = a.x + 1/2 x^T A x + 1/6 sum_r s_r (v_r.x)^3 + 1/24 sum_r (w_r.x)^4``.

    Attributes (float64 numpy arrays, exactly representable in ``mpmath``):
        block_dims: ``d_i`` of the ``N`` blocks; ``x`` is their concatenation.
        a: ``(d,)``;  A: ``(d, d)`` symmetric;  s: ``(R,)``;  V: ``(R, d)``;  W: ``(R4, d)``.
        x0: ``(d,)`` starting point ``theta^0``.

    Derivatives at ``x``: ``g = a + A x + 1/2 sum s_r (v_r.x)^2 v_r + 1/6 sum (w_r.x)^3 w_r``,
    ``H = A + sum s_r (v_r.x) v_r v_r^T + 1/2 sum (w_r.x)^2 w_r w_r^T``,
    ``T = sum s_r v_r^{(x)3} + sum (w_r.x) w_r^{(x)3}``.

    An optional cubic *tilt* ``sigma/6 (u.(x - x0))^3`` (:meth:`tilted`) leaves
    the gradient and Hessian at ``x0`` unchanged and adds ``sigma u^{(x)3}`` to
    the third-derivative tensor there.
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
            val = consts["a"] @ x + 0.5 * (x @ (consts["A"] @ x)) + (consts["s"] * vx**3).sum() / 6 + (wx**4).sum() / 24
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
        """The exact step of ``pattern`` (docs/design.md) from ``x`` (default ``x0``), in ``mpmath``.

        Block ``i``'s gradient is evaluated where exactly the blocks ``j`` with
        ``(i, j) in S`` hold their new values; blocks are visited in
        ``pattern.order()`` so every fresh value exists when needed.
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

    ``A = Q diag(lam) Q^T`` with ``lam ~ U[0.1, 1]`` (SPD by construction),
    ``a`` and ``x0`` Gaussian with norms about 1 and 1/2, ``R = d`` cubic
    terms with ``s_r ~ U[-1, 1]`` and unit ``v_r``, ``R = d`` quartic terms with
    ``w_r`` of norm ``U[0.3, 1]``.
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


# ---------------------------------------------------------------------------
# small tanh MLP
# ---------------------------------------------------------------------------
def _random_groups(rng, n_items: int, n_groups: int) -> list[list[int]]:
    """A random partition of ``range(n_items)`` into ``n_groups`` non-empty groups (item order kept)."""
    perm = rng.permutation(n_items)
    groups = [[int(perm[g])] for g in range(n_groups)]
    for item in perm[n_groups:]:
        groups[int(rng.integers(n_groups))].append(int(item))
    return [sorted(g) for g in groups]


def tanh_mlp_problem(seed: int, widths: Sequence[int] = (3, 4, 4, 2), n_blocks: int = 2, n_examples: int = 8) -> Problem:
    """A small tanh MLP, MSE loss ``1/(2n) sum ||f(x_m) - y_m||^2`` on seeded Gaussian data.

    Weights ``W_l ~ N(0, 1/fan_in)``, biases ``N(0, 0.1^2)``; inputs ``x ~ N(0, I)``,
    targets ``y ~ N(0, I)``.  The ``2 (len(widths) - 1)`` parameter tensors are
    grouped into ``n_blocks`` non-empty blocks at random (blocks ordered by
    their first tensor).
    """
    widths = tuple(int(w) for w in widths)
    rng = np.random.default_rng(int(seed))
    n_layers = len(widths) - 1
    names, params = [], {}
    for l in range(n_layers):
        fan_in, fan_out = widths[l], widths[l + 1]
        params[f"l{l + 1}.weight"] = torch.tensor(rng.standard_normal((fan_out, fan_in)) / math.sqrt(fan_in), dtype=DTYPE)
        params[f"l{l + 1}.bias"] = torch.tensor(0.1 * rng.standard_normal(fan_out), dtype=DTYPE)
        names += [f"l{l + 1}.weight", f"l{l + 1}.bias"]
    if not 1 <= n_blocks <= len(names):
        raise ValueError(f"n_blocks must be in 1..{len(names)}, got {n_blocks}")
    X = torch.tensor(rng.standard_normal((n_examples, widths[0])), dtype=DTYPE)
    Y = torch.tensor(rng.standard_normal((n_examples, widths[-1])), dtype=DTYPE)
    groups = sorted(_random_groups(rng, len(names), n_blocks))
    blocks = {f"block{b + 1}": [names[i] for i in g] for b, g in enumerate(groups)}

    def loss(p: dict) -> torch.Tensor:
        """MSE of the tanh MLP on the fixed examples."""
        h = X
        for l in range(1, n_layers + 1):
            h = h @ p[f"l{l}.weight"].T + p[f"l{l}.bias"]
            if l < n_layers:
                h = torch.tanh(h)
        return 0.5 * ((h - Y) ** 2).sum() / n_examples

    info = {"family": "tanh_mlp", "seed": int(seed), "widths": list(widths), "examples": n_examples}
    task = Task(params, loss, blocks, "tanh_mlp", info, "gs")
    return Problem(task, "tanh_mlp", curvature_scale(task), None, info)


# ---------------------------------------------------------------------------
# bilinear LoRA-like model
# ---------------------------------------------------------------------------
def bilinear_problem(seed: int, d_out: int = 5, d_in: int = 6, rank: int = 2, n_examples: int = 12, alpha: float = 2.0) -> Problem:
    """LoRA-like two-block model ``L(B, A) = 1/(2n) ||(W0 + (alpha/r) B A) X - Y||_F^2``.

    ``W0 (d_out x d_in)`` frozen with entries ``N(0, 1/d_in)``; ``A (r x d_in)``
    ``N(0, 1/d_in)`` (LoRA's A init scale); ``B (d_out x r)`` small but
    non-zero, ``N(0, 0.3^2 / r)`` (with ``B = 0``, as at LoRA's
    initialisation, ``grad_A = 0`` and every ``c_ij`` vanishes, so the
    one-step gap would start at ``O(eta^3)``); ``X ~ N(0, I)``, ``Y = W* X`` for
    a random target ``W*``.  Blocks ``B`` then ``A`` (LoRA's GS order).
    """
    rng = np.random.default_rng(int(seed))
    W0 = torch.tensor(rng.standard_normal((d_out, d_in)) / math.sqrt(d_in), dtype=DTYPE)
    Wt = torch.tensor(rng.standard_normal((d_out, d_in)) / math.sqrt(d_in), dtype=DTYPE)
    X = torch.tensor(rng.standard_normal((d_in, n_examples)), dtype=DTYPE)
    Y = Wt @ X
    params = {
        "B": torch.tensor(0.3 * rng.standard_normal((d_out, rank)) / math.sqrt(rank), dtype=DTYPE),
        "A": torch.tensor(rng.standard_normal((rank, d_in)) / math.sqrt(d_in), dtype=DTYPE),
    }
    s = alpha / rank

    def loss(p: dict) -> torch.Tensor:
        """Squared error of the low-rank-adapted linear map on the fixed examples."""
        R = (W0 + s * p["B"] @ p["A"]) @ X - Y
        return 0.5 * (R**2).sum() / n_examples

    info = {"family": "bilinear", "seed": int(seed), "d_out": d_out, "d_in": d_in, "rank": rank,
            "examples": n_examples, "alpha": alpha}
    task = Task(params, loss, {"B": ["B"], "A": ["A"]}, "bilinear", info, "gs")
    return Problem(task, "bilinear", curvature_scale(task), None, info)


# ---------------------------------------------------------------------------
# the paper's MLP on MNIST
# ---------------------------------------------------------------------------
def mnist_mlp_problem(seed: int = 0, examples: int = 64, widths: Sequence[int] | None = None, device="cpu",
                      scale_iters: int = 12) -> Problem:
    """The 8-layer ReLU MLP of the layer-wise study on ``examples`` real MNIST digits, float64.

    Same network (:class:`experiments.models.mlp.MLP`, Xavier-normal weights,
    zero biases), data (:func:`experiments.data.load_mnist`, pixels in
    ``[0, 1]``) and loss (mean softmax cross-entropy) as the ``mlp`` task, one
    block per affine layer, in float64; ``examples`` may be smaller than the
    study's 256 to keep the scaling study fast.  ``scale_iters``: power
    iterations of :func:`curvature_scale`.
    """
    from torch.nn import functional as F

    from experiments.data import load_mnist
    from experiments.models.mlp import MLP, PAPER_WIDTHS, mlp_blocks

    widths = tuple(PAPER_WIDTHS if widths is None else widths)
    data = load_mnist(examples, dtype=DTYPE, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = MLP(widths)
    model = model.to(device=device, dtype=DTYPE).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y = data.x, data.y

    def loss(p: dict) -> torch.Tensor:
        """Mean softmax cross-entropy of the ReLU MLP over the fixed MNIST examples."""
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    info = {"family": "mnist_mlp", "seed": int(seed), "examples": len(data), "widths": list(widths),
            "data_source": data.source}
    task = Task(params, loss, mlp_blocks(model.n_layers), "mnist_mlp", info, "gs")
    return Problem(task, "mnist_mlp", curvature_scale(task, iters=scale_iters), None, info,
                   {"x": x, "n_layers": model.n_layers})


def relu_kink_radius(problem: Problem, direction: dict, params=None) -> float:
    """Step length along ``direction`` at which the first ReLU of the MNIST MLP changes state.

    The loss of a ReLU network is smooth (and the theory's Assumption 1 holds)
    only while no pre-activation ``z`` of any hidden unit on any example
    changes sign.  Moving the parameters to ``theta + eta * direction`` changes
    each ``z`` at the rate ``z_dot`` (a ``jvp``); to first order the first sign
    change happens at ``eta = min |z| / |z_dot|`` over all units and examples.
    """
    x = problem.extras["x"]
    n_layers = problem.extras["n_layers"]
    p = {k: v.detach() for k, v in (problem.task.params if params is None else params).items()}

    def pre_activations(q):
        h, zs = x, []
        for l in range(1, n_layers):
            z = h @ q[f"layer{l}.weight"].T + q[f"layer{l}.bias"]
            zs.append(z)
            h = torch.relu(z)
        return tuple(zs)

    zs, dzs = torch.func.jvp(pre_activations, (p,), ({k: direction[k].to(p[k]) for k in p},))
    z = torch.cat([t.reshape(-1) for t in zs])
    dz = torch.cat([t.reshape(-1) for t in dzs])
    moving = dz.abs() > 0
    return float((z[moving].abs() / dz[moving].abs()).min())


# ---------------------------------------------------------------------------
# guarding the eta^3 coefficient against cancellation (a cubic tilt)
# ---------------------------------------------------------------------------
def tilt_task(task: Task, sigma: float, u: dict) -> Task:
    """``L(theta) + sigma/6 (u.(theta - theta^0))^3`` with ``theta^0 = task.params``.

    The tilt vanishes to second order at ``theta^0``: gradient and Hessian
    there are unchanged, the third-derivative tensor gains ``sigma u^{(x)3}``.
    """
    base = task.loss
    p0 = {k: v.detach().clone() for k, v in task.params.items()}
    uu = {k: u[k].detach().to(p0[k]) for k in p0}
    sigma = float(sigma)

    def loss(p: dict) -> torch.Tensor:
        """The base loss plus a cubic tilt along ``u`` centred at ``theta^0``."""
        t = sum((uu[k] * (p[k] - p0[k])).sum() for k in p0)
        return base(p) + sigma * t**3 / 6

    info = dict(task.info, tilt_sigma=sigma)
    return Task(dict(task.params), loss, task.blocks, task.name, info, task.default_pattern)


def _block_keys(task: Task) -> list[list[str]]:
    return [list(task.blocks[b]) for b in task.block_names]


def c3_terms(task: Task, pattern: DelayPattern, params=None) -> list[float]:
    """The terms of the one-step ``eta^3`` coefficient ``c3`` (``theory.one_step``), each a float.

    ``[-g^T M_S^2 g, -g^T H M_S g, -1/2 T[E_i g, P_i g, P_i g] for each block i]``
    (``E_i g`` keeps block ``i`` of ``g``, ``P_i g`` the blocks of ``S(i)``); their sum
    is ``c3``.  Computed with the matrix-free products of :mod:`numeric`.
    """
    from numeric.curvature import masked_product
    from numeric.hvp import grad, hvp
    from numeric.third import third_derivative

    p = task.params if params is None else params
    _, g = grad(task.loss, p)
    keys = _block_keys(task)
    mg = masked_product(task, p, pattern, g)
    mmg = masked_product(task, p, pattern, mg)
    hmg = hvp(task.loss, p, mg)
    terms = [-float(tree.dot(g, mmg)), -float(tree.dot(g, hmg))]
    for i in range(task.n_blocks):
        fresh = pattern.fresh_items(i, keys)
        if not fresh:
            terms.append(0.0)
            continue
        pg = tree.restrict(g, fresh)
        terms.append(-0.5 * float(third_derivative(task.loss, p, tree.restrict(g, keys[i]), pg, pg)))
    return terms


def tilt_weights(task: Task, pattern: DelayPattern, u: dict, params=None) -> list[float]:
    """What a unit tilt along ``u`` adds to each block's cubic term of ``c3``.

    ``w_i = -1/2 (u.E_i g) (u.P_i g)^2`` (the tilt adds ``sigma u^{(x)3}`` to ``T``).
    """
    from numeric.hvp import grad

    p = task.params if params is None else params
    _, g = grad(task.loss, p)
    keys = _block_keys(task)
    out = []
    for i in range(task.n_blocks):
        fresh = pattern.fresh_items(i, keys)
        a = float(tree.dot(u, tree.restrict(g, keys[i])))
        b = float(tree.dot(u, tree.restrict(g, fresh))) if fresh else 0.0
        out.append(-0.5 * a * b * b)
    return out


def _tilt_directions(task: Task) -> list[dict]:
    """Candidate tilt directions, unit vectors ``u`` with ``u.E_i g`` proportional to chosen weights.

    ``u = sum_i alpha_i E_i g / ||E_i g||^2`` (normalised), so ``u.E_i g`` is
    proportional to ``alpha_i``; the weightings (equal, increasing, decreasing,
    alternating, geometric both ways) make the tilt's block contributions
    differ between two patterns whatever the block gradients' sizes.
    """
    from numeric.hvp import grad

    _, g = grad(task.loss, task.params)
    keys = _block_keys(task)
    n = task.n_blocks
    weightings = [
        [1.0] * n,
        [1.0 + i for i in range(n)],
        [float(n - i) for i in range(n)],
        [1.0 + 2.0 * (i % 2) for i in range(n)],
        [3.0**i for i in range(n)],
        [3.0 ** (n - 1 - i) for i in range(n)],
    ]
    out = []
    for alpha in weightings:
        u = tree.zeros_like(g)
        for a, ks in zip(alpha, keys):
            gi = tree.restrict(g, ks)
            n2 = float(tree.dot(gi, gi))
            if n2 > 0:
                u = tree.add(u, tree.scale(gi, a / n2))
        un = float(tree.norm(u))
        if un > 0:
            out.append(tree.scale(u, 1.0 / un))
    return out


@dataclass
class CubicGuard:
    """Outcome of :func:`guard_cubic`.

    Attributes:
        problem: the (possibly tilted) instance.
        sigma: the tilt applied (0 when none was needed).
        coefficient: the guarded ``eta^3`` coefficient after the tilt.
        magnitude: the sum of the magnitudes of its terms.
        kappa: the required ratio ``|coefficient| / magnitude``.
        least: the required ``|coefficient|`` (absolute part of the guard).
        achieved: whether both requirements hold (a tilt is capped so that it at
            most doubles the curvature scale; beyond that the guard gives up
            and says so here).
    """

    problem: Problem
    sigma: float
    coefficient: float
    magnitude: float
    kappa: float
    least: float = 0.0
    achieved: bool = True


def _term_layout(task: Task, signed, local: bool) -> tuple[list[float], list[tuple[int, int]]]:
    """Signed terms of all patterns, and for each term ``(pattern index, block)`` (block -1: not a T-term)."""
    terms, where = [], []
    for p, (pattern, sign) in enumerate(signed):
        t = c3_terms(task, pattern)
        head = t[:1] if local else t[:2]  # l0 = c3 + g^T H M_S g drops the -g^T H M_S g term
        terms += [sign * x for x in head] + [sign * x for x in t[2:]]
        where += [(p, -1)] * len(head) + [(p, i) for i in range(len(t) - 2)]
    return terms, where


def guard_cubic(problem: Problem, signed_patterns, kappa: float = 0.25, local: bool = False,
                absolute: float = 1e-3) -> CubicGuard:
    """Make the leading ``eta^3`` coefficient non-degenerate by construction.

    The coefficient guarded is ``sum_p sign_p * c3(pattern_p)``: ``[(S, +1)]``
    for the one-step gap ``L_S - L_JC``, ``[(GS_o1, +1), (GS_o2, -1)]`` for the
    difference of two full GS orders.  A random instance can have this
    coefficient near zero (its terms cancel, or vanish structurally, e.g. when
    a block enters the loss quadratically); then the remainder's next order
    dominates on any fixed grid and the observed rates are meaningless.  The
    guard requires

    * ``|coefficient| >= kappa * sum |terms|`` (terms of :func:`c3_terms`: at most
      ``1 - kappa`` of it cancelled), and
    * ``|coefficient| >= absolute * lam^2 * sum_p sum_i ||E_i g|| ||P_i^p g||``
      (``lam`` the untilted curvature scale; the sum is the natural size of the
      terms, which all couple a block's gradient to its fresh blocks').

    When either fails it adds the cubic tilt ``sigma/6 (u.(theta - theta^0))^3``
    (:func:`tilt_task`), which leaves ``g`` and ``H`` (so ``C_S``) unchanged at
    ``theta^0`` and shifts the third-derivative terms linearly in ``sigma``.
    Among a few block-weighted gradient directions ``u``
    (:func:`_tilt_directions`) and tilt sizes on a geometric grid, it takes the
    smallest ``|sigma|`` that meets both requirements, capped at
    ``lam / |u.g|`` (which at most doubles ``lam``); if none does, it applies
    the capped tilt that comes closest and reports ``achieved=False``.

    ``local=True`` guards ``l0 = c3 + g^T H M_S g = -g^T M_S^2 g - 1/2 sum_i T[E_i g, P_i g, P_i g]``
    instead: the ``eta^3`` coefficient of the recursion remainder of Theorem 2
    at ``k = 1`` (where ``Delta theta^0 = 0`` and the recursive estimate is
    ``eta^2 g_JC^1 . M_S g``), hence the leading local error that the
    recursion, cumulative and JC-only estimates accumulate over a short horizon.
    """
    from numeric.hvp import grad

    task = problem.task
    terms, where = _term_layout(task, signed_patterns, local)
    _, g = grad(task.loss, task.params)
    keys = _block_keys(task)
    natural = 0.0
    for pattern, _ in signed_patterns:
        for i in range(task.n_blocks):
            fresh = pattern.fresh_items(i, keys)
            if fresh:
                natural += float(tree.norm(tree.restrict(g, keys[i]))) * float(tree.norm(tree.restrict(g, fresh)))
    least = absolute * problem.scale**2 * natural

    def judge(vals):
        coef, mag = sum(vals), sum(abs(v) for v in vals)
        ratio = abs(coef) / (kappa * mag) if mag else (math.inf if coef else 0.0)
        size = abs(coef) / least if least else math.inf
        return coef, mag, min(ratio, size)

    coef, mag, score = judge(terms)
    if score >= 1.0:
        return CubicGuard(problem, 0.0, coef, mag, kappa, least, True)
    best = None  # (achieved, -|sigma| if achieved else score, sigma, u)
    for u in _tilt_directions(task):
        weights = [tilt_weights(task, pattern, u) for pattern, _ in signed_patterns]
        w = [0.0 if i < 0 else signed_patterns[p][1] * weights[p][i] for p, i in where]
        if not any(w):
            continue
        ug = abs(float(tree.dot(u, g)))
        cap = problem.scale / ug if ug > 0 else problem.scale / float(tree.norm(g))
        for j in range(60, -1, -1):  # smallest sizes first
            for sign in (1.0, -1.0):
                sig = sign * cap * 2.0**-j
                _, _, sc = judge([t + sig * x for t, x in zip(terms, w)])
                cand = (sc >= 1.0, -abs(sig) if sc >= 1.0 else sc, sig, u)
                if best is None or cand[:2] > best[:2]:
                    best = cand
    if best is None:
        raise ValueError("no tilt direction moves the eta^3 coefficient (zero block gradients?)")
    achieved, _, sigma, u = best
    tilted = problem.tilted(sigma, u)
    terms2, _ = _term_layout(tilted.task, signed_patterns, local)
    coef2, mag2, score2 = judge(terms2)
    return CubicGuard(tilted, sigma, coef2, mag2, kappa, least, bool(achieved and score2 >= 1.0 - 1e-6))
