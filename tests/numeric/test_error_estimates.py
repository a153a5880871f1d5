"""Converged Hessian extremes and a-posteriori error estimates against dense float64 references.

* The extremes of :func:`crosscurv.numeric.estimates.hessian_extremes` / :func:`track_extremes`
  equal ``numpy.linalg.eigvalsh`` of the dense Hessian to the stated tolerance, at ``theta_JC^k``
  along a run.
* On a quadratic (no cubic remainder) and on the tanh MLP at a small step, every error column covers
  ``|estimate - gap|`` at every iteration, and every certified winner is the measured one.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric import error_estimates as errs
from crosscurv.numeric.estimates import (SHARPNESS_EVERY, SHARPNESS_TOL, hessian_extremes,
                                         track_extremes)
from crosscurv.numeric.metrics import certified_metrics
from crosscurv.numeric.protocol import run_protocol
from crosscurv.numeric.records import ESTIMATES
from tests.numeric.cases import dense_hessian, tanh_mlp
from tests.numeric.test_estimates import quadratic_task


def _matrix_hvp(H: torch.Tensor, like):
    def hvp(v):
        return tree.unflatten(H @ tree.flatten(v), like)
    return hvp


def test_lanczos_extremes_equal_dense_eigenvalues_and_tracking_follows_a_perturbation():
    gen = torch.Generator().manual_seed(3)
    like = {"a": torch.zeros(10, dtype=torch.float64), "b": torch.zeros(4, 5, dtype=torch.float64)}
    A = torch.randn(30, 30, generator=gen, dtype=torch.float64)
    H = 0.5 * (A + A.T)
    ext = hessian_extremes(_matrix_hvp(H, like), like)
    w = np.linalg.eigvalsh(H.numpy())
    scale = max(abs(w[0]), abs(w[-1]))
    assert ext.residual <= SHARPNESS_TOL
    assert abs(ext.lam_max - w[-1]) <= SHARPNESS_TOL * scale and abs(ext.lam_min - w[
        0]) <= SHARPNESS_TOL * scale
    # a nearby matrix: the warm-started refinement reaches the tolerance with fewer products than a
    # solve
    B = torch.randn(30, 30, generator=gen, dtype=torch.float64)
    H2 = H + 1e-3 * 0.5 * (B + B.T)
    w2 = np.linalg.eigvalsh(H2.numpy())
    # between converged iterations: carried, no product
    kept = track_extremes(_matrix_hvp(H2, like), like, ext, 1)
    assert kept.hvps == 0 and kept.lam_max == ext.lam_max
    tr = track_extremes(_matrix_hvp(H2, like), like, ext, 10)
    assert not tr.solved and tr.hvps < ext.hvps
    assert abs(tr.lam_max - w2[-1]) <= SHARPNESS_TOL * scale and abs(tr.lam_min - w2[
        0]) <= SHARPNESS_TOL * scale


def test_recorded_extremes_are_the_dense_hessians_along_the_jc_trajectory():
    task, lr, K = tanh_mlp(), 0.1, 2 * SHARPNESS_EVERY
    res = run_protocol(task, "gs", lr, K)
    theta = tree.clone(task.params)
    for k in range(1, K + 1):
        g = torch.func.grad(lambda p: task.loss(p))(theta)
        theta = {n: theta[n] - lr * g[n] for n in theta}
        rec = res.records[k - 1]
        if k % SHARPNESS_EVERY:  # carried from the last converged iteration, no product
            assert rec["sharpness_hvps"] == 0
            assert k == 1 or rec["lambda_max"] == res.records[k - 2]["lambda_max"]
            continue
        w = np.linalg.eigvalsh(dense_hessian(task, theta).numpy())
        scale = max(abs(w[0]), abs(w[-1]))
        assert abs(rec["lambda_max"] - w[-1]) <= SHARPNESS_TOL * scale, k
        assert abs(rec["lambda_min"] - w[0]) <= SHARPNESS_TOL * scale, k
        assert rec["sharpness_hvps"] >= 2


@pytest.mark.parametrize("case, lr, K", [("quadratic", 0.1, 40), ("tanh_mlp", 0.05, 40)])
def test_error_columns_cover_the_estimates_error_and_certified_winners_are_right(case, lr, K):
    task = quadratic_task()[0] if case == "quadratic" else tanh_mlp()
    res = run_protocol(task, "gs", lr, K)
    for rec in res.records:
        for e in ESTIMATES:
            err = rec[f"{e}_err"]
            assert math.isfinite(err) and err >= 0
            assert abs(rec[e] - rec["gap"]) <= err, (case, rec["k"], e, rec[e], rec["gap"], err)
            if rec[f"{e}_cert"] != 0:
                assert rec[f"{e}_cert"] == math.copysign(1.0, rec["gap"])
    cert = certified_metrics([r["gap"] for r in res.records], [r["recursive"] for r in res.records],
                             [r["recursive_cert"] for r in res.records], [r["gap_err"]
                                                                          for r in res.records])
    assert cert["precision"] == 100.0 and cert["coverage"] > 50.0


def test_error_formulas():
    assert errs.step_remainder(0.1, 2.0, 3.0, 0.5) == pytest.approx(0.5 * 0.1 * 2.0 * 9.0 + 0.5)
    assert errs.rho_sample(1.0, 0.25, 0.5) == pytest.approx(2 * 0.75 / 0.25)
    assert errs.rho_sample(1.0, 2.0, 0.5) == 0.0 and errs.rho_sample(1.0, 0.0, 0.0) == 0.0
    assert errs.propagate_remainder(2.0, 1.5, 0.25) == pytest.approx(3.25)
    assert errs.cumulative_error(2.0, 3.0, 0.5, 0.1, 0.0) == pytest.approx(2 * 0.1 + 3 * (0.05
                                                                                          + 0.005))
    assert errs.cumulative_error(1e200, 1e200, 1e200, 1e200, 1e200) == math.inf
    assert errs.certify(0.3, 0.1, True) == 1.0 and errs.certify(-0.3, 0.1, True) == -1.0
    assert errs.certify(0.3, 0.1, False) == 0.0 and errs.certify(0.05, 0.1, True) == 0.0
    assert errs.certify(math.nan, 0.1, True) == 0.0 and errs.certify(0.3, math.nan, True) == 0.0
    assert errs.in_regime(0.1, 19.9) and not errs.in_regime(0.1, 20.0) and not errs.in_regime(0.1,
        math.nan)


def test_defect_formulas():
    gaps, ests = [1.0, 2.0, 3.0, 4.0, 5.0], [0.9, 2.5, 3.0, math.nan, 4.0]
    got = errs.defect_interval(gaps, ests, factor=2.0, window=2)
    # defects 0.1, -0.5, 0, nan, 1; k=1, 2: fewer than 2 defects; k=3: [-0.5 - 2*0.6, 0.1 + 2*0.6];
    # k=4: (-0.5, 0) -> [-1.5, 1.0]; k=5: the window holds a NaN
    inf = math.inf
    assert got[0] == got[1] == got[4] == (-inf, inf)
    assert got[2] == pytest.approx((-1.7, 1.3)) and got[3] == pytest.approx((-1.5, 1.0))
    assert errs.defect_interval(gaps, ests, factor=0.0, window=1)[3] == (0.0, 0.0)
    assert errs.regime_so_far([0.5, 1.9, 2.0, 0.1]) == [True, True, False, False]
    assert errs.regime_so_far([0.5, math.nan, 0.1]) == [True, False, False]
    # defects 0, 0.5, 0.5, ...: a systematic defect of one sign keeps a small estimate certified
    iv, c = errs.defect_certificates([1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 0.5, 0.5, 0.5, 0.5], [0.1]
                                     * 4 + [3.0],
                                     factor=1.0, window=2)
    # k=3: d in (0, 0.5): [-0.5, 1.0] -> 0.5 + [-0.5, 1.0] touches 0: not certified; k=4: (0.5, 0.5)
    # -> certified
    assert iv[3] == (0.5, 0.5) and c == [0.0, 0.0, 0.0, 1.0, 0.0]
    # the bound certifies where the interval does not exist yet
    _, c = errs.defect_certificates([1.0, 1.0], [0.5, -0.5], [0.1, 0.1], bound_errs=[0.1,
        math.nan], window=2)
    assert c == [1.0, 0.0]
    assert errs.defect_calibration([1.0, 2.0], [0.5, 2.0], [(0.0, 0.4), (-1.0, 1.0)]) == 50.0
    with pytest.raises(ValueError):
        errs.defect_interval(gaps, ests, window=0)


def test_defect_state_gives_the_columns_records_and_survives_a_checkpoint():
    rng = np.random.default_rng(0)
    gaps = list(rng.normal(0.0, 1.0, 30))
    ests = [g + 0.1 * x for g, x in zip(gaps, rng.normal(0.3, 1.0, 30))]
    top = [0.5] * 25 + [2.5] + [0.5] * 4
    bound = [0.05] * 30
    want_iv, want_c = errs.defect_certificates(gaps, ests, top, bound)
    assert want_iv == [(lo, hi) for lo, hi in errs.defect_interval(gaps, ests)]
    state = errs.DefectState()
    for k in range(30):
        if k == 13:  # a checkpoint and a resume in the middle
            state = errs.DefectState.from_state_dict(json.loads(json.dumps(state.state_dict())))
        lo, hi, c = state.record("recursive", gaps[k], ests[k], bound[k], top[k] < 2.0)
        assert (lo, hi) == want_iv[k] and c == want_c[k], k
    assert not state.inside and want_c[25:] == [0.0] * 5


@pytest.mark.parametrize("case, lr, K", [("quadratic", 0.1, 40), ("tanh_mlp", 0.05, 40)])
def test_defect_certificates_are_right_and_calibrated(case, lr, K):
    """On the small float64 problems (the gap is the dense float64 difference of the two
    trajectories' losses): every winner the defect interval certifies, alone or with the bound, is
    the measured one; the interval holds ``gap - estimate`` at >= 90% of the iterations it is
    defined at; with the bound it certifies at least what the bound does."""
    task = quadratic_task()[0] if case == "quadratic" else tanh_mlp()
    res = run_protocol(task, "gs", lr, K)
    cols = {name: [r[name] for r in res.records] for name in res.records[0]}
    eta_s = [lr * max(a, b) for a, b in zip(cols["lambda_max"], cols["sharpness"])]
    for e in ESTIMATES:
        iv, cert = errs.defect_certificates(cols["gap"], cols[e], eta_s)
        m = certified_metrics(cols["gap"], cols[e], cert, cols["gap_err"])
        assert m["certified"] > 0 and m["precision"] == 100.0, (case, e, m)
        n = errs.DEFECT_WINDOW
        assert errs.defect_calibration(cols["gap"][n:], cols[e][n:], iv[n:]) >= 90.0, (case, e)
        _, both = errs.defect_certificates(cols["gap"], cols[e], eta_s, cols[f"{e}_err"])
        m2 = certified_metrics(cols["gap"], cols[e], both, cols["gap_err"])
        bound_cert = [errs.certify(x, err, errs.in_regime(lr, top / lr)) for x, err, top in
                      zip(cols[e], cols[f"{e}_err"], eta_s)]
        bound = certified_metrics(cols["gap"], cols[e], bound_cert, cols["gap_err"])
        assert m2["precision"] == 100.0 and m2["coverage"] >= max(m["coverage"], bound[
            "coverage"]), (case, e)
