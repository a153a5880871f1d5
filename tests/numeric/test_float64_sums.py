"""crosscurv.numeric.float64_sums: chunked float64 sums against whole float64 copies and exact sums.
"""

import math

import pytest
import torch

from crosscurv.numeric import float64_sums as f64s
from crosscurv.numeric.float64_sums import CHUNK, absdot64, dot64, dot_absdot64, norm64, sum_sq64
from crosscurv.numeric.inplace import step_residual

EPS64 = 2.0 ** -52


def _pair(dtype, seed=3):
    """Two vectors with an entry of several chunks, one not a multiple of CHUNK, a small and a
    non-contiguous one."""
    gen = torch.Generator().manual_seed(seed)
    a = {"w": torch.randn(3 * CHUNK + 17, generator=gen, dtype=torch.float64).to(dtype) * 1e3,
         "m": torch.randn(300, 700, generator=gen, dtype=torch.float64).to(dtype),
         "b": torch.randn(7, generator=gen, dtype=torch.float64).to(dtype),
         "t": torch.randn(40, 6, generator=gen, dtype=torch.float64).to(dtype).t()}
    b = {k: (torch.randn(v.shape, generator=gen, dtype=torch.float64) * 1e-5).to(dtype) for k,
         v in a.items()}
    b["b"][2] = -0.0
    return a, b


def _exact_products(a, b):
    """The float64 products ``a_i b_i`` of every entry (exact for float32 operands), as Python
    floats.
    """
    return [float(x) for k in b for x in (a[k].double() * b[k].double()).reshape(-1)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dot_and_absdot_agree_with_the_exact_sum_of_the_products(dtype):
    """Each sum is within its float64 rounding of the correctly rounded sum (math.fsum) of the same
    products."""
    a, b = _pair(dtype)
    prods = _exact_products(a, b)
    want_dot, want_abs = math.fsum(prods), math.fsum(abs(p) for p in prods)
    dot, absdot = dot_absdot64(a, b)
    n = len(prods)
    bound = 4 * math.log2(n) * EPS64 * want_abs  # a blocked/pairwise float64 sum's rounding
    assert abs(dot - want_dot) <= bound and abs(absdot - want_abs) <= bound
    assert absdot >= abs(dot) > 0
    # the separate sums are the fused ones bit for bit
    assert dot == dot64(a, b) and absdot == absdot64(a, b)
    # a float32 accumulation would miss the bound by orders of magnitude
    f32 = float(sum((a[k].float() * b[k].float()).sum() for k in b))
    assert dtype == torch.float64 or abs(f32 - want_dot) > bound


def test_the_operands_are_read_only_and_small_entries_sum_as_whole_copies():
    a, b = _pair(torch.float64)
    before = {k: v.clone() for k, v in a.items()}
    dot64(a, b), absdot64(a, b), norm64(lambda x, t, p: x.copy_(p), a)
    # a float64 entry is copied into the buffer, not written
    assert all(torch.equal(a[k], before[k]) for k in a)
    small = {k: v for k, v in a.items() if v.numel() <= CHUNK}
    smallb = {k: b[k] for k in small}
    # one chunk per entry: the same order as whole copies
    whole = sum((small[k] * smallb[k]).sum() for k in smallb)
    assert dot64(small, smallb) == float(whole)


def test_norm_is_the_norm_of_the_formed_vector_chunk_by_chunk():
    a, b = _pair(torch.float32)
    got = norm64(lambda x, t, ac, bc: x.copy_(ac).sub_(t.copy_(bc).mul_(2.5)), a, b)
    dense = torch.cat([(a[k].double() - 2.5 * b[k].double()).reshape(-1) for k in a])
    assert got == pytest.approx(float(torch.linalg.vector_norm(dense)), rel=8 * EPS64 * math.log2(
        dense.numel()))
    assert float(sum_sq64(lambda x, t, ac, bc: x.copy_(ac), a, None)) == pytest.approx(
        float((torch.cat([a[k].double().reshape(-1) for k in a]) ** 2).sum()), rel=1e-14)
    assert norm64(lambda x, t, p: x.copy_(p), {}) == 0.0 and dot_absdot64({}, {}) == (0.0, 0.0)


def test_no_parameter_sized_float64_buffer_is_allocated(monkeypatch):
    """The buffers are at most CHUNK elements, whatever the size of the largest entry."""
    sizes = []
    real_empty = torch.empty

    def spy(*shape, **kw):
        out = real_empty(*shape, **kw)
        if kw.get("dtype") == torch.float64:
            sizes.append(out.numel())
        return out

    monkeypatch.setattr(f64s.torch, "empty", spy)
    a, b = _pair(torch.float32)
    dot64(a, b)
    assert sizes and max(sizes) == CHUNK < a["w"].numel()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_step_residual_over_several_chunks_is_the_dense_float64_expression(dtype):
    old, g = _pair(dtype, seed=5)
    u, _ = _pair(dtype, seed=6)
    lr = 0.0213
    lr2 = lr * lr
    new = {n: old[n] - lr * g[n] + lr2 * u[n] * 1.001 for n in old}
    dense = torch.cat([(new[n].double() - old[n].double() + lr * g[n].double() - lr2 * u[
        n].double()).reshape(-1)
                       for n in new])
    want = float(torch.linalg.vector_norm(dense))
    assert step_residual(new, old, g, lr, u, lr2) == pytest.approx(want, rel=8 * EPS64 * math.log2(
        dense.numel()))
