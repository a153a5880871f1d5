"""Lanczos with a parked basis against dense float64 eigendecompositions."""

import numpy as np
import pytest
import torch

from crosscurv.numeric import estimates, offload
from crosscurv.numeric.estimates import SHARPNESS_TOL, Extremes, solve_extremes, track_extremes
from crosscurv.numeric.lanczos import lanczos_extremes
from crosscurv.numeric.offload import Offloaded


def _problem(spectrum, dtype, seed=0):
    """A dense symmetric matrix with the given eigenvalues and an ``hvp`` on a two-block parameter
    dict."""
    rng = np.random.default_rng(seed)
    n = len(spectrum)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.asarray(spectrum, dtype=np.float64)) @ Q.T
    A = 0.5 * (A + A.T)
    At = torch.tensor(A, dtype=dtype)
    split = n // 3
    like = {"w": torch.zeros(split, dtype=dtype), "b": torch.zeros(n - split, dtype=dtype).reshape(
        -1, 1)}

    def hvp(v):
        y = At @ torch.cat([v["w"].reshape(-1), v["b"].reshape(-1)])
        return {"w": y[:split], "b": y[split:].reshape(-1, 1)}

    return A, like, hvp


def _check_against_dense(A, ext: Extremes, tol: float):
    w = np.linalg.eigvalsh(A)
    scale = max(abs(w[0]), abs(w[-1]))
    assert ext.residual <= tol
    # Krylov-Weinstein: a Rayleigh quotient with residual r is within r of an eigenvalue; at the
    # ends, of the end
    assert abs(ext.lam_max - w[-1]) <= tol * scale
    assert abs(ext.lam_min - w[0]) <= tol * scale
    for lam, v in ((ext.lam_max, ext.v_max), (ext.lam_min, ext.v_min)):
        x = np.concatenate([v["w"].double().reshape(-1).numpy(), v["b"].double().reshape(
            -1).numpy()])
        assert abs(np.linalg.norm(x) - 1) < 1e-5
        assert np.linalg.norm(A @ x - lam * x) <= tol * scale * 1.01


SPECTRA = {
    "separated": lambda rng: np.concatenate([rng.uniform(-3, 5, 298), [9.0, -6.0]]),
    "clustered ends": lambda rng: np.concatenate([rng.uniform(-1, 1, 296), [2.0, 1.999, -1.5,
                                                                            -1.4995]]),
    "one-sided": lambda rng: np.concatenate([rng.uniform(0.1, 1.0, 299), [3.0]]),
}


@pytest.mark.parametrize("name", list(SPECTRA))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("parked", [False, True])
def test_extremes_match_the_dense_eigendecomposition(name, dtype, parked, tmp_path):
    A, like, hvp = _problem(SPECTRA[name](np.random.default_rng(1)), dtype)
    store = Offloaded("cpu", str(tmp_path)) if parked else None
    try:
        ext = lanczos_extremes(hvp, like, store=store)
    finally:
        if store is not None:
            store.close()
    assert ext.v_max["w"].dtype == dtype and ext.v_max["b"].shape == like["b"].shape
    _check_against_dense(A, ext, SHARPNESS_TOL)


def test_parked_and_kept_bases_give_the_same_bits(tmp_path):
    A, like, hvp = _problem(SPECTRA["clustered ends"](np.random.default_rng(2)), torch.float32)
    store = Offloaded("cpu", str(tmp_path))
    try:
        parked = lanczos_extremes(hvp, like, store=store)
        assert not any(store.holds(f"lanczos.{j}") for j in range(100))  # the basis is released
    finally:
        store.close()
    kept = lanczos_extremes(hvp, like)
    assert (parked.lam_max, parked.lam_min, parked.hvps) == (kept.lam_max, kept.lam_min, kept.hvps)
    assert all(torch.equal(parked.v_max[k], kept.v_max[k]) for k in like)


def test_a_warm_start_needs_fewer_products():
    A, like, hvp = _problem(SPECTRA["separated"](np.random.default_rng(3)), torch.float64)
    cold = lanczos_extremes(hvp, like)
    warm = lanczos_extremes(hvp, like, v0={k: cold.v_max[k] + cold.v_min[k] for k in like})
    _check_against_dense(A, warm, SHARPNESS_TOL)
    assert warm.hvps < cold.hvps


def test_restarts_reach_the_tolerance_with_a_small_krylov_space():
    A, like, hvp = _problem(SPECTRA["clustered ends"](np.random.default_rng(4)), torch.float64)
    ext = lanczos_extremes(hvp, like, steps=4, cycles=200)
    _check_against_dense(A, ext, SHARPNESS_TOL)
    assert ext.hvps > 6  # more than one cycle of 4 products and its two residual products


def test_a_space_smaller_than_the_krylov_dimension_is_solved_exactly():
    A, like, hvp = _problem([4.0, -2.0, 1.0], torch.float64)
    ext = lanczos_extremes(hvp, like)
    assert abs(ext.lam_max - 4.0) < 1e-12 and abs(ext.lam_min + 2.0) < 1e-12


def test_non_finite_products_raise():
    _, like, _ = _problem([1.0, 2.0, 3.0, 4.0], torch.float64)
    with pytest.raises(ArithmeticError):
        lanczos_extremes(lambda v: {k: torch.full_like(t, float("nan")) for k, t in v.items()},
                         like)


def test_the_solver_follows_the_model_size(monkeypatch):
    A, like, hvp = _problem(SPECTRA["separated"](np.random.default_rng(5)), torch.float32)
    small = solve_extremes(hvp, like)
    n = sum(t.numel() for t in like.values())
    assert not offload.large_model(n, 4)
    monkeypatch.setattr(offload, "OFFLOAD_MIN_BYTES", offload.CARRIED_VECTORS * n * 4)
    assert offload.large_model(n, 4)
    calls = []
    real = estimates.hessian_extremes
    monkeypatch.setattr(estimates, "hessian_extremes", lambda *a, **k: calls.append(1) or real(*a,
                                                                                               **k))
    large = solve_extremes(hvp, like)
    # the warm-started refinement of a large model: Lanczos too
    tracked = track_extremes(hvp, like, large, 20)
    assert calls == []
    for ext in (small, large, tracked):
        _check_against_dense(A, ext, SHARPNESS_TOL)


def test_a_product_that_hands_back_its_input_leaves_the_basis_intact():
    """``H = diag(I, 3 I)`` by an ``hvp`` that returns its argument's first block itself (as
    autograd may hand back a ``grad_output``): the recurrence forms ``w`` in a copy of it, never in
    ``v_j``.
    """
    like = {"a": torch.zeros(5, dtype=torch.float64), "b": torch.zeros(3, dtype=torch.float64)}
    ext = lanczos_extremes(lambda v: {"a": v["a"], "b": 3.0 * v["b"]}, like, seed=1)
    assert ext.lam_max == pytest.approx(3.0, rel=1e-9) and ext.lam_min == pytest.approx(1.0,
                                                                                        rel=1e-9)
    assert ext.residual <= SHARPNESS_TOL
