"""Loss gaps without cancellation (numeric.gap): exact on polynomials, error bounds that hold, float32 gaps
far below the spacing of the losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numeric.gap import loss_gap, segment_gap
from numeric.hvp import grad
from numeric import Task


def _poly(dtype=torch.float64):
    """A sextic in two blocks: ``f(t)`` along any segment is a polynomial of degree 5."""
    params = {"a": torch.tensor([0.3, -0.2], dtype=dtype), "b": torch.tensor([0.5], dtype=dtype)}

    def loss(p):
        a, b = p["a"], p["b"]
        return (a ** 6).sum() / 6 + (a ** 4).sum() * b.sum() + 0.5 * (b ** 2).sum() + a.sum() * b.sum()

    return Task(params, loss, {"a": ["a"], "b": ["b"]}, name="poly")


def _exact_gap(task, a, b):
    with torch.no_grad():
        return float(task.loss(a)) - float(task.loss(b))


def test_segment_gap_is_exact_for_a_polynomial_of_degree_six_and_its_bound_holds():
    task = _poly()
    b = task.params
    a = {"a": b["a"] + torch.tensor([0.05, -0.03], dtype=torch.float64), "b": b["b"] - 0.04}
    gap, err = segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss, b)[1])
    exact = _exact_gap(task, a, b)
    assert abs(gap - exact) <= 1e-15 * abs(exact) + 1e-17
    assert abs(gap - exact) <= err  # the estimate covers the true error
    assert err < 1e-3 * abs(exact)  # and is small against the gap


def test_identical_points_give_an_exact_zero_without_gradients():
    task = _poly()
    g = grad(task.loss, task.params)[1]
    assert segment_gap(task.loss, task.params, task.params, g, g) == (0.0, 0.0)


def test_float32_gap_far_below_the_loss_spacing_is_resolved():
    """Two float32 points a few parameter ulps apart: their losses' difference is a whole number of loss
    ulps; the segment integral is within its bound of the float64 truth and the bound is far below an ulp."""
    task64 = _poly()
    b64 = {"a": torch.tensor([0.7, -0.6], dtype=torch.float64), "b": torch.tensor([1.2], dtype=torch.float64)}
    step = {"a": torch.tensor([1e-6, -2e-6], dtype=torch.float64), "b": torch.tensor([5e-7], dtype=torch.float64)}
    b32 = {k: v.float() for k, v in b64.items()}
    a32 = {k: (b64[k] + step[k]).float() for k in b64}
    exact = _exact_gap(task64, {k: v.double() for k, v in a32.items()}, {k: v.double() for k, v in b32.items()})
    task32 = Task(b32, task64.loss, task64.blocks)
    gap, err = segment_gap(task32.loss, a32, b32, grad(task32.loss, a32)[1], grad(task32.loss, b32)[1])
    ulp = float(np.spacing(np.float32(float(task32.loss(b32).detach()))))  # float32 spacing of the loss
    assert exact != 0.0
    assert abs(gap - exact) <= err
    assert err < 0.01 * ulp
    with torch.no_grad():
        plain = float(task32.loss(a32)) - float(task32.loss(b32))
    assert abs(gap - exact) < 0.01 * abs(plain - exact) + 1e-12  # the plain difference is off by up to an ulp


@pytest.mark.parametrize("nodes", [2, 4])
def test_gauss_legendre_loss_gap_matches_the_segment_gap(nodes):
    task = _poly()
    b = task.params
    a = {"a": b["a"] + 0.01, "b": b["b"] + 0.02}
    gap, err = segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss, b)[1])
    tol = 1e-14 if nodes == 4 else 1e-6
    assert loss_gap(task, a, b, nodes) == pytest.approx(gap, rel=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_inner_products_are_bit_for_bit_the_separate_ones(dtype):
    """SegmentGap forms g . Delta and |g| . |Delta| from one float64 product: the same bits as two passes."""
    from numeric.gap import _absdot64, _dot64, _dot_absdot64

    gen = torch.Generator().manual_seed(3)
    a = {"w": torch.randn(257, 33, generator=gen, dtype=dtype) * 1e3, "b": torch.randn(7, generator=gen, dtype=dtype),
         "t": torch.randn(40, 6, generator=gen, dtype=dtype).t()}  # a non-contiguous entry
    b = {k: torch.randn(v.shape, generator=gen, dtype=dtype) * 1e-5 for k, v in a.items()}
    b["b"][2] = -0.0
    before = {k: v.clone() for k, v in a.items()}
    dot, absdot = _dot_absdot64(a, b)
    assert dot == _dot64(a, b) and absdot == _absdot64(a, b)
    assert absdot >= abs(dot) > 0
    for k in a:  # the inputs are left alone (a float64 entry's .to(float64) is the tensor itself)
        assert torch.equal(a[k], before[k])
