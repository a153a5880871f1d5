"""numeric.validation: step identification on correct and deliberately wrong steps, records comparison."""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
import torch

from numeric import Task
from numeric.records import RecordsError, read_columns
from numeric.steps import scheme_step
from numeric.validation import (
    StepOutputError,
    ValidationInputError,
    as_user_step,
    candidate_patterns,
    check_step_output,
    compare_records,
    identify_step,
    seeded_states,
)
from theory.patterns import gauss_seidel, parse_pattern

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
    assert min(r.result("jc").rel_errors) > 1e-5 and min(r.result("gs:layer3,layer2,layer1").rel_errors) > 1e-5
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
    assert [c.label for c in c5] == ["jc", "gs:x4,x3,x2,x1,x0"] and c5[1].roles == ["gs order", "declared"]
    partial = parse_pattern("2<-1", 5)
    assert [c.label for c in candidate_patterns(t5, partial)] == ["jc", "gs:x0,x1,x2,x3,x4", "{x1<-x0}"]


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
    with pytest.raises(ValidationInputError, match="not a numeric.Task"):
        as_user_step(("task", step))
    with pytest.raises(ValidationInputError, match="not callable"):
        as_user_step((task, 3))
    with pytest.raises(ValidationInputError, match="float32 parameters; step validation runs in float64"):
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
        ({**ok, "a": torch.tensor([1.0, math.nan], dtype=torch.float64)}, "non-finite values in 'a'"),
    ]
    for out, msg in cases:
        with pytest.raises(StepOutputError, match=msg):
            check_step_output(out, p, 0.1)


def test_step_that_raises_is_one_line():
    task = _quad_task(2)

    def step(p, lr):
        raise RuntimeError("shape mismatch\nsecond line")

    with pytest.raises(ValidationInputError, match="raised RuntimeError: shape mismatch$"):
        identify_step(as_user_step((task, step)), **FAST)


# -- records ---------------------------------------------------------------------------------
COLS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk")


def _ref(K=6):
    out = {"k": list(range(1, K + 1))}
    for n, c in enumerate(COLS[1:]):
        out[c] = [math.sin(1.0 + n + 0.7 * k) * (1 + n) for k in range(1, K + 1)]
    return out


def test_compare_identical_and_within_tolerance():
    ref = _ref()
    assert compare_records(ref, ref, rtol=1e-9, atol=1e-12).ok
    near = {c: ([v * (1 + 1e-11) for v in vals] if c != "k" else vals) for c, vals in ref.items()}
    assert compare_records(near, ref, rtol=1e-9, atol=1e-12).ok
    far = {c: list(v) for c, v in ref.items()}
    far["jc_only"][3] *= 1 + 1e-6
    far["gap"][4] += 1e-3
    comp = compare_records(far, ref, rtol=1e-9, atol=1e-12)
    assert not comp.ok and comp.first[:2] == (4, "jc_only")
    assert {c.column: c.bad for c in comp.columns}["gap"] == 1
    assert "first disagreement at k=4, column jc_only" in comp.summary()


def test_diagnoses():
    ref = _ref(8)
    shifted = {c: (v[1:] if c != "k" else v[:-1]) for c, v in ref.items()}  # their k holds ref k+1
    d = compare_records(shifted, ref, rtol=1e-9, atol=1e-12).diagnoses
    assert "every disagreeing column is shifted by one iteration" in d[0] and "k+1" in d[0]
    lag = {c: list(v) for c, v in ref.items()}
    lag["cumulative"] = [0.0] + ref["cumulative"][:-1]
    comp = compare_records(lag, ref, rtol=1e-9, atol=1e-12)
    assert comp.first[:2] == (1, "cumulative")
    assert any("column cumulative is shifted by one iteration" in x and "k-1" in x for x in comp.diagnoses)
    flip = {c: list(v) for c, v in ref.items()}
    flip["gap"] = [-x for x in ref["gap"]]
    assert any("opposite sign" in x for x in compare_records(flip, ref, rtol=1e-9, atol=1e-12).diagnoses)
    swap = {c: list(v) for c, v in ref.items()}
    swap["recursive"], swap["cumulative"] = ref["cumulative"], ref["recursive"]
    d = compare_records(swap, ref, rtol=1e-9, atol=1e-12).diagnoses
    assert any("column recursive equals the reference column cumulative" in x for x in d)
    half = {c: list(v) for c, v in ref.items()}
    half["bound_bk"] = [0.5 * x for x in ref["bound_bk"]]
    d = compare_records(half, ref, rtol=1e-9, atol=1e-12).diagnoses
    assert any("constant factor 0.5" in x for x in d)


def test_nan_handling_and_no_common_iteration():
    ref = _ref(3)
    ref["recursive"][0] = math.nan
    assert compare_records(ref, ref, rtol=1e-9, atol=0).ok
    other = {c: list(v) for c, v in ref.items()}
    other["recursive"][0] = 0.0
    assert compare_records(other, ref, rtol=1e-9, atol=0).first[:2] == (1, "recursive")
    later = {c: (v if c != "k" else [k + 10 for k in v]) for c, v in ref.items()}
    with pytest.raises(RecordsError, match="share no iteration"):
        compare_records(later, ref, rtol=1e-9, atol=0)


def test_read_columns(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("extra,k,gap,loss_s,loss_jc,recursive,cumulative,jc_only,bound_bk\n"
                    "x,1,0.5,1,2,nan,inf,3,4\nx,2,0.25,1,2,0,0,3,4\n")
    got = read_columns(str(good))
    assert got["k"] == [1, 2] and got["gap"] == [0.5, 0.25] and math.isnan(got["recursive"][0])
    bad = [
        ("", "is empty"),
        ("k,loss_jc\n1,2\n", "missing column\\(s\\) loss_s, gap, recursive, cumulative, jc_only, bound_bk"),
        (",".join(COLS) + "\n", "no rows"),
        (",".join(COLS) + "\n1,2,3,oops,5,6,7,8\n", "line 2, column gap: not a number \\('oops'\\)"),
        (",".join(COLS) + "\n1.5,2,3,4,5,6,7,8\n", "k must be an integer"),
        (",".join(COLS) + "\n1,2,3,4,5,6,7,8\n1,2,3,4,5,6,7,8\n", "k=1 appears twice"),
        (",".join(COLS) + "\n1,2,3,4,5,6,7\n", "column bound_bk: not a number \\(''\\)"),
    ]
    for text, msg in bad:
        f = tmp_path / "bad.csv"
        f.write_text(text)
        with pytest.raises(RecordsError, match=msg):
            read_columns(str(f))
    with pytest.raises(RecordsError, match="does not exist"):
        read_columns(str(tmp_path / "none.csv"))
    with pytest.raises(RecordsError, match="is a directory"):
        read_columns(str(tmp_path))
