"""crosscurv.numeric.testing: the pytest helpers pass on correct inputs and fail with the evidence
in the message."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from crosscurv.experiments.problems.toys import coupled_spd, quartic_ridge_loss
from crosscurv.numeric import Task
from crosscurv.numeric.steps import scheme_step
from crosscurv.numeric.testing import assert_observed_order, assert_step_is
from crosscurv.theory.patterns import gauss_seidel, parse_pattern

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETAS = [0.1 * 2.0**-k for k in range(6)]


def test_observed_order_passes_and_drops_floor():
    errs = [3.0 * e**2 * (1 + 0.5 * e) for e in ETAS]
    study = assert_observed_order(errs, ETAS, 2)
    assert study.slope == pytest.approx(2.0, abs=0.05)
    # round-off points are dropped, not tolerated
    noisy = errs[:4] + [1e-17, -2e-17]
    study = assert_observed_order(noisy, ETAS, 2, floor=1e-15)
    assert len(study.dropped) == 2 and len(study.etas) == 4


def test_observed_order_failures_show_the_table():
    errs = [e**2 for e in ETAS]
    with pytest.raises(AssertionError) as exc:
        assert_observed_order(errs, ETAS, 3, what="gap remainder")
    msg = str(exc.value)
    assert "gap remainder: expected order 3" in msg and "least-squares order 2.0000" in msg
    header = msg.splitlines()[1]  # the error table follows the one-line summary
    assert all(w in header for w in ("eta", "error", "rate", "error/eta^3"))
    # a higher order fails an exact check but passes at_least
    with pytest.raises(AssertionError):
        assert_observed_order([e**3 for e in ETAS], ETAS, 2)
    assert_observed_order([e**3 for e in ETAS], ETAS, 2, at_least=True)
    # one bad pairwise rate fails even when the slope is fine
    kinked = [e**2 for e in ETAS]
    kinked[3] = kinked[2] * 0.9
    with pytest.raises(AssertionError, match="pairwise rates below"):
        assert_observed_order(kinked, ETAS, 2, tol=0.3)
    with pytest.raises(AssertionError, match="only 2 of 6 points lie above the floor"):
        assert_observed_order([1e-3, 1e-4, 1e-20, 0, 0, 0], ETAS, 2, floor=1e-15)
    with pytest.raises(AssertionError, match="6 errors for 5 step sizes"):
        assert_observed_order([1.0] * 6, ETAS[:5], 2)


def _task():
    """``1/2 x^T A x + 1/4 sum ((W x)_m)^4`` over two blocks of 2 coordinates."""
    gen = torch.Generator().manual_seed(3)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    A = coupled_spd(randn, 4, 1.0)
    W = randn(2, 4)
    params = {"u": randn(2), "v": randn(2)}
    return Task(params, quartic_ridge_loss(A, torch.zeros(4, dtype=torch.float64), W, 1.0, ["u",
                                                                                            "v"]),
                {"u": ["u"], "v": ["v"]})


def test_assert_step_is_passes_and_fails_with_report():
    task = _task()

    def gs_vu(params, lr):
        return scheme_step(task, params, gauss_seidel(2, (1, 0)), lr)

    report = assert_step_is(gs_vu, task, "gs:v,u")
    assert report.matches == ["gs:v,u"]
    assert_step_is(gs_vu, task, parse_pattern("gs:2,1", 2))
    with pytest.raises(AssertionError) as exc:
        assert_step_is(gs_vu, task, "gs")
    msg = str(exc.value)
    assert "step does not perform gs:u,v: matches gs:v,u" in msg
    assert "| candidate" in msg and "order of difference" in msg


def test_assert_step_is_rejects_mislabelled_lora():
    path = os.path.join(ROOT, "examples", "lora_steps.py")
    spec = importlib.util.spec_from_file_location("crosscurv_example_lora_h", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    task, step, _ = mod.mislabelled_alternating()
    assert_step_is(step, task, "jc")
    with pytest.raises(AssertionError, match="matches jc; it does NOT perform the declared "
                                             "pattern gs:B,A"):
        assert_step_is(step, task, "gs:B,A")


