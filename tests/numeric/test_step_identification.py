"""crosscurv.numeric.validation: correct and deliberately wrong steps are identified, errors are one
line."""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
import torch

from crosscurv.numeric import Task
from crosscurv.numeric.steps import scheme_step
from crosscurv.numeric.validation import (ValidationInputError, as_user_step, candidate_patterns,
                                          check_step_output, identify_step, seeded_states)
from crosscurv.theory.patterns import gauss_seidel, parse_pattern

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example(name):
    path = os.path.join(ROOT, "examples", name + ".py")
    spec = importlib.util.spec_from_file_location("crosscurv_example_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def lora():
    return _example("lora_steps")


@pytest.fixture(scope="module")
def mlp():
    return _example("mlp_backprop")


@pytest.fixture(scope="module")
def wrong():
    return _example("wrong_steps")


FAST = dict(seeds=(0, 1), n_etas=4)


def _identify(factory, **kw):
    return identify_step(as_user_step(factory(), name=factory.__name__), **{**FAST, **kw})


# -- correct implementations ------------------------------------------------------------
def test_correct_alternating_lora_is_gs_b_then_a(lora):
    r = _identify(lora.alternating)
    assert r.matches == ["gs:B,A"] and r.ok and r.diagnosis == "declared"
    assert r.result("jc").order == pytest.approx(2.0, abs=0.1)  # differs from JC at O(eta^2)
    assert r.result("gs:A,B").order == pytest.approx(2.0, abs=0.1)
    assert max(r.result("gs:B,A").rel_errors) < 1e-12


def test_exact_gs_backprop_and_jc_backprop(mlp):
    r = _identify(mlp.exact_gs_backprop)
    assert r.ok and r.matches == ["gs:layer3,layer2,layer1"]
    r = _identify(mlp.jc_backprop)
    assert r.ok and r.matches == ["jc"]


def test_correct_gs_and_fit_coefficients(wrong):
    r = _identify(wrong.correct_gs)
    assert r.ok and r.matches == ["gs:x1,x2,x3"]
    # second-order term = L g: a_ij = 1 below the diagonal, 0 above
    for i in range(3):
        for j in range(3):
            if i != j:
                assert r.fit.coef[i][j] == pytest.approx(1.0 if j < i else 0.0, abs=1e-3)


# -- the classic mislabelled cases --------------------------------------------------------
def test_mislabelled_alternating_is_jc(lora):
    r = _identify(lora.mislabelled_alternating)
    assert r.matches == ["jc"] and not r.ok and r.diagnosis == "jc-instead"
    assert "does NOT perform the declared pattern gs:B,A" in r.verdict()
    assert r.result("gs:B,A").order == pytest.approx(2.0, abs=0.1)


def test_inplace_backprop_is_neither_jc_nor_gs(mlp):
    r = _identify(mlp.inplace_backprop)
    assert r.matches == [] and not r.ok and r.diagnosis == "not-a-scheme"
    # measured: differs from JC and from the declared GS (output to input) at second order
    assert r.result("jc").order == pytest.approx(2.0, abs=0.15)
    assert r.result("gs:layer3,layer2,layer1").order == pytest.approx(2.0, abs=0.15)
    assert min(r.result("jc").rel_errors) > 1e-5 and min(r.result(
        "gs:layer3,layer2,layer1").rel_errors) > 1e-5
    assert max(r.fit.residual) > 0.1  # its eta^2 term is no sum of a_ij H_ij g_j
    assert "no delay pattern" in r.verdict()


def test_reused_adjoint_lora_is_not_gs(lora):
    r = _identify(lora.reused_adjoint)
    assert r.matches == [] and r.diagnosis == "not-a-scheme"
    assert r.result("gs:B,A").order == pytest.approx(2.0, abs=0.15)


# -- deliberately wrong steps ----------------------------------------------------------------
def test_wrong_order_is_caught(wrong):
    r = _identify(wrong.wrong_order)
    assert r.matches == ["gs:x3,x2,x1"] and r.diagnosis == "wrong-order"
    assert "does NOT perform the declared pattern gs:x1,x2,x3" in r.verdict()


def test_stale_gradient_is_the_partial_pattern(wrong):
    r = _identify(wrong.stale_gradient)
    assert r.diagnosis == "other-pattern"
    assert r.matches == ["{x2<-x1}"]
    inferred = [x for x in r.results if "inferred" in x.candidate.roles]
    assert len(inferred) == 1 and inferred[0].candidate.pattern.pairs == frozenset({(1, 0)})


def test_wrong_sign_of_freshness_term(wrong):
    r = _identify(wrong.wrong_sign)
    assert r.matches == [] and r.diagnosis == "sign-flip"
    assert r.fit.inferred_pairs(-1) == [(1, 0), (2, 0), (2, 1)]
    assert "WRONG SIGN" in r.verdict()
    assert r.result("gs:x1,x2,x3").order == pytest.approx(2.0, abs=0.1)


def test_cached_gradient_is_not_a_function(wrong):
    r = _identify(wrong.cached_gradient)
    assert not r.deterministic and r.diagnosis == "nondeterministic" and not r.ok
    assert "stale gradient" in r.verdict()


def test_linearised_gs_matches_only_to_second_order(wrong):
    """Agreeing with GS up to O(eta^2) is not being GS: the difference is O(eta^3)."""
    r = _identify(wrong.linearised_gs, n_etas=5)
    assert r.matches == [] and not r.ok
    assert r.nearest.label == "gs:x1,x2,x3"
    assert r.nearest.order == pytest.approx(3.0, abs=0.15)
    assert r.result("jc").order == pytest.approx(2.0, abs=0.1)


def test_first_order_difference_is_named():
    """A step with a 10% learning-rate error differs from every candidate at first order."""
    task = _quad_task()

    def step(params, lr):
        return scheme_step(task, params, gauss_seidel(2), 1.1 * lr)

    r = identify_step(as_user_step((task, step, "gs")), **FAST)
    assert r.diagnosis == "first-order"
    assert all(x.order == pytest.approx(1.0, abs=0.1) for x in r.results)
    assert any("first order" in n for n in r.notes)


# -- candidates, states ----------------------------------------------------------------------
def _quad_task(n_blocks=2, dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    d = 2 * n_blocks
    Q = torch.randn(d, d, generator=gen, dtype=torch.float64)
    A = (Q @ Q.T / d + torch.eye(d, dtype=torch.float64)).to(dtype)
    names = [f"x{i}" for i in range(n_blocks)]
    params = {n: torch.randn(2, generator=gen, dtype=torch.float64).to(dtype) for n in names}

    def loss(p):
        x = torch.cat([p[n] for n in names])
        return 0.5 * x @ A @ x

    return Task(params, loss, {n: [n] for n in names}, name=f"quad{n_blocks}")


def test_candidate_patterns():
    assert [c.label for c in candidate_patterns(_quad_task(1))] == ["jc"]
    c2 = candidate_patterns(_quad_task(2))
    assert [c.label for c in c2] == ["jc", "gs:x0,x1", "gs:x1,x0"]
    t4 = _quad_task(4)
    assert len(candidate_patterns(t4)) == 1 + 24
    t5 = _quad_task(5)
    decl = parse_pattern("gs:5,4,3,2,1", 5)
    c5 = candidate_patterns(t5, decl)
    assert [c.label for c in c5] == ["jc", "gs:x4,x3,x2,x1,x0"] and c5[1].roles == ["gs order",
                                                                                    "declared"]
    partial = parse_pattern("2<-1", 5)
    assert [c.label for c in candidate_patterns(t5, partial)] == ["jc", "gs:x0,x1,x2,x3,x4",
                                                                  "{x1<-x0}"]


def test_seeded_states_are_reproducible_and_perturb_zero_tensors():
    task = _quad_task(2)
    task.params["x1"] = torch.zeros(2, dtype=torch.float64)
    a, b = seeded_states(task, (0, 1)), seeded_states(task, (0, 1))
    assert all(torch.equal(a[i][k], b[i][k]) for i in range(2) for k in a[0])
    assert not torch.equal(a[0]["x0"], a[1]["x0"])
    assert float(a[0]["x1"].abs().sum()) > 0  # a zero tensor (LoRA's B = 0) is perturbed too


# -- bad input -------------------------------------------------------------------------------
def test_as_user_step_forms_and_errors():
    task = _quad_task(2)

    def step(p, lr):
        return p

    class Obj:
        def __init__(self):
            self.task, self.step, self.pattern = task, step, "gs"

    assert as_user_step((task, step)).pattern is None
    assert as_user_step((task, step, "gs:2,1")).pattern.order() == (1, 0)
    assert as_user_step({"task": task, "step": step}).task is task
    assert as_user_step(Obj()).pattern.is_full_gs()
    assert as_user_step(Obj(), pattern="jc").pattern.is_jacobi  # override
    with pytest.raises(ValidationInputError, match="length 4"):
        as_user_step((task, step, "gs", 1))
    with pytest.raises(ValidationInputError, match="expected \\(task, step\\)"):
        as_user_step(42)
    with pytest.raises(ValidationInputError, match="not a crosscurv.numeric.Task"):
        as_user_step(("task", step))
    with pytest.raises(ValidationInputError, match="not callable"):
        as_user_step((task, 3))
    with pytest.raises(ValidationInputError,
                       match="float32 parameters; step validation runs in float64"):
        as_user_step((_quad_task(2, torch.float32), step))
    with pytest.raises(ValidationInputError, match="without 'task' and 'step'"):
        as_user_step({"task": task})
    with pytest.raises(Exception, match="outside|unknown block"):
        as_user_step((task, step, "3<-1"))


def test_step_output_errors():
    p = {"a": torch.zeros(2, dtype=torch.float64), "b": torch.zeros(3, 1, dtype=torch.float64)}
    ok = {k: v + 1 for k, v in p.items()}
    assert set(check_step_output(ok, p, 0.1)) == {"a", "b"}
    cases = [
        ([1, 2], "must return a dict"),
        ({"a": ok["a"]}, "different names: missing b"),
        ({**ok, "c": ok["a"]}, "different names: unexpected c"),
        ({**ok, "b": ok["b"].reshape(3)}, "'b' with shape \\(3,\\), the parameter has \\(3, 1\\)"),
        ({**ok, "a": ok["a"].float()}, "'a' as float32, the parameter is float64"),
        ({**ok, "a": [1.0, 2.0]}, "'a' as list, not a tensor"),
        ({**ok, "a": torch.tensor([1.0, math.nan], dtype=torch.float64)},
         "non-finite values in 'a'"),
    ]
    for out, msg in cases:
        with pytest.raises(ValidationInputError, match=msg):
            check_step_output(out, p, 0.1)


def test_step_that_raises_is_one_line():
    task = _quad_task(2)

    def step(p, lr):
        raise RuntimeError("shape mismatch\nsecond line")

    with pytest.raises(ValidationInputError, match="raised RuntimeError: shape mismatch$"):
        identify_step(as_user_step((task, step)), **FAST)


# -- records ---------------------------------------------------------------------------------


def test_the_former_import_path_reexports_the_package():
    from crosscurv.numeric import hvp_differences, step_identification, validation

    for name in validation.__all__:
        assert getattr(step_identification, name) is getattr(validation, name), name
    assert step_identification.CurvatureRoute is hvp_differences.CurvatureRoute
