"""crosscurv.testing: the checks pass on honest implementations, fail on wrong ones with evidence.

The honest implementations are crosscurv's own (:func:`crosscurv.testing.reference_implementation`)
and the independent one of ``examples/plugin_user/my_blocks.py``; the wrong ones are that one with
one bug each:

* ``stale_gs``: every block steps with the gradient at the old point whatever the pattern (a "GS"
  step that is really JC);
* ``all_pairs``: ``C_S`` summed over every block pair (``C_cross``, twice the GS value);
* ``lagged_recursive``: row ``k`` holds the recursive estimate of iteration ``k - 1``;
* ``half_cumulative``: the cumulative estimate with half its size (a factor 1/2 on the forcing).
"""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from crosscurv.testing import (CHECKS, Implementation, parametrize_with_checks,
                               reference_implementation)
from crosscurv.theory.patterns import gauss_seidel, jacobi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = {c.name: c for c in CHECKS}


def _my_blocks():
    path = os.path.join(ROOT, "examples", "plugin_user", "my_blocks.py")
    spec = importlib.util.spec_from_file_location("my_blocks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MINE = _my_blocks()


def _stale_step(task, params, pattern, lr):
    return MINE.step(task, params, jacobi(task.n_blocks), lr)


def _all_pairs(task, params, pattern):
    n = task.n_blocks
    return MINE.cross_curvature(task, params, gauss_seidel(n)) + MINE.cross_curvature(
        task, params, gauss_seidel(n, list(reversed(range(n))))
    )


def _lagged_recursive(task, pattern, lr, iters):
    rec = MINE.protocol(task, pattern, lr, iters)
    return dict(rec, recursive=[0.0] + rec["recursive"][:-1])


def _half_cumulative(task, pattern, lr, iters):
    rec = MINE.protocol(task, pattern, lr, iters)
    return dict(rec, cumulative=[0.5 * c for c in rec["cumulative"]])


def test_the_reference_passes_the_one_step_checks():
    """(Its trajectory checks are the comparison in the failure messages below.)"""
    ref = reference_implementation()
    for name in ("step_is_scheme", "one_step_remainder", "gs_order_invariance"):
        CHECK[name](ref)


def test_a_jc_step_labelled_gs_fails_three_checks_with_evidence():
    stale = Implementation(_stale_step, MINE.cross_curvature, name="stale_gs")
    with pytest.raises(AssertionError) as exc:
        CHECK["step_is_scheme"](stale)
    msg = str(exc.value)
    assert (
        "stale_gs.step does not perform the scheme it is given (8 of 10" in msg
    )  # JC itself passes
    assert "verdict: matches jc; it does NOT perform the declared pattern gs" in msg
    with pytest.raises(AssertionError) as exc:
        CHECK["gs_order_invariance"](stale)
    msg = str(exc.value)
    assert "the two orders give the same loss to round-off" in msg and "is it GS" in msg
    with pytest.raises(AssertionError) as exc:
        CHECK["one_step_remainder"](stale)
    msg = str(exc.value)
    # L_S = L_JC, so the remainder is -eta^2 C_S: observed order 2, with the table of the evidence
    assert "L_S - L_JC - eta^2 C_S: expected order 3" in msg and "least-squares order 2.0" in msg
    assert re.search(r"\|\s+eta\s+\|\s+error\s+\|\s+rate\s+\|\s+error/eta\^3", msg), msg


def test_c_s_over_all_pairs_fails_the_one_step_check():
    wrong = Implementation(MINE.step, _all_pairs, name="all_pairs")
    with pytest.raises(AssertionError) as exc:
        CHECK["one_step_remainder"](wrong)
    msg = str(exc.value)
    assert "all_pairs: the one-step remainder L_S - L_JC - eta^2 C_S is not O(eta^3)" in msg
    assert "least-squares order 2.0" in msg and re.search(
        r"their C_S = \S+, crosscurv.s C_S = ", msg
    )


def test_a_lagged_recursive_estimate_fails_theorem_2_with_crosscurvs_orders_beside():
    wrong = Implementation(MINE.step, protocol=_lagged_recursive, name="lagged_recursive")
    with pytest.raises(AssertionError) as exc:
        CHECK["recursion_remainder"](wrong)
    msg = str(exc.value)
    assert "Theorem 2's recursive estimate is not within O(eta^3) of the gap" in msg
    assert "gap - recursive at k = K (lagged_recursive): expected order 3" in msg
    assert "crosscurv's gap - recursive on the same grid (observed order 3." in msg
    CHECK["cumulative_order"](wrong)  # the cumulative column is right


def test_a_half_cumulative_estimate_fails_theorem_3_and_the_golden_records():
    wrong = Implementation(MINE.step, protocol=_half_cumulative, name="half_cumulative")
    with pytest.raises(AssertionError) as exc:
        CHECK["cumulative_order"](wrong)
    msg = str(exc.value)
    assert "not within O(K eta^3) = O(eta^2) of the gap at fixed eta K" in msg
    assert "gap - cumulative at k = K (half_cumulative): expected order 2" in msg
    assert "crosscurv's gap - cumulative on the same grid (observed order 2." in msg
    with pytest.raises(AssertionError) as exc:
        CHECK["golden_records"](wrong)
    msg = str(exc.value)
    assert (
        "half_cumulative.protocol disagrees with crosscurv's records on 8 of 12 golden cases" in msg
    )
    assert "golden quartic/gs" in msg and "cumulative" in msg
    CHECK["recursion_remainder"](wrong)


def test_a_check_without_the_function_it_needs_is_skipped():
    only_step = Implementation(MINE.step, name="only_step")
    with pytest.raises(
        pytest.skip.Exception, match="only_step has no protocol or records: golden_records needs it"
    ):
        CHECK["golden_records"](only_step)


def test_parametrize_with_checks_makes_one_test_per_check():
    mark = parametrize_with_checks(MINE, expected_failures={"golden_records": "known"})
    assert mark.args[0] == "implementation, check"
    params = mark.args[1]
    assert [p.id for p in params] == [f"my_blocks-{c.name}" for c in CHECKS]
    assert all(p.values[0].step is MINE.step for p in params)
    xfail = [p for p in params if p.marks]
    assert [p.id for p in xfail] == ["my_blocks-golden_records"] and xfail[0].marks[0].kwargs[
        "strict"
    ]
    two = parametrize_with_checks(
        [MINE, Implementation(_stale_step, name="stale")], checks=["step_is_scheme"]
    )
    assert [p.id for p in two.args[1]] == ["my_blocks-step_is_scheme", "stale-step_is_scheme"]
    with pytest.raises(ValueError, match="unknown check"):
        parametrize_with_checks(MINE, checks=["no_such_check"])
    with pytest.raises(ValueError, match="distinct names"):
        parametrize_with_checks([MINE, MINE])
    with pytest.raises(TypeError, match="has none of step, cross_curvature, protocol"):
        parametrize_with_checks(object())


def test_the_plugin_option_sets_the_golden_folder(tmp_path):
    from crosscurv.testing import checks, plugin

    class Config:
        def getoption(self, name, default=None):
            return str(tmp_path) if name == "crosscurv_golden" else default

    with pytest.raises(pytest.UsageError, match="no index.json there"):
        plugin.pytest_configure(Config())
    (tmp_path / "index.json").write_text("{}")
    try:
        plugin.pytest_configure(Config())
        assert checks.golden_dir() == str(tmp_path)
    finally:
        checks.set_golden_dir(None)
