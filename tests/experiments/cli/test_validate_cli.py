"""``crosscurv validate-step`` and ``validate-records``: verdicts, exit codes, one-line errors."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from crosscurv.experiments.cli import main
from crosscurv.numeric.record_comparison import TOLERANCES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EX = os.path.join(ROOT, "examples")
FAST = ["--seeds", "0,1", "--n-etas", "4"]


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line_error(err: str, *words):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


# -- validate-step ------------------------------------------------------------------------
def test_validate_step_correct_and_mislabelled(capsys):
    code, out, _ = _run(capsys, "validate-step", f"{EX}/lora_steps.py:alternating", *FAST)
    assert code == 0 and "verdict: matches gs:B,A (the declared pattern)" in out
    code, out, _ = _run(capsys, "validate-step", f"{EX}/lora_steps.py:mislabelled_alternating",
                        *FAST)
    assert code == 1
    assert "verdict: matches jc; it does NOT perform the declared pattern gs:B,A" in out
    # --pattern overrides the factory's declaration
    code, out, _ = _run(capsys, "validate-step", f"{EX}/lora_steps.py:mislabelled_alternating",
                        "--pattern", "jc", *FAST)
    assert code == 0


def test_validate_step_json_gs_like_backprop(capsys):
    code, out, _ = _run(capsys, "validate-step", f"{EX}/mlp_backprop.py:inplace_backprop", "--json",
                        *FAST)
    assert code == 1
    rep = json.loads(out)
    assert rep["matches"] == [] and rep["diagnosis"] == "not-a-scheme"
    orders = {c["label"]: c["observed_order"] for c in rep["candidates"]}
    assert orders["jc"] == pytest.approx(2.0, abs=0.15)
    assert orders["gs:layer3,layer2,layer1"] == pytest.approx(2.0, abs=0.15)


def test_validate_step_verbose_and_module_spec(capsys, monkeypatch):
    monkeypatch.chdir(EX)
    code, out, _ = _run(capsys, "validate-step", "wrong_steps:stale_gradient", "--verbose", *FAST)
    assert code == 1 and "matches {x2<-x1}" in out
    assert "error ||step - reference|| (max over states) against eta" in out


STEP_FILE = """
import torch
from crosscurv.numeric import Task

def _task(dtype=torch.float64):
    p = {"a": torch.tensor([1.0, -0.5], dtype=dtype), "b": torch.tensor([0.3], dtype=dtype)}
    return Task(p, lambda q: (q["a"] ** 2).sum() * (1 + q["b"] ** 2).sum(), {"A": ["a"], "B": \
["b"]})

def _gd(params, lr):
    q = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    loss = (q["a"] ** 2).sum() * (1 + q["b"] ** 2).sum()
    ga, gb = torch.autograd.grad(loss, [q["a"], q["b"]])
    return {"a": params["a"] - lr * ga, "b": params["b"] - lr * gb}

def good():
    return _task(), _gd, "jc"

def renamed():
    return _task(), lambda p, lr: {"a": p["a"], "c": p["b"]}

def reshaped():
    return _task(), lambda p, lr: {"a": p["a"].reshape(2, 1), "b": p["b"]}

def single():
    return _task(), lambda p, lr: {"a": p["a"].float(), "b": p["b"]}

def blowup():
    return _task(), lambda p, lr: {"a": p["a"] / 0.0, "b": p["b"]}

def raising_step():
    def step(p, lr):
        raise ValueError("boom")
    return _task(), step

def not_a_dict():
    return _task(), lambda p, lr: [p["a"], p["b"]]

def float32_task():
    return _task(torch.float32), _gd

def raises():
    raise RuntimeError("factory failed")

def wrong_type():
    return 42

def bad_pattern():
    return _task(), _gd, "3<-1"

NOT_CALLABLE = 3
"""


@pytest.fixture()
def stepfile(tmp_path):
    f = tmp_path / "user_steps.py"
    f.write_text(STEP_FILE)
    return str(f)


def test_validate_step_user_file_ok(capsys, stepfile):
    code, out, _ = _run(capsys, "validate-step", f"{stepfile}:good", *FAST)
    assert code == 0 and "matches jc (the declared pattern)" in out


@pytest.mark.parametrize(
    "factory, words",
    [
        ("renamed", ["different names", "missing b", "unexpected c"]),
        ("reshaped", ["'a' with shape (2, 1), the parameter has (2,)"]),
        ("single", ["'a' as float32, the parameter is float64"]),
        ("blowup", ["non-finite values in 'a'"]),
        ("raising_step", ["raised ValueError: boom"]),
        ("not_a_dict", ["must return a dict of tensors, got list"]),
        ("float32_task", ["float32 parameters", "float64"]),
        ("raises", ["raised RuntimeError: factory failed"]),
        ("wrong_type", ["factory returned int"]),
        ("bad_pattern", ["3<-1", "outside 1..2"]),
        ("NOT_CALLABLE", ["is not callable"]),
        ("missing_factory", ["has no attribute 'missing_factory'"]),
    ],
)
def test_validate_step_bad_input(capsys, stepfile, factory, words):
    code, out, err = _run(capsys, "validate-step", f"{stepfile}:{factory}", *FAST)
    assert code == 2 and out == ""
    _one_line_error(err, *words)


def test_validate_step_bad_spec_and_flags(capsys, stepfile, tmp_path):
    for argv, words in [
        ([f"{tmp_path}/nope.py:f"], ["does not exist"]),
        (["no_such_module_xyz:f"], ["cannot import module 'no_such_module_xyz'"]),
        (["nocolon"], ["validate-step takes a step factory", "not a task name ('nocolon')"]),
        ([f"{stepfile}:good", "--seeds", "a,b"], ["--seeds must be comma-separated integers"]),
        ([f"{stepfile}:good", "--n-etas", "2"], ["--n-etas must be >= 3"]),
        ([f"{stepfile}:good", "--eta0", "-1"], ["--eta0 must be a finite number > 0"]),
        ([f"{stepfile}:good", "--pattern", "gs:1,1"], ["repeats blocks"]),
    ]:
        code, out, err = _run(capsys, "validate-step", *argv)
        assert code == 2, argv
        _one_line_error(err, *words)
    broken = tmp_path / "broken.py"
    broken.write_text("import nonexistent_pkg_xyz\n")
    code, _, err = _run(capsys, "validate-step", f"{broken}:f")
    assert code == 2
    _one_line_error(err, "cannot import", "ModuleNotFoundError")


# -- validate-records -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def gold(tmp_path_factory):
    from crosscurv.experiments.conformance.golden import write_golden

    out = tmp_path_factory.mktemp("gold")
    write_golden(str(out), ["quadratic"])
    return str(out / "quadratic")


def _estimator():
    spec = importlib.util.spec_from_file_location("crosscurv_example_numpy_est", os.path.join(EX,
        "numpy_estimator.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_validate_records_numpy_estimator_passes(capsys, gold, tmp_path):
    est = _estimator()
    for label in ("jc", "gs", "partial"):
        mine = tmp_path / f"{label}.csv"
        est.write_csv(est.run(gold, label), str(mine))
        code, out, _ = _run(capsys, "validate-records", str(mine), "--reference", os.path.join(
            gold, label))
        assert code == 0 and "OK: all 7 columns agree at all 15 common iterations" in out, out


@pytest.mark.parametrize(
    "bug, first, diagnosis",
    [
        ("k_from_zero", "k=1, column loss_jc", "every disagreeing column is shifted by one "
                                               "iteration: their row k holds the reference's k+1"),
        ("lagged_cumulative", "k=1, column cumulative", "column cumulative is shifted by one "
        "iteration: their row k holds the " "reference's k-1"),
        ("sign_gap", "k=1, column gap", "column gap has the opposite sign"),
        ("swapped", "k=1, column recursive",
         "column recursive equals the reference column cumulative"),
    ],
)
def test_validate_records_catches_bugs(capsys, gold, tmp_path, bug, first, diagnosis):
    est = _estimator()
    mine = tmp_path / "mine.csv"
    est.write_csv(est.run(gold, "gs", bug), str(mine))
    code, out, _ = _run(capsys, "validate-records", str(mine), "--reference", os.path.join(gold,
                                                                                           "gs"))
    assert code == 1
    assert f"DISAGREE: first disagreement at {first}" in out
    assert "diagnosis: " + diagnosis in out


def test_validate_records_json_and_tolerance_flags(capsys, gold, tmp_path):
    lines = open(os.path.join(gold, "gs", "records.csv")).read().splitlines()
    cells = lines[3].split(",")
    cells[5] = repr(float(cells[5]) * (1 + 1e-7))  # cumulative at k=3, off by 1e-7 relative
    lines[3] = ",".join(cells)
    f = tmp_path / "near.csv"
    f.write_text("\n".join(lines) + "\n")
    code, out, _ = _run(capsys, "validate-records", str(f), "--reference", os.path.join(gold,
        "gs"), "--json")
    rep = json.loads(out)
    assert code == 1 and rep["first_disagreement"]["k"] == 3 and rep["first_disagreement"][
        "column"] == "cumulative"
    assert rep["dtype"] == "float64"
    assert rep["tolerances"]["cumulative"]["rtol"] == TOLERANCES["float64"]["cumulative"][0]
    code, _, _ = _run(capsys, "validate-records", str(f), "--reference", os.path.join(gold, "gs"),
                      "--rtol", "1e-6")
    assert code == 0
    code, _, _ = _run(capsys, "validate-records", str(f), "--reference", os.path.join(gold, "gs"),
                      "--columns", "gap,loss_s")
    assert code == 0


def test_validate_records_float32_reference_uses_looser_tolerance(capsys, gold, tmp_path):
    ref = tmp_path / "ref32"
    ref.mkdir()
    (ref / "records.csv").write_text(open(os.path.join(gold, "gs", "records.csv")).read())
    summary = json.load(open(os.path.join(gold, "gs", "summary.json")))
    summary["settings"]["dtype"] = "float32"
    (ref / "summary.json").write_text(json.dumps(summary))
    lines = open(os.path.join(gold, "gs", "records.csv")).read().splitlines()
    cells = lines[2].split(",")
    cells[4] = repr(float(cells[4]) * (1 + 1e-6))
    lines[2] = ",".join(cells)
    f = tmp_path / "f32.csv"
    f.write_text("\n".join(lines) + "\n")
    code, out, _ = _run(capsys, "validate-records", str(f), "--reference", str(ref))
    assert code == 0 and "dtype float32" in out
    code, _, _ = _run(capsys, "validate-records", str(f), "--reference", os.path.join(gold, "gs"))
    assert code == 1  # the same difference fails at float64 tolerances


def test_validate_records_on_the_fly_reference(capsys, gold, tmp_path):
    fac = tmp_path / "golden_task.py"
    fac.write_text("from crosscurv.experiments.conformance.golden import build_case, case_task\n"
                   "def quadratic():\n    return case_task(build_case('quadratic'))\n")
    mine = os.path.join(gold, "gs", "records.csv")
    save = tmp_path / "saved"
    code, out, _ = _run(capsys, "validate-records", mine, "--task", f"{fac}:quadratic", "--pattern",
                        "gs", "--lr", "0.1", "--save-reference", str(save))
    assert code == 0 and "computed now" in out and "15 common iterations" in out
    assert os.path.exists(save / "records.csv")
    code, out, _ = _run(capsys, "validate-records", mine, "--task", f"{fac}:quadratic", "--pattern",
                        "2<-1", "--lr", "0.1", "--iters", "4")
    assert code == 1 and "note: iterations only in theirs (not compared): k=5..15" in out


def test_validate_records_bad_input(capsys, gold, tmp_path):
    good = os.path.join(gold, "gs", "records.csv")
    missing_col = tmp_path / "m.csv"
    missing_col.write_text("k,loss_jc,loss_s,gap\n1,1,1,0\n")
    text = tmp_path / "t.csv"
    text.write_text(
        "k,loss_jc,loss_s,gap,recursive,cumulative,jc_only,bound_bk\n1,1,1,zero,0,0,0,0\n")
    empty_ref = tmp_path / "emptyref"
    empty_ref.mkdir()
    for argv, words in [
        ([str(tmp_path / "none.csv"), "--reference", os.path.join(gold, "gs")], ["does not exist"]),
        ([str(missing_col), "--reference", os.path.join(gold, "gs")], [
        "missing column(s) recursive, cumulative (header"]),
        ([str(text), "--reference", os.path.join(gold, "gs")], [
        "line 2, column gap: not a number ('zero')"]),
        ([good, "--reference", str(tmp_path / "noref")], ["reference run directory",
                                                          "does not exist"]),
        ([good, "--reference", str(empty_ref)], ["has no records.csv"]),
        ([good], ["exactly one of --reference RUN_DIR or --task"]),
        ([good, "--reference", os.path.join(gold, "gs"), "--task", "x:y"], ["exactly one of"]),
        ([good, "--reference", os.path.join(gold, "gs"), "--lr", "0.1"], [
        "--lr only applies to an on-the-fly reference"]),
        ([good, "--reference", os.path.join(gold, "gs"), "--columns", "gap,foo"], [
        "unknown column(s) foo"]),
        ([good, "--reference", os.path.join(gold, "gs"), "--rtol", "-1"], [
        "--rtol must be a finite number >= 0"]),
        ([good, "--task", f"{tmp_path}/nofile.py:f", "--lr", "0.1"], ["does not exist"]),
    ]:
        code, out, err = _run(capsys, "validate-records", *argv)
        assert code == 2, (argv, out, err)
        _one_line_error(err, *words)


def test_validate_records_refuses_records_of_an_older_crosscurv(gold, tmp_path):
    """A reference run folder whose records.csv has the ten columns of an older crosscurv: one line,
    exit 2."""
    import shutil
    import subprocess
    import sys

    old = tmp_path / "old"
    shutil.copytree(os.path.join(gold, "gs"), old)
    rows = (old / "records.csv").read_text().splitlines()
    (old / "records.csv").write_text("\n".join(",".join(r.split(",")[:10]) for r in rows) + "\n")
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "validate-records", os.path.join(
        gold, "gs", "records.csv"),
                           "--reference", str(old)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _one_line_error(proc.stderr, "records of an older crosscurv (10 columns, not the 19 of this "
                                 "version)",
                    "recompute the run with this crosscurv")
