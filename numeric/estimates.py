"""Loss-gap estimates along the JC and pattern-``S`` trajectories (paper, Section 4.2).

Notation (paper, Section 4.2.1): ``theta_JC^k`` and ``theta_S^k`` are the two trajectories from the
common ``theta^0`` with constant step ``eta``; ``Delta theta^k = theta_S^k - theta_JC^k``;
``g_JC^k``, ``H_JC^k`` the gradient and Hessian at ``theta_JC^k``; ``u^k = M_S(theta_S^k) g_S^k``
the freshness forcing (``M_S`` keeps the Hessian blocks ``H_ij`` with ``(i, j) in S``).

Implemented quantities (all parameter-space vectors are dicts of tensors with the parameters' keys,
shapes, dtype and device; scalars are 0-dim tensors of the same dtype unless said otherwise):

* Lemma 3 / Theorem 3 propagation (:func:`propagate`)::

      s_{k+1} = (I - eta H_JC^k) s_k + eta^2 f^k

  with ``s = z`` and ``f^k = u^k`` this is the cumulative state of Theorem 3,
  ``z_K = eta^2 sum_j Phi_{K,j+1} M_S^j g_S^j`` (``z_0 = 0``), computed forward
  with one HVP per iteration (``O(K)`` HVPs in total, not ``O(K^2)``); with
  ``s = y`` and ``f^k = M_S(theta_JC^k) g_JC^k`` it is the JC-only state.
* Theorem 3's signed estimate (:func:`quadratic_estimate`)::

      cumulative^K = g_JC^K . z_K + 1/2 z_K . H_JC^K z_K

  (the HVP ``H_JC^K z_K`` also propagates ``z`` to ``K + 1``).
* Theorem 2 with the measured difference (:func:`recursive_estimate`, with
  ``w`` and ``q`` formed by the protocol)::

      recursive^{k+1} = g_JC^{k+1} . [(I - eta H_JC^k) Delta^k + eta^2 u^k]
                        + 1/2 Delta^k . H_JC^k Delta^k

  which is the paper's three terms (propagation, quadratic, freshness) with
  the two ``g_JC^{k+1}`` products merged into one inner product.
* Theorem 3's magnitude bound (:func:`bk_radius`, :func:`bound_bk`)::

      b_k = eta^2 sum_{j<k} (1 + eta L)^{k-1-j} ||u^j||,   bound_bk^k = G b_k + L/2 b_k^2.

``G`` and ``L`` (Assumption 1, A1-A2) are not known for a real model. The protocol uses
*a-posteriori estimates*, not certified constants:

* ``G`` = running maximum of ``||g||`` over every gradient evaluated so far on
  both trajectories (a lower estimate of the sup over the region Omega);
* ``L`` = running maximum of ``|p^T H_JC^k p|`` (Rayleigh quotient, ``||p|| = 1``)
  of a power iteration on ``H_JC^k`` warm-started from the previous
  iteration's vector, one HVP per iteration (a lower estimate of
  ``sup ||H||``; the Hessian along the ``S`` trajectory is not probed).

``b_k`` is recomputed from the stored ``||u^j||`` with the current ``L`` at every ``k`` (Horner's
rule, float64), so the bound always uses the latest ``L``. Because ``G`` and ``L`` can only
underestimate the true constants, ``bound_bk`` is an estimate of Theorem 3's bound, not a guaranteed
one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

import torch

from . import tree
from .certificate import CertificateState
from .eigenpairs import SHARPNESS_TOL, Extremes, init_power_vector, pair_residual
from .error_estimates import DefectState, ErrorState
from .inplace import shares
from .lanczos import lanczos_extremes

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "propagate",
    "quadratic_estimate",
    "quadratic_from_linear",
    "recursive_estimate",
    "bk_radius",
    "bound_bk",
    "init_power_vector",
    "power_step",
    "EstimateState",
    "SHARPNESS_TOL",
    "SHARPNESS_EVERY",
    "Extremes",
    "hessian_extremes",
    "solve_extremes",
    "track_extremes",
]

#: The extremes are converged (warm-started lobpcg refinement) every this many iterations; in
#: between the last
#: converged values are carried (no product), see :func:`track_extremes`.
SHARPNESS_EVERY = 20


def propagate(s: Mapping, Hs: Mapping, forcing: Mapping | None, lr: float) -> dict:
    """``(I - eta H) s + eta^2 f`` (Lemma 3's linearised trajectory recursion).

    Args:
        s: state vector ``s_k`` (dict of tensors).
        Hs: ``H_JC^k s_k`` (same keys and shapes).
        forcing: ``f^k`` (``M_S g``), or ``None`` for no forcing.
        lr: the step ``eta``.

    Returns:
        ``s_{k+1}`` as a new dict.
    """
    lr2 = lr * lr
    if forcing is None:
        return {k: s[k] - lr * Hs[k] for k in s}
    return {k: (s[k] - lr * Hs[k]) + lr2 * forcing[k] for k in s}


def quadratic_estimate(g: Mapping, z: Mapping, Hz: Mapping) -> torch.Tensor:
    """``g^T z + 1/2 z^T H z`` (Theorem 3, eq. signed_cumulative_loss), a 0-dim tensor."""
    return quadratic_from_linear(tree.dot(g, z), z, Hz)


def quadratic_from_linear(gz: torch.Tensor, z: Mapping, Hz: Mapping) -> torch.Tensor:
    """:func:`quadratic_estimate` with ``g^T z`` already computed (``gz``): ``gz + 1/2 z^T H z``.

    For a caller that has to drop ``g`` before ``H z`` is formed (the protocol's lean-memory
    engine); the result is bit for bit the same.
    """
    return gz + 0.5 * tree.dot(z, Hz)


def recursive_estimate(g_next: Mapping, w: Mapping, q: torch.Tensor) -> torch.Tensor:
    """``g_JC^{k+1} . w + q`` (Theorem 2 with the measured ``Delta theta^k``)."""
    return tree.dot(g_next, w) + q


def bk_radius(unorms: Sequence[float], lr: float, L: float) -> float:
    """``b_k = eta^2 sum_{j<k} (1 + eta L)^{k-1-j} ||u^j||`` for ``k = len(unorms)`` (float64)."""
    c = 1.0 + lr * L
    acc = 0.0
    for un in unorms:  # Horner: ((u0 c + u1) c + u2) ...
        acc = acc * c + un
    return lr * lr * acc


def bound_bk(unorms: Sequence[float], lr: float, G: float, L: float) -> float:
    """Theorem 3's bound ``G b_k + L/2 b_k^2`` with estimated ``G``, ``L`` (float64)."""
    b = bk_radius(unorms, lr, L)
    return G * b + 0.5 * L * b * b


def power_step(p: Mapping, Hp: Mapping, into: bool = False) -> tuple[float, dict]:
    """One warm-started power-iteration step on ``H``.

    Args:
        p: current unit vector. Hp: ``H p``. into: form ``p_next`` in ``Hp``'s tensors (the caller's
            ``Hp`` is consumed; an entry sharing memory with ``p`` is formed out of place); the same
            values either way.

    Returns:
        ``(rayleigh, p_next)``: ``rayleigh = p^T H p`` as a Python float and ``p_next = H p / ||H
        p||`` (``p`` itself when ``H p`` is zero or not finite).
    """
    rq = float(tree.dot(p, Hp))
    n = float(tree.norm(Hp))
    if n > 0 and math.isfinite(n):
        if into:
            return rq, {k: (Hp[k] / n if shares(Hp[k], p[k]) else Hp[k].div_(n)) for k in Hp}
        return rq, {k: Hp[k] / n for k in Hp}
    return rq, dict(p)


def _flat64(v: Mapping, keys) -> "np.ndarray":
    import numpy as np

    if not keys:
        return np.zeros(0)
    return np.concatenate([v[k].detach().to(torch.float64).reshape(-1).cpu().numpy()
                           for k in keys])


def _unflat(x, like: Mapping) -> dict:
    out, i = {}, 0
    for k, t in like.items():
        n = t.numel()
        out[k] = torch.as_tensor(x[i:i + n], dtype=torch.float64).reshape(t.shape).to(
            dtype=t.dtype, device=t.device)
        i += n
    return out


def hessian_extremes(hvp, like: Mapping, v0: Mapping | None = None, tol: float = SHARPNESS_TOL,
                     seed: int = 0, maxiter: int | None = None) -> Extremes:
    """``lambda_max`` and ``lambda_min`` of ``H`` by implicitly restarted Lanczos on HVPs.

    ``scipy.sparse.linalg.eigsh(A, k=2, which="BE")`` (ARPACK) on a
    :class:`scipy.sparse.linalg.LinearOperator` whose ``matvec`` is one HVP:
    the flattened parameter vector in float64 (parameters in key order) is
    cast to ``like``'s dtype and device, ``hvp`` applied, and the product read
    back in float64.  ARPACK's stopping rule is ``||H v - lambda v|| <= tol |lambda|``
    per pair; the pairs returned are then checked against
    ``||H v - lambda v|| <= tol ||H||`` (:data:`SHARPNESS_TOL`) with two more products,
    the residual recorded in :attr:`Extremes.residual`.

    Args:
        hvp: ``hvp(v) -> H v`` (dicts keyed like ``like``).
        like: the parameters (keys, shapes, dtype, device).
        v0: start vector (warm start: the previous iteration's eigenvectors summed);
            ``None``: the seeded vector of :func:`init_power_vector`.
        tol: ARPACK's relative tolerance.
        seed: seed of the start vector when ``v0`` is ``None``.
        maxiter: ARPACK restarts (default ``max(100, 10 n)``); on no convergence the
            best pairs found are returned (their residual says how far they are).

    Returns:
        :class:`Extremes` (``hvps`` counts every product, the residual check included).
    """
    import numpy as np
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    keys = list(like)
    n = sum(like[k].numel() for k in keys)
    count = [0]

    def matvec(x):
        count[0] += 1
        return _flat64(hvp(_unflat(np.asarray(x).reshape(-1), like)), keys)

    if v0 is None:
        v0 = init_power_vector(like, seed)
    start = _flat64(v0, keys)
    if not np.isfinite(start).all() or np.linalg.norm(start) == 0:
        start = _flat64(init_power_vector(like, seed), keys)
    if n <= 2:  # ARPACK needs k < n: the dense matrix from n products
        dense = np.column_stack([matvec(e) for e in np.eye(n)])
        w, V = np.linalg.eigh(0.5 * (dense + dense.T))
        w, V = w[[0, -1]], V[:, [0, -1]]
    else:
        op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
        ncv = min(n, 20)
        try:
            with _one_blas_thread():
                w, V = eigsh(op, k=2, which="BE", v0=start, tol=tol, ncv=ncv, maxiter=maxiter
                             or max(100, 10 * n))
        except ArpackNoConvergence as exc:
            w, V = exc.eigenvalues, exc.eigenvectors
            if len(w) < 2:
                w = np.array([np.nan, np.nan])
                V = np.zeros((n, 2))
        order = np.argsort(w)
        w, V = w[order], V[:, order]
    vmin, vmax = _unflat(V[:, 0], like), _unflat(V[:, -1], like)
    res = pair_residual(hvp, (float(w[-1]), vmax), (float(w[0]), vmin))
    return Extremes(w[-1], w[0], vmax, vmin, count[0] + 2, res, True)


def solve_extremes(hvp, like: Mapping, v0: Mapping | None = None, tol: float = SHARPNESS_TOL,
                   seed: int = 0, store=None) -> Extremes:
    """The extreme eigenpairs of ``H`` to ``tol``, by the solver the model's size calls for.

    A model below :func:`crosscurv.numeric.offload.large_model`'s size: :func:`hessian_extremes`
    (ARPACK, its basis and work arrays about 24 float64 parameter-sized vectors); a large one:
    :func:`crosscurv.numeric.lanczos.lanczos_extremes` (Lanczos in the parameters' dtype, its basis
    parked in ``store``, at most three parameter-sized vectors in memory), so that the solve costs a
    fixed multiple of one gradient step's memory at every model size.  Both meet the same residual
    test; the choice depends on the model alone, never on where the vectors are parked.
    """
    if _large(like):
        return lanczos_extremes(hvp, like, v0, tol, seed, store=store)
    return hessian_extremes(hvp, like, v0, tol, seed)


def _large(like: Mapping) -> bool:
    from .offload import large_model

    first = next(iter(like.values()), None)
    return first is not None and large_model(sum(t.numel() for t in like.values()),
                                             first.element_size())


def _one_blas_thread():
    """SciPy's BLAS (ARPACK's and lobpcg's vector algebra) limited to one thread while the extremes
    are computed: a BLAS thread pool splits its sums by thread count, so without the limit the
    extremes of one run on one machine would depend on how many BLAS threads the process happened to
    start with (a Ray worker imports NumPy before the sweep sets its thread count)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _lobpcg_end(hvp, like: Mapping, v: Mapping, largest: bool, atol: float, maxiter: int):
    """One end of the spectrum by ``scipy.sparse.linalg.lobpcg`` (block size 1) warm-started from
    ``v``.

    Returns ``(lambda, unit eigenvector, residual norm, products used)``; the residual is ``||H x -
    lambda x||`` recomputed from lobpcg's last products (no extra product).
    """
    import warnings

    import numpy as np
    from scipy.sparse.linalg import LinearOperator, lobpcg

    keys = list(like)
    n = sum(like[k].numel() for k in keys)
    count = [0]

    def matmat(X):
        X = np.asarray(X).reshape(n, -1)
        count[0] += X.shape[1]
        return np.column_stack([_flat64(hvp(_unflat(X[:, j], like)), keys) for j in range(X.shape[
            1])])

    op = LinearOperator((n, n), matvec=lambda x: matmat(x)[:, 0], matmat=matmat, dtype=np.float64)
    x0 = _flat64(v, keys).reshape(n, 1)
    with warnings.catch_warnings():
        # "not reaching the requested tolerance" is read from the residual below
        warnings.simplefilter("ignore")
        with _one_blas_thread():
            lam, X, rnorms = lobpcg(op, x0, tol=atol, maxiter=maxiter, largest=largest,
                                    retResidualNormsHistory=True)
    res = float(np.ravel(rnorms[-1])[0]) if len(rnorms) else math.inf
    x = X[:, 0] / np.linalg.norm(X[:, 0])
    return float(lam[0]), _unflat(x, like), res, count[0]


def track_extremes(hvp, like: Mapping, previous: "Extremes | None", k: int,
                   tol: float = SHARPNESS_TOL, every: int = SHARPNESS_EVERY, seed: int = 0,
                   maxiter: int = 20, store=None) -> Extremes:
    """The extreme eigenpairs of ``H_JC^k`` converged to ``tol`` every ``every`` iterations,
    warm-started.

    * ``k = 0`` (``previous`` is ``None``, or not finite): :func:`solve_extremes` solves (ARPACK
      Lanczos, or for a large model Lanczos with its basis parked in ``store``);
    * ``k % every == 0``, large model: :func:`solve_extremes` from ``v0 = v_max + v_min``;
    * ``k % every == 0``, otherwise: each end is refined by ``scipy.sparse.linalg.lobpcg`` (block
      size 1, at most ``maxiter`` iterations) from the previous eigenvector until ``||H v - lambda
      v|| <= tol ||H_prev|| / 2`` (accepted up to ``tol max(||H_prev||, ||H||)``); an end that does
      not get there starts a Lanczos solve from ``v0 = v_max + v_min``.  Each returned Rayleigh
      quotient is then within its residual of an eigenvalue of ``H`` (Krylov-Weinstein);
    * otherwise nothing is computed: ``previous`` is returned with ``hvps = 0`` (the values of the
      last converged iteration; the protocol folds in its one-product power iteration, a lower bound
      of ``lambda_max(H_JC^k)``, where a current value matters: the regime test and ``||H||``).

    ``hvps`` counts every product of this iteration.
    """
    if previous is None or not math.isfinite(previous.norm):
        v0 = None if previous is None else {n: previous.v_max[n] + previous.v_min[n]
                                            for n in previous.v_max}
        return solve_extremes(hvp, like, v0, tol, seed, store)
    if every > 1 and k % every:
        return Extremes(previous.lam_max, previous.lam_min, previous.v_max, previous.v_min, 0,
                        previous.residual, False)
    # lobpcg's float64 work arrays are several parameter-sized vectors: the parked basis instead
    if _large(like):
        return solve_extremes(hvp, like, {m: previous.v_max[m] + previous.v_min[m]
                                          for m in previous.v_max}, tol,
                              seed, store)
    n = sum(t.numel() for t in like.values())
    # half the tolerance: lobpcg's last reported residual may lag its result
    atol = 0.5 * tol * previous.norm
    if n < 10 or atol <= 0:  # lobpcg needs n >= 5 x block size with room to spare
        return hessian_extremes(hvp, like, {m: previous.v_max[m] + previous.v_min[m]
                                            for m in previous.v_max}, tol,
                                seed)
    lmax, vmax, rmax, cmax = _lobpcg_end(hvp, like, previous.v_max, True, atol, maxiter)
    lmin, vmin, rmin, cmin = _lobpcg_end(hvp, like, previous.v_min, False, atol, maxiter)
    scale = max(abs(lmax), abs(lmin), previous.norm)
    res = max(rmax, rmin) / scale if scale > 0 else math.inf
    if math.isfinite(res) and res <= tol and lmax >= lmin:
        return Extremes(lmax, lmin, vmax, vmin, cmax + cmin, res, False)
    solved = hessian_extremes(hvp, like, {m: vmax[m] + vmin[m] for m in vmax}, tol, seed)
    solved.hvps += cmax + cmin
    return solved


class EstimateState:
    """The scalars the estimates carry from iteration ``k`` to ``k + 1`` (resumable).

    The parameter-sized vectors (``z``, ``y``, the pending recursive term ``w``, the power vector
    ``p``) live in the protocol's store (:mod:`crosscurv.numeric.offload`), updated by
    :func:`propagate`; this holds the rest.

    Attributes:
        q: pending quadratic term ``1/2 Delta^{k-1} . H_JC^{k-1} Delta^{k-1}``
            (``None`` at ``k = 0``).
        unorms: ``[||u^0||, ..., ||u^{k-1}||]`` (Python floats). G, L: running estimates (module
        docstring). rayleigh: the last power-iteration estimate ``p^T H_JC^k p``. lam_max, lam_min:
        the last converged extreme eigenvalues (:func:`track_extremes`; their
            eigenvectors are carried in the store as ``vmax``, ``vmin``).
        errors: the error estimates' scalars
        (:class:`crosscurv.numeric.error_estimates.ErrorState`). defects: the realised defects of
        the last records (:class:`crosscurv.numeric.error_estimates.DefectState`;
            the error columns of optimizer runs).
        certificates: what the records' certificates carry
        (:class:`crosscurv.numeric.certificate.CertificateState`).
    """

    def __init__(self):
        self.q: torch.Tensor | None = None
        self.unorms: list[float] = []
        self.G = 0.0
        self.L = 0.0
        self.rayleigh = math.nan
        self.lam_max = math.nan
        self.lam_min = math.nan
        self.errors = ErrorState()
        self.defects = DefectState()
        self.certificates = CertificateState()

    def observe_gradient_norm(self, n: float) -> float:
        """Fold ``n = ||g||`` of a gradient into ``G`` (a non-finite norm is skipped); returns
        ``n``.
        """
        if math.isfinite(n):
            self.G = max(self.G, n)
        return n

    def observe_power(self, p: Mapping, Hp: Mapping) -> dict:
        """One power step with ``H_JC^k p``: fold ``|p^T H p|`` into ``L``; returns the next vector,
        formed in ``Hp``'s tensors (``Hp`` is consumed)."""
        self.rayleigh, p_next = power_step(p, Hp, into=True)
        if math.isfinite(self.rayleigh):
            self.L = max(self.L, abs(self.rayleigh))
        return p_next

    def bound(self, lr: float) -> float:
        """Theorem 3's bound at ``k = len(unorms)`` with the current ``G`` and ``L`` (float64)."""
        return bound_bk(self.unorms, lr, self.G, self.L)

    def state_dict(self) -> dict:
        """What :meth:`from_state_dict` needs to continue bit for bit (for ``torch.save``)."""
        return {"q": self.q, "unorms": list(self.unorms), "G": self.G, "L": self.L,
                "rayleigh": self.rayleigh, "lam_max": self.lam_max, "lam_min": self.lam_min,
                "errors": self.errors.state_dict(), "defects": self.defects.state_dict(),
                "certificates": self.certificates.state_dict()}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> "EstimateState":
        obj = cls()
        q = state["q"]
        if q is not None and not isinstance(q, torch.Tensor):
            raise TypeError("q")
        obj.q = q
        obj.unorms = [float(x) for x in state["unorms"]]
        obj.G = float(state["G"])
        obj.L = float(state["L"])
        obj.rayleigh = float(state.get("rayleigh", math.nan))
        obj.lam_max = float(state.get("lam_max", math.nan))
        obj.lam_min = float(state.get("lam_min", math.nan))
        obj.errors = ErrorState.from_state_dict(state.get("errors", {}))
        obj.defects = DefectState.from_state_dict(state.get("defects", {}))
        obj.certificates = CertificateState.from_state_dict(state.get("certificates", {}))
        return obj
