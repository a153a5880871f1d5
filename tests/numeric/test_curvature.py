"""``M_S v`` (Lemma 1), ``c_ij``, ``C_S`` (Theorem 1) and ``C_cross`` (Corollary 1) vs dense
float64.
"""

import pytest
import torch

import crosscurv.numeric.curvature as curvature
from crosscurv.numeric import tree
from crosscurv.numeric.curvature import (CrossCurvature, cross_curvature_table, masked_directions,
                                         masked_product, masked_products)
from crosscurv.numeric.hvp import grad
from crosscurv.theory.patterns import PatternError, gauss_seidel
from tests.numeric.cases import (CASES, all_case_patterns, cached_dense, block_index, dense_hessian,
                                 dense_mask, patterns_for, random_direction, relerr)

TOL = 1e-10
dense = cached_dense


@pytest.mark.parametrize("case,pat", all_case_patterns())
@pytest.mark.parametrize("method", ["forward", "reverse"])
def test_masked_product_matches_dense(case, pat, method):
    task, H, _ = dense(case)
    pattern = patterns_for(task.n_blocks)[pat]
    MS = H * dense_mask(task, pattern)
    v = random_direction(task.params, 11)
    out = masked_product(task, task.params, pattern, v, method)
    ref = MS @ tree.flatten(v)
    if pattern.is_jacobi:
        assert torch.count_nonzero(tree.flatten(out)) == 0
    else:
        assert relerr(tree.flatten(out), ref) < TOL


@pytest.mark.parametrize("case", list(CASES))
def test_masked_products_batch_several_vectors(case):
    task, H, _ = dense(case)
    for pattern in patterns_for(task.n_blocks).values():
        if pattern.is_jacobi:
            continue
        MS = H * dense_mask(task, pattern)
        vs = [random_direction(task.params, s) for s in (1, 2, 3)]
        outs = masked_products(task, task.params, pattern, vs)
        for v, o in zip(vs, outs):
            assert relerr(tree.flatten(o), MS @ tree.flatten(v)) < TOL


def test_one_hvp_per_distinct_fresh_set(monkeypatch):
    task, _, _ = dense("tanh_mlp")  # 4 blocks
    seen = []
    real = curvature.hvp_batch

    def spy(loss, params, vs, method="auto", chunk_size=None):
        seen.append(len(vs))
        return real(loss, params, vs, method, chunk_size)

    monkeypatch.setattr(curvature, "hvp_batch", spy)
    pats = patterns_for(4)
    expected = {"jc": None, "gs": 3, "gs_reversed": 3, "chain": 3, "partial_2<-1": 1,
                "shared_fresh": 1, "skip": 3}
    for name, n in expected.items():
        seen.clear()
        v = random_direction(task.params, 0)
        masked_product(task, task.params, pats[name], v)
        assert seen == ([] if n is None else [n]), name
        assert len(masked_directions(task, pats[name])) == (n or 0)
    seen.clear()
    masked_products(task, task.params, pats["gs"], [v, v])
    assert seen == [6]  # both vectors in one batch


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("method", ["forward", "reverse"])
def test_cross_curvature_table_matches_dense(case, method):
    task, H, g = dense(case)
    idx = block_index(task)
    n = task.n_blocks
    ref = torch.empty(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            ref[i, j] = g[idx == i] @ H[idx == i][:, idx == j] @ g[idx == j]
    table = cross_curvature_table(task, task.params, method=method)
    assert table.c.dtype == torch.float64 and table.c.shape == (n, n)
    assert relerr(table.c, ref) < TOL
    assert table.block_names == task.block_names
    assert table.loss == pytest.approx(float(task.loss(task.params)), rel=1e-14)
    assert table.grad_norm2 == pytest.approx(float(g @ g), rel=1e-12)
    # C_cross = g^T (H - D) g, with D the block diagonal of H
    D = H * (idx[:, None] == idx[None, :])
    c_cross = float(g @ (H - D) @ g)
    scale = float(g.abs() @ H.abs() @ g.abs())  # size of the summed terms (sums may cancel)
    assert table.C_cross == pytest.approx(c_cross, rel=TOL, abs=TOL * scale)
    assert table.gHg == pytest.approx(float(g @ H @ g), rel=TOL)
    for name, pattern in patterns_for(n).items():
        cs = float(g @ (H * dense_mask(task, pattern)) @ g)
        assert table.C_S(pattern) == pytest.approx(cs, rel=TOL, abs=TOL * scale), name
    # Corollary 1: every full GS order gives C_cross / 2
    assert table.C_S(gauss_seidel(n)) == pytest.approx(table.C_cross / 2, rel=1e-9)
    assert table.C_S(gauss_seidel(n, list(reversed(range(n))))) == pytest.approx(table.C_cross / 2,
                                                                                 rel=1e-9)


def test_table_with_given_gradient_and_at_other_points():
    task, _, _ = dense("bilinear_lora")
    p = tree.axpy(0.1, random_direction(task.params, 5), task.params)
    H = dense_hessian(task, p)
    _, g = grad(task.loss, p)
    table = cross_curvature_table(task, p, g=g)
    gf = tree.flatten(g)
    idx = block_index(task)
    assert table.c[0, 1] == pytest.approx(float(gf[idx == 0] @ H[idx == 0][:, idx == 1] @ gf[idx
        == 1]), rel=TOL)
    assert table.c[0, 1] == pytest.approx(float(table.c[1, 0]), rel=1e-12)  # H_ij = H_ji^T
    assert set(table.to_dict()) >= {"c", "C_cross", "block_names"}


def test_pattern_size_mismatch_is_an_input_error():
    task, _, _ = dense("tanh_mlp")
    with pytest.raises(PatternError, match="over 3 blocks"):
        masked_product(task, task.params, gauss_seidel(3), task.params)
    table = CrossCurvature(torch.zeros(4, 4, dtype=torch.float64), task.block_names)
    with pytest.raises(ValueError):
        table.C_S(gauss_seidel(3))


def test_C_S_takes_a_pattern_spelling():
    from tests.numeric.cases import tanh_mlp
    from crosscurv.theory.patterns import gauss_seidel

    task = tanh_mlp()
    table = cross_curvature_table(task)
    assert table.C_S("gs") == table.C_S(gauss_seidel(4))
    assert table.C_S("jc") == 0.0
