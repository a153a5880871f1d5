"""The golden checks of crosscurv.testing: one comparison (validate-records'), its formula diagnoses
in the failure, and a route without torch.

* a protocol with a planted mistake (the example's ``my_blocks`` without the ``1/2 z.H z`` term of
  Theorem 3) fails ``golden_records`` with the formula named;
* ``golden_one_step`` passes the example's step and ``C_S`` and names ``C_S`` over all pairs;
* ``assert_records_match`` takes records with the paper's columns only, and diagnoses;
* an outside NumPy project (``tests/experiments/conformance/numpy_protocol.py``) runs the
  plugin with ``import torch`` blocked: its records and one-step results pass the two golden
  checks, the torch checks are skipped, and the planted mistake fails with its formula;
* an implementation may give its results as a folder; one that covers no case fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest

from crosscurv.experiments.conformance.golden_data import GOLDEN_DIR
from crosscurv.numeric.records import RecordsError
from crosscurv.testing import CHECKS, Implementation, assert_records_match

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = {c.name: c for c in CHECKS}
QUADRATIC_TERM = "+ 0.5 * _dot(z, hvp_jc(z))"
FORMULA = (
    "reproduced by an implementation in which the estimates leave out the quadratic term "
    "1/2 z_K.H_JC^K z_K"
)


def _example(replace: str = "", by: str = "", name: str = "my_blocks"):
    """``examples/plugin_user/my_blocks.py`` as a module, with ``replace`` replaced by ``by``."""
    with open(os.path.join(ROOT, "examples", "plugin_user", "my_blocks.py")) as fh:
        src = fh.read()
    if replace:
        assert src.count(replace) == 1, replace
        src = src.replace(replace, by)
    module = types.ModuleType(name)
    exec(compile(src, f"{name}.py", "exec"), module.__dict__)
    return module


def test_a_protocol_without_the_quadratic_term_is_named_by_its_formula():
    wrong = _example(QUADRATIC_TERM, "", name="no_quadratic")
    with pytest.raises(AssertionError) as exc:
        CHECK["golden_records"](wrong)
    msg = str(exc.value)
    assert "no_quadratic.protocol disagrees with crosscurv's records on 8 of 12" in msg
    assert "golden quartic/gs" in msg and FORMULA in msg
    assert "(paper: Theorem 3:" in msg


def test_golden_one_step_passes_the_example_and_names_c_s_over_all_pairs():
    from crosscurv.theory.patterns import gauss_seidel

    mine = _example()
    CHECK["golden_one_step"](mine)

    def all_pairs(task, params, pattern):
        n = task.n_blocks
        if not pattern.pairs:
            return 0.0
        return mine.cross_curvature(task, params, gauss_seidel(n)) + mine.cross_curvature(
            task, params, gauss_seidel(n, list(reversed(range(n))))
        )

    wrong = Implementation(mine.step, all_pairs, name="all_pairs")
    with pytest.raises(AssertionError) as exc:
        CHECK["golden_one_step"](wrong)
    msg = str(exc.value)
    assert "all_pairs.step: one-step quantities disagree with the golden cases on 4 of 4" in msg
    assert "C_S summed over all pairs" in msg


def test_assert_records_match_takes_the_paper_columns_and_diagnoses(tmp_path):
    ref = os.path.join(GOLDEN_DIR, "quadratic", "gs")
    lines = open(os.path.join(ref, "records.csv")).read().splitlines()
    head = lines[0].split(",")
    keep = [head.index(c) for c in ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative")]
    rows = [[line.split(",")[i] for i in keep] for line in lines]
    paper = tmp_path / "paper.csv"
    paper.write_text("\n".join(",".join(r) for r in rows) + "\n")
    verdict = assert_records_match(str(paper), "golden:quadratic/gs")
    assert verdict.ok and [c.column for c in verdict.columns][:1] == ["loss_jc"]
    # off-by-one in k: rows numbered from 0
    shifted = tmp_path / "shifted.csv"
    shifted.write_text(
        "\n".join([",".join(rows[0])] + [",".join([str(int(r[0]) - 1)] + r[1:]) for r in rows[1:]])
        + "\n"
    )
    with pytest.raises(AssertionError, match="shifted by one iteration"):
        assert_records_match(str(shifted), ref)
    with pytest.raises(RecordsError, match="missing column"):
        assert_records_match({"k": [1], "loss_jc": [0.0]}, ref)


NUMPY_PROJECT = '''
"""An outside implementation in NumPy: records and one-step results of the golden cases."""
import numpy as np

import numpy_protocol as npp

BUG = None


def records(case, label):
    if case["model"] not in ("quadratic", "quartic"):
        return None  # this implementation has no MLP or LoRA model
    pairs, order = npp.pattern(case, label)
    return npp.problem(case).protocol(pairs, order, case["lr"], case["iters"], BUG)


def one_step(case):
    if case["model"] not in ("quadratic", "quartic"):
        return None
    prob, lr = npp.problem(case), case["lr"]
    x, g = prob.x0, prob.grad(prob.x0)
    H = prob.hess(x)
    out = {"loss_0": prob.loss(x), "loss_jc_1": prob.loss(x - lr * g), "patterns": {}}
    for label in ("jc", "gs", "partial"):
        pairs, order = npp.pattern(case, label)
        b = prob.blocks
        C = sum(g[b[i]] @ H[np.ix_(b[i], b[j])] @ g[b[j]] for i, j in pairs)
        out["patterns"][label] = {"C_S": float(C), "eta2_estimate": lr**2 * float(C),
                                  "loss_s_1": prob.loss(prob.step(x, pairs, order, lr))}
    return out
'''

NUMPY_TESTS = '''
import dataclasses

import np_impl
from crosscurv.testing import Implementation, parametrize_with_checks

mine = Implementation(records=np_impl.records, one_step=np_impl.one_step, name="np")


@parametrize_with_checks(mine)
def test_mine(implementation, check):
    check(implementation)


def _no_quadratic(case, label):
    np_impl.BUG = "no_quadratic"
    try:
        return np_impl.records(case, label)
    finally:
        np_impl.BUG = None


@parametrize_with_checks(dataclasses.replace(mine, records=_no_quadratic, name="bug"),
                         checks=["golden_records"])
def test_bug(implementation, check):
    check(implementation)
'''

NO_TORCH = (
    "import sys; sys.modules['torch'] = None; import pytest; "
    "code = pytest.main(['-q', '-rfs', '-p', 'no:cacheprovider']); "
    "assert 'torch' not in sys.modules or sys.modules['torch'] is None; sys.exit(code)"
)


def test_a_numpy_project_runs_the_golden_checks_without_torch(tmp_path):
    shutil.copy(
        os.path.join(ROOT, "tests", "experiments", "conformance", "numpy_protocol.py"), tmp_path
    )
    (tmp_path / "np_impl.py").write_text(textwrap.dedent(NUMPY_PROJECT))
    (tmp_path / "test_np.py").write_text(textwrap.dedent(NUMPY_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "1 failed, 2 passed, 5 skipped" in out, out[-4000:]
    assert "FAILED test_np.py::test_bug[bug-golden_records]" in out
    assert FORMULA in out and "bug.records disagrees with crosscurv's records on 4 of 6" in out
    assert "np has no step: step_is_scheme needs it" in out
    assert "np.records does not cover 6 of 12 golden cases" in out  # a warning, not a failure
    assert "ModuleNotFoundError" not in out and "import of torch halted" not in out


def test_records_and_one_step_from_a_folder(tmp_path):
    for label in ("jc", "gs", "partial"):
        (tmp_path / "quartic" / label).mkdir(parents=True)
        shutil.copy(
            os.path.join(GOLDEN_DIR, "quartic", label, "records.csv"), tmp_path / "quartic" / label
        )
    shutil.copy(os.path.join(GOLDEN_DIR, "quartic", "one_step.json"), tmp_path / "quartic")
    mine = Implementation(records=str(tmp_path), one_step=tmp_path, name="folder")
    for check, uncovered in (("golden_records", "records does not cover 9 of 12"),
                             ("golden_one_step", "one_step does not cover 3 of 4")):
        with pytest.warns(UserWarning, match=f"folder.{uncovered} golden cases"):
            CHECK[check](mine)
    empty = Implementation(records=str(tmp_path / "nowhere"), name="empty")
    with pytest.raises(AssertionError, match="empty.records covers none of the 12 golden cases"):
        CHECK["golden_records"](empty)
