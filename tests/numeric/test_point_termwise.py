"""Term-by-term points (``Task.loss_terms``): value, gradient, ``H v``, restricted products and
``M_S v`` vs dense float64."""

import functools

import pytest
import torch

from crosscurv.numeric import Task, tree
from crosscurv.numeric.hvp import HVPError
from crosscurv.numeric.point import PointCurvature, TermwisePoint, masked_product_at
from crosscurv.numeric.protocol import choose_engine, run_protocol
from crosscurv.numeric.steps import block_keys
from crosscurv.numeric.task import TaskError
from tests.numeric.cases import (check_restricted_products, CASES, dense_gradient, dense_hessian,
                                 dense_mask, patterns_for, random_direction, relerr)

TOL = 1e-10


def _quartic(p, w):
    """``sum_k w_k sum (theta_k^4) / 4``: a term with curvature of its own."""
    return sum(wk * (p[k] ** 4).sum() / 4 for k, wk in zip(p, w))


def _linear(p, a):
    """``sum_k <a_k, theta_k>``: a term with zero curvature (its gradient is the constant ``a``)."""
    return sum((p[k] * a[k]).sum() for k in p)


def termwise_case(name: str) -> Task:
    """Case ``name`` plus a quartic and a linear term, written both as one loss and as three terms.
    """
    base = CASES[name]()
    w = [0.1 * (i + 1) for i in range(len(base.params))]
    a = random_direction(base.params, 21)
    terms = [base.loss, functools.partial(_quartic, w=w), functools.partial(_linear, a=a)]

    def loss(p):
        return terms[0](p) + terms[1](p) + terms[2](p)

    return Task(dict(base.params), loss, dict(base.blocks), name=f"{name}+terms", loss_terms=terms)


_REF: dict = {}


def _dense(name):
    if name not in _REF:
        task = termwise_case(name)
        _REF[name] = (task, dense_hessian(task), dense_gradient(task))
    return _REF[name]



@pytest.mark.parametrize("case", list(CASES))
def test_several_products_share_each_terms_graph_and_equal_one_at_a_time(case):
    """``products`` builds each term's graph once for all the vectors; every result is the dense
    ``H v`` and bit for bit what :meth:`TermwisePoint.hvp` gives for that vector alone."""
    task, H, _ = _dense(case)
    point = TermwisePoint(task.loss_terms, task.params)
    vs = [random_direction(task.params, seed) for seed in (3, 4, 5)]
    got = dict(point.products([(i, (lambda v=v: v)) for i, v in enumerate(vs)]))
    assert sorted(got) == [0, 1, 2]
    for i, v in enumerate(vs):
        assert relerr(tree.flatten(got[i]), H @ tree.flatten(v)) < TOL
        one = point.hvp(v)
        assert all(torch.equal(got[i][k], one[k]) for k in one)


@pytest.mark.parametrize("case", list(CASES))
def test_value_gradient_and_products_sum_the_terms(case):
    task, H, g = _dense(case)
    point = TermwisePoint(task.loss_terms, task.params)
    assert abs(float(point.value) - float(task.loss(task.params))) < 1e-12 * max(1.0, abs(float(
        point.value)))
    assert relerr(tree.flatten(point.grad), g) < TOL
    for seed in (1, 2):
        v = random_direction(task.params, seed)
        before = {k: t.clone() for k, t in v.items()}
        assert relerr(tree.flatten(point.hvp(v)), H @ tree.flatten(v)) < TOL
        assert all(torch.equal(v[k], before[k]) for k in v)  # the direction is read, never written


@pytest.mark.parametrize("case", list(CASES))
def test_restricted_rows_and_columns(case):
    task, H, _ = _dense(case)
    check_restricted_products(TermwisePoint(task.loss_terms, task.params), task, H, TOL)


@pytest.mark.parametrize("case", list(CASES))
def test_masked_product_matches_dense_and_the_retained_graph(case):
    task, H, _ = _dense(case)
    v = random_direction(task.params, 11)
    for name, pattern in patterns_for(task.n_blocks).items():
        if pattern.is_jacobi:
            continue
        out = masked_product_at(TermwisePoint(task.loss_terms, task.params), block_keys(task),
                                pattern, v)
        flat = tree.flatten(out)
        assert relerr(flat, (H * dense_mask(task, pattern)) @ tree.flatten(v)) < TOL, name
        graph = masked_product_at(PointCurvature(task.loss, task.params), block_keys(task), pattern,
                                  v)
        assert relerr(flat, tree.flatten(graph)) < TOL, name


def test_a_term_handing_back_its_direction_is_not_written():
    """``L = |x|^2 / 2`` in two equal halves: each term's ``H_t v`` may be ``v`` itself, and the sum
    is taken in place; the direction must come back unchanged and the product must be ``v``."""
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    half = [lambda p: 0.25 * (p["x"] ** 2).sum(), lambda p: 0.25 * (p["x"] ** 2).sum()]
    task = Task({"x": x}, lambda p: 0.5 * (p["x"] ** 2).sum(), {"x": ["x"]}, loss_terms=half)
    point = TermwisePoint(task.loss_terms, task.params)
    v = {"x": torch.tensor([0.5, 0.25, -1.0], dtype=torch.float64)}
    keep = v["x"].clone()
    out = point.hvp(v)
    assert torch.equal(v["x"], keep) and torch.allclose(out["x"], keep, rtol=0, atol=1e-15)
    assert torch.allclose(point.grad["x"], x, rtol=0, atol=1e-15)


def test_bad_vectors_and_use_after_release():
    task = termwise_case("tanh_mlp")
    point = TermwisePoint(task.loss_terms, task.params)
    k = next(iter(task.params))
    with pytest.raises(HVPError, match="not a parameter"):
        point.hvp({"nope": torch.zeros(1)})
    with pytest.raises(HVPError, match="shape"):
        point.hvp({k: torch.zeros(7, 7, 7)})
    with pytest.raises(HVPError, match="unknown row"):
        point.hvp({k: torch.zeros_like(task.params[k])}, rows=["nope"])
    point.release()
    with pytest.raises(RuntimeError, match="release"):
        point.hvp(point.grad)


def test_task_checks_its_terms():
    task = termwise_case("tanh_mlp")
    task.check_loss()  # the terms sum to the loss
    wrong = Task(dict(task.params), task.loss, dict(task.blocks), loss_terms=task.loss_terms[:2])
    with pytest.raises(TaskError, match="sum to"):
        wrong.check_loss()
    for bad in ([], "loss", [task.loss, 3]):
        with pytest.raises(TaskError, match="loss_terms"):
            Task(dict(task.params), task.loss, dict(task.blocks), loss_terms=bad)
    assert task.to(dtype=torch.float32).loss_terms == task.loss_terms


def test_auto_takes_the_termwise_engine_and_agrees_with_the_graph():
    task = termwise_case("tanh_mlp")
    engine = choose_engine(task)
    assert engine.name == "termwise" and engine.method == "reverse"
    assert choose_engine(task, "reverse").name == "graph"
    plain = Task(dict(task.params), task.loss, dict(task.blocks))
    assert choose_engine(plain).name == "graph"
    a = run_protocol(task, "gs", 0.05, 6)
    b = run_protocol(task, "gs", 0.05, 6, hvp_method="reverse")
    assert a.summary["hvp"]["engine_name"] == "termwise" and b.summary["hvp"][
        "engine_name"] == "graph"
    for ra, rb in zip(a.records, b.records):
        for col in ("gap", "recursive", "cumulative", "jc_only", "sharpness", "lambda_max"):
            assert abs(ra[col] - rb[col]) <= 1e-9 * max(1.0, abs(rb[col])), (col, ra["k"])



@pytest.mark.parametrize("optimizer", [None, "momentum:0.9"])
def test_offloading_a_termwise_run_changes_no_record(optimizer):
    """With the termwise engine and an offloaded store the gradients and the forcing wait in the
    store between their uses and the checkpoints copy files: the records are bit for bit those of
    the resident run."""
    import math

    task = termwise_case("tanh_mlp")
    a = run_protocol(task, "gs", 0.05, 5, offload=True, optimizer=optimizer)
    b = run_protocol(task, "gs", 0.05, 5, offload=False, optimizer=optimizer)
    assert a.summary["hvp"]["engine_name"] == "termwise" and a.summary["hvp"]["offloaded"]
    for ra, rb in zip(a.records, b.records):
        for col, x in ra.items():
            y = rb[col]
            assert x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)), (col, ra[
                "k"])


def test_an_offloaded_termwise_run_resumes_from_its_checkpoint(tmp_path):
    task = termwise_case("bilinear_lora")
    whole = run_protocol(task, "gs", 0.05, 6, offload=True)
    out = str(tmp_path / "run")
    run_protocol(task, "gs", 0.05, 3, offload=True, out_dir=out, checkpoint_every=1)
    resumed = run_protocol(task, "gs", 0.05, 6, offload=True, out_dir=out, resume=True)
    assert [r["gap"] for r in resumed.records] == [r["gap"] for r in whole.records]
    assert [r["cumulative"] for r in resumed.records] == [r["cumulative"] for r in whole.records]
