"""The convolution with the hand-written double backward equals F.conv2d to every order used (float64)."""

import pytest
import torch
from torch.nn import functional as F

from experiments.models.conv import Conv2d, conv2d
from numeric import tree
from numeric.hvp import hvp, hvp_batch
from numeric.point import PointCurvature

CONFS = [(3, 1, 1), (3, 2, 1), (1, 2, 0), (1, 1, 0)]  # kernel, stride, padding


def _inputs(k, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 6, 6, generator=g, dtype=torch.float64, requires_grad=True)
    W = torch.randn(4, 3, k, k, generator=g, dtype=torch.float64, requires_grad=True)
    return x, W


@pytest.mark.parametrize("k,s,p", CONFS)
def test_values_first_and_second_derivatives_and_forward_mode(k, s, p):
    x, W = _inputs(k)
    assert torch.equal(conv2d(x, W, s, p), F.conv2d(x, W, None, s, p))
    fn = lambda a, b: conv2d(a, b, s, p).tanh()  # noqa: E731  (a non-linearity so second derivatives do not vanish)
    assert torch.autograd.gradcheck(fn, (x, W))
    assert torch.autograd.gradgradcheck(fn, (x, W))


def _net(custom):
    g = torch.Generator().manual_seed(1)
    params = {
        "w1": torch.randn(4, 2, 3, 3, generator=g, dtype=torch.float64) * 0.5,
        "w2": torch.randn(3, 4, 1, 1, generator=g, dtype=torch.float64) * 0.5,
    }
    x = torch.randn(3, 2, 5, 5, generator=g, dtype=torch.float64)
    conv = conv2d if custom else (lambda a, b, s, p: F.conv2d(a, b, None, s, p))

    def loss(q):
        h = torch.tanh(conv(x, q["w1"], 2, 1))
        return (conv(h, q["w2"], 1, 0) ** 2).sum() / 10 + (h ** 3).sum() / 7

    return params, loss


def test_every_hvp_method_and_batches_match_the_dense_hessian_of_plain_conv2d():
    params, loss = _net(custom=True)
    _, ref_loss = _net(custom=False)
    flat = tree.flatten(params)

    def f(vec):
        return ref_loss(tree.unflatten(vec, params))

    H = torch.func.hessian(f)(flat)
    g = torch.Generator().manual_seed(2)
    vs = [{k: torch.randn(t.shape, generator=g, dtype=torch.float64) for k, t in params.items()} for _ in range(3)]
    for v in vs:
        ref = H @ tree.flatten(v)
        for method in ("auto", "reverse"):
            out = tree.flatten(hvp(loss, params, v, method))
            assert torch.allclose(out, ref, rtol=1e-10, atol=1e-12), method
        assert torch.allclose(tree.flatten(PointCurvature(loss, params).hvp(v)), ref, rtol=1e-10, atol=1e-12)
    for method in ("auto", "reverse"):
        outs = hvp_batch(loss, params, vs, method)
        for v, o in zip(vs, outs):
            assert torch.allclose(tree.flatten(o), H @ tree.flatten(v), rtol=1e-10, atol=1e-12), method


def test_forward_mode_raises_and_auto_choices_fall_back_to_backward_passes():
    from numeric.third import third_derivative

    params, loss = _net(custom=True)
    _, ref_loss = _net(custom=False)
    g = torch.Generator().manual_seed(3)
    u, v, w = ({k: torch.randn(t.shape, generator=g, dtype=torch.float64) for k, t in params.items()} for _ in range(3))
    with pytest.raises(Exception):
        torch.func.jvp(loss, (params,), (v,))
    with pytest.raises(Exception):
        hvp(loss, params, v, "forward")
    ref = third_derivative(ref_loss, params, u, v, w, "forward")
    assert torch.allclose(third_derivative(loss, params, u, v, w, "auto"), ref, rtol=1e-10)
    assert torch.allclose(third_derivative(loss, params, u, v, w, "reverse"), ref, rtol=1e-10)


def test_module_refuses_a_bias():
    with pytest.raises(ValueError, match="no bias"):
        Conv2d(3, 4, 3, bias=True)
    m = Conv2d(3, 4, 3, stride=2, padding=1).double()
    x, _ = _inputs(3)
    assert torch.equal(m(x), F.conv2d(x, m.weight, None, 2, 1))
