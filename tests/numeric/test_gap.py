"""Loss gaps without cancellation (crosscurv.numeric.gap): exact on polynomials, error bounds that
hold, float32 gaps far below the spacing of the losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crosscurv.numeric.gap import difference_error, loss_gap, reconcile, segment_gap, ulp
from crosscurv.numeric.hvp import grad
from crosscurv.numeric import Task


def _poly(dtype=torch.float64):
    """A sextic in two blocks: ``f(t)`` along any segment is a polynomial of degree 5."""
    params = {"a": torch.tensor([0.3, -0.2], dtype=dtype), "b": torch.tensor([0.5], dtype=dtype)}

    def loss(p):
        a, b = p["a"], p["b"]
        return (a ** 6).sum() / 6 + (a ** 4).sum() * b.sum() + 0.5 * (
            b ** 2).sum() + a.sum() * b.sum()

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
    """Two float32 points a few parameter ulps apart: their losses' difference is a whole number of
    loss ulps; the segment integral is within its bound of the float64 truth and the bound is far
    below an ulp."""
    task64 = _poly()
    b64 = {"a": torch.tensor([0.7, -0.6], dtype=torch.float64), "b": torch.tensor([1.2],
        dtype=torch.float64)}
    step = {"a": torch.tensor([1e-6, -2e-6], dtype=torch.float64), "b": torch.tensor([5e-7],
        dtype=torch.float64)}
    b32 = {k: v.float() for k, v in b64.items()}
    a32 = {k: (b64[k] + step[k]).float() for k in b64}
    exact = _exact_gap(task64, {k: v.double() for k, v in a32.items()}, {k: v.double() for k,
                                                                         v in b32.items()})
    task32 = Task(b32, task64.loss, task64.blocks)
    gap, err = segment_gap(task32.loss, a32, b32, grad(task32.loss, a32)[1], grad(task32.loss, b32)[
        1])
    # float32 spacing of the loss
    ulp = float(np.spacing(np.float32(float(task32.loss(b32).detach()))))
    assert exact != 0.0
    assert abs(gap - exact) <= err
    assert err < 0.01 * ulp
    with torch.no_grad():
        plain = float(task32.loss(a32)) - float(task32.loss(b32))
    # the plain difference is off by up to an ulp
    assert abs(gap - exact) < 0.01 * abs(plain - exact) + 1e-12


@pytest.mark.parametrize("nodes", [2, 4])
def test_gauss_legendre_loss_gap_matches_the_segment_gap(nodes):
    task = _poly()
    b = task.params
    a = {"a": b["a"] + 0.01, "b": b["b"] + 0.02}
    gap, err = segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss, b)[1])
    tol = 1e-14 if nodes == 4 else 1e-6
    assert loss_gap(task, a, b, nodes) == pytest.approx(gap, rel=tol)


# -- reconcile: the recorded (gap, gap_err)
# ------------------------------------------------------------------
@pytest.mark.parametrize("dtype, np_dtype", [(torch.float32, np.float32), (torch.float64,
                                                                           np.float64)])
def test_ulp_is_numpy_spacing(dtype, np_dtype):
    rng = np.random.default_rng(0)
    for x in np.concatenate([rng.lognormal(0, 5, 200), [1.0, 2.0, 0.5, 2.3, 1e-30]]):
        assert ulp(float(np_dtype(x)), dtype) == float(np.spacing(np_dtype(x)))
        assert ulp(-float(np_dtype(x)), str(dtype).split(".")[1]) == float(np.spacing(np_dtype(x)))


def test_reconcile_keeps_a_precise_segment_value_that_agrees_with_the_losses():
    ls, lj = 2.3109219074249268, 2.3109188079833984  # float32 losses 13 ulps apart (mlp, k = 1)
    r = difference_error(ls, lj, torch.float32)
    assert r == 8 * float(np.spacing(np.float32(ls)))
    gap, err = 3.0e-6, 1e-8
    assert abs(gap - (ls - lj)) <= err + r
    assert reconcile(gap, err, ls, lj, torch.float32) == (gap, err)


def test_reconcile_falls_back_to_the_difference_where_the_segment_is_refuted_or_less_precise():
    ls, lj = 1.25, 1.0
    r = difference_error(ls, lj, "float32")
    # the segment claims 1e-9 but is 1e-3 off: refuted
    assert reconcile(0.251, 1e-9, ls, lj, "float32") == (0.25, r)
    # the segment agrees but its estimate is above the losses' rounding: the difference is the
    # better one
    assert reconcile(0.25, 2 * r, ls, lj, "float32") == (0.25, r)
    # a legacy record without an estimate
    assert reconcile(0.25, float("nan"), ls, lj, "float32") == (0.25, r)


def test_reconcile_is_idempotent():
    rng = np.random.default_rng(1)
    for _ in range(500):
        lj = float(np.float32(rng.uniform(0.1, 3)))
        ls = float(np.float32(lj + rng.normal(0, 1e-5)))
        gap = (ls - lj) + rng.normal(0, 1e-6)
        err = abs(rng.normal(0, 1e-6))
        once = reconcile(gap, err, ls, lj, torch.float32)
        assert reconcile(*once, ls, lj, torch.float32) == once


def _relu_mlp(seed: int) -> Task:
    """A float32 ReLU MLP on random data: the gradient has kinks along a segment (the 5-point rule's
    weak case)."""
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.randn(256, 10, generator=gen), torch.randint(0, 3, (256,), generator=gen)
    params = {"w1": torch.randn(10, 64, generator=gen) / 3, "w2": torch.randn(64, 64,
                                                                              generator=gen) / 8,
              "w3": torch.randn(64, 3, generator=gen) / 8}

    def loss(p):
        dt = p["w1"].dtype
        h = torch.relu(torch.relu(x.to(dt) @ p["w1"]) @ p["w2"])
        return torch.nn.functional.cross_entropy(h @ p["w3"], y)

    return Task(params, loss, {"1": ["w1"], "2": ["w2"], "3": ["w3"]}, name="relu_mlp")


@pytest.mark.parametrize("scale", [1e-4, 1e-2, 0.3])
def test_reconciled_bound_holds_on_a_relu_network_near_and_far(scale):
    """Float32 ReLU points a short and a long way apart: the recorded (gap, gap_err) is within its
    bound of the float64 difference of the exact losses at the same float32 points."""
    for seed in range(4):
        task = _relu_mlp(seed)
        b = task.params
        gen = torch.Generator().manual_seed(100 + seed)
        a = {k: (v + scale * torch.randn(v.shape, generator=gen) * v.abs().mean()).float() for k,
             v in b.items()}
        exact = _exact_gap(task, {k: v.double() for k, v in a.items()}, {k: v.double() for k,
                                                                         v in b.items()})
        with torch.no_grad():
            ls, lj = float(task.loss(a)), float(task.loss(b))
        gap, err = reconcile(*segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss,
                                                                                       b)[1]),
                             ls, lj, torch.float32)
        assert abs(gap - exact) <= err, (seed, gap, err, exact)


def test_the_segment_estimate_alone_does_not_bound_a_relu_gap():
    """The finding reconcile answers: on the same ReLU points the Simpson-difference estimate is
    exceeded by the 5-point rule's true error at some seeds (kinks along the segment), while the
    reconciled bound holds."""
    missed = 0
    for seed in range(20):
        task = _relu_mlp(seed)
        b = task.params
        gen = torch.Generator().manual_seed(100 + seed)
        a = {k: (v + 1e-2 * torch.randn(v.shape, generator=gen) * v.abs().mean()).float() for k,
             v in b.items()}
        exact = _exact_gap(task, {k: v.double() for k, v in a.items()}, {k: v.double() for k,
                                                                         v in b.items()})
        gap, err = segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss, b)[1])
        missed += abs(gap - exact) > err
        with torch.no_grad():
            ls, lj = float(task.loss(a)), float(task.loss(b))
        gap, err = reconcile(gap, err, ls, lj, torch.float32)
        assert abs(gap - exact) <= err
    assert missed > 0


def test_the_inner_nodes_are_b_plus_t_delta_bit_for_bit():
    """The three nodes share one buffer: each is ``b + t Delta`` with the bits of that expression.
    """
    from crosscurv.numeric.gap import LOBATTO_NODES, SegmentGap

    gen = torch.Generator().manual_seed(1)
    b = {"w": torch.randn(300, 70, generator=gen), "c": torch.randn(5, generator=gen)}
    d = {k: torch.randn(v.shape, generator=gen) * 1e-3 for k, v in b.items()}
    before = {k: v.clone() for k, v in b.items()}
    seen = []

    def gradient(node):
        seen.append({k: v.clone() for k, v in node.items()})
        return {k: 2 * v for k, v in node.items()}

    SegmentGap(d).interior(None, b, d, gradient)
    assert len(seen) == 3
    for node, t in zip(seen, LOBATTO_NODES[1:-1]):
        assert all(torch.equal(node[k], b[k] + t * d[k]) for k in b)
    assert all(torch.equal(b[k], before[k]) for k in b)
