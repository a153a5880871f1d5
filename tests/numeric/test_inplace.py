"""crosscurv.numeric.inplace: bit for bit the dict expressions it replaces, aliasing included."""

import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.estimates import propagate
from crosscurv.numeric.inplace import (add_scaled_into, norm_of, scaled_difference_into,
                                       step_residual)


def _vec(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(37, 53, generator=g).to(dtype), "b": torch.randn(1001, generator=g).to(
        dtype)}


def _clone(v):
    return {k: t.clone() for k, t in v.items()}


def _same(a, b):
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_updates_give_the_bits_of_the_expressions_they_replace(dtype):
    s, Hs, f = _vec(0, dtype), _vec(1, dtype), _vec(2, dtype)
    lr = 0.0371
    lr2 = lr * lr
    want = propagate(s, Hs, f, lr)  # (s - lr Hs) + lr^2 f
    # as the plain rule forms z
    got = add_scaled_into(scaled_difference_into(s, _clone(Hs), lr), _clone(f), lr2)
    assert _same(got, want)
    Hc = _clone(Hs)
    out = scaled_difference_into(s, Hc, lr)
    assert out is Hc and _same(out, propagate(s, Hs, None, lr))
    kept = _clone(f)
    assert _same(add_scaled_into(_clone(s), kept, lr2, keep=True), {n: s[n] + lr2 * f[n]
                                                                    for n in s})
    assert _same(kept, f)  # keep=True leaves the forcing as it was


def test_shared_buffers_are_formed_out_of_place():
    s = _vec(3)
    # H s handed back as the very tensors of s (autograd may return grad_outputs unchanged)
    alias = dict(s)
    want = propagate(s, s, None, 0.5)
    same = _clone(s)
    assert _same(scaled_difference_into(same, same, 0.5), want)
    same = _clone(s)
    assert _same(add_scaled_into(same, same, 0.25), {n: s[n] + 0.25 * s[n] for n in s})
    assert _same(alias, s)


def test_streamed_norm_equals_the_norm_of_the_materialised_vector():
    a, b = _vec(4), _vec(5)
    assert norm_of(a, lambda n: a[n] - b[n]) == float(tree.norm(tree.sub(a, b)))
    assert norm_of(a, lambda n: a[n] + b[n]) == float(tree.norm(tree.add(a, b)))
    x64 = {n: t.to(torch.float64) for n, t in a.items()}
    assert norm_of(a, lambda n: a[n].to(torch.float64)) == float(tree.norm(x64))
    assert norm_of(a, lambda n: a[n] - b[n], owned=True) == float(tree.norm(tree.sub(a, b)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_step_residual_is_the_float64_expression_and_reads_its_inputs_only(dtype):
    old, g, u = _vec(6, dtype), _vec(7, dtype), _vec(8, dtype)
    lr = 0.0213
    lr2 = lr * lr
    new = {n: old[n] - lr * g[n] + lr2 * u[n] for n in old}
    keep = [_clone(x) for x in (new, old, g, u)]

    def expression(with_u):
        x = {n: new[n].to(torch.float64) - old[n].to(torch.float64) + lr * g[n].to(torch.float64)
             for n in new}
        if with_u:
            x = {n: x[n] - lr2 * u[n].to(torch.float64) for n in x}
        return float(tree.norm(x))

    assert step_residual(new, old, g, lr, u, lr2) == expression(True)
    assert step_residual(new, old, g, lr, None, 0.0) == expression(False)
    # float64 inputs too are never written
    assert all(_same(a, b) for a, b in zip((new, old, g, u), keep))
