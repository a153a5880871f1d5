"""One retained graph per point: value, gradient, ``H v``, row/column-restricted products and ``M_S
v`` vs dense float64."""

import pytest
import torch

from crosscurv.numeric import Task, tree
from crosscurv.numeric.hvp import HVPError, grad
from crosscurv.numeric.point import PointCurvature, masked_product_at
from crosscurv.numeric.steps import block_keys
from tests.numeric.cases import (check_restricted_products, CASES, all_case_patterns, cached_dense,
                                 dense_mask, patterns_for, random_direction, relerr)

TOL = 1e-10
dense = cached_dense



@pytest.mark.parametrize("case", list(CASES))
def test_value_gradient_and_many_products_on_one_graph(case):
    task, H, g = dense(case)
    point = PointCurvature(task.loss, task.params)
    value, g_ref = grad(task.loss, task.params)
    assert float(point.value) == float(value)
    assert relerr(tree.flatten(point.grad), g) < TOL
    for seed in (1, 2, 3):  # the graph serves any number of products
        v = random_direction(task.params, seed)
        assert relerr(tree.flatten(point.hvp(v)), H @ tree.flatten(v)) < TOL


@pytest.mark.parametrize("case", list(CASES))
def test_restricted_rows_and_columns_are_dense_submatrix_products(case):
    task, H, _ = dense(case)
    check_restricted_products(PointCurvature(task.loss, task.params), task, H, TOL)


@pytest.mark.parametrize("case,pat", all_case_patterns())
def test_masked_product_matches_dense(case, pat):
    task, H, _ = dense(case)
    pattern = patterns_for(task.n_blocks)[pat]
    v = random_direction(task.params, 11)
    out = masked_product_at(PointCurvature(task.loss, task.params), block_keys(task), pattern, v)
    assert list(out) == list(task.params)
    flat = tree.flatten(out)
    if pattern.is_jacobi:
        assert torch.count_nonzero(flat) == 0
    else:
        assert relerr(flat, (H * dense_mask(task, pattern)) @ tree.flatten(v)) < TOL


def test_bad_vectors_and_use_after_release():
    task = CASES["tanh_mlp"]()
    point = PointCurvature(task.loss, task.params)
    k = next(iter(task.params))
    with pytest.raises(HVPError, match="not a parameter"):
        point.hvp({"nope": torch.zeros(1)})
    with pytest.raises(HVPError, match="shape"):
        point.hvp({k: torch.zeros(7, 7, 7)})
    with pytest.raises(HVPError, match="unknown row"):
        point.hvp({k: torch.zeros_like(task.params[k])}, rows=["nope"])
    point.release()
    # the gradient outlives the graph
    assert relerr(tree.flatten(point.grad), dense(("tanh_mlp"))[2]) < TOL
    with pytest.raises(RuntimeError, match="release"):
        point.hvp(point.grad)


def test_linear_and_constant_losses_have_zero_curvature():
    a = torch.arange(3.0, dtype=torch.float64)
    lin = Task({"a": a.clone(), "b": torch.ones(2, dtype=torch.float64)}, lambda p: (p["a"]
        * a).sum(), {"x": ["a"], "y": ["b"]})
    point = PointCurvature(lin.loss, lin.params)
    assert torch.equal(point.grad["a"], a) and torch.equal(point.grad["b"], torch.zeros(2,
        dtype=torch.float64))
    out = point.hvp({"a": torch.ones(3, dtype=torch.float64), "b": torch.ones(2,
                                                                              dtype=torch.float64)})
    assert all(torch.count_nonzero(t) == 0 for t in out.values())
