"""crosscurv.numeric.record_comparison: agreement within dtype tolerances, the first disagreement,
diagnoses."""

from __future__ import annotations

import math

import pytest

from crosscurv.numeric.record_comparison import compare_records
from crosscurv.numeric.records import RecordsError

#: numerically sensitive: `make test-portable` runs this file under emulated instruction sets
pytestmark = pytest.mark.portable


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
    assert any("column cumulative is shifted by one iteration" in x and "k-1" in x
               for x in comp.diagnoses)
    flip = {c: list(v) for c, v in ref.items()}
    flip["gap"] = [-x for x in ref["gap"]]
    assert any("opposite sign" in x for x in compare_records(flip, ref, rtol=1e-9,
                                                             atol=1e-12).diagnoses)
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


# -- per-column tolerances from the measured rounding ----------------------------------------
def test_tolerances_are_the_measured_rounding_times_the_safety_factor():
    from crosscurv.numeric.record_comparison import EPS, MEASURED_ROUNDING, SAFETY, TOLERANCES

    assert set(TOLERANCES) == {"float32", "float64"}
    for dt, cols in TOLERANCES.items():
        assert set(cols) == {"loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only",
                             "bound_bk", "sharpness", "gap_err"}
        for c, (rtol, atol) in cols.items():
            rel, beyond = MEASURED_ROUNDING[dt][c]
            assert rtol == SAFETY * max(rel, EPS[dt]) and atol == SAFETY * max(beyond, EPS[dt]), (
                dt, c)
    # float32 is the coarser dtype in every column
    assert all(TOLERANCES["float32"][c][0] > TOLERANCES["float64"][c][0] for c in TOLERANCES[
        "float64"])


def test_gap_agrees_within_both_error_bounds():
    ref = _ref()
    ref["gap_err"] = [1e-3] * 6
    theirs = {c: list(v) for c, v in ref.items()}
    theirs["gap"][2] += 1.5e-3  # within ref gap_err + their gap_err (2e-3)
    assert compare_records(theirs, ref, rtol=0.0, atol=0.0, columns=["gap"]).ok
    theirs["gap"][2] += 1e-3  # 2.5e-3: beyond both bounds
    comp = compare_records(theirs, ref, rtol=0.0, atol=0.0, columns=["gap"])
    assert comp.first[:2] == (3, "gap") and comp.first[4] == pytest.approx(2e-3)
    del theirs["gap_err"]  # a file without error bounds: only the reference's counts
    theirs["gap"][2] = ref["gap"][2] + 1.5e-3
    assert not compare_records(theirs, ref, rtol=0.0, atol=0.0, columns=["gap"]).ok


def test_optional_columns_are_compared_only_when_both_records_have_them():
    from crosscurv.numeric.record_comparison import compared_columns

    ref = _ref()
    assert compared_columns(ref, ref) == list(COLS[1:])
    ref["sharpness"] = [1.0] * 6
    ref["gap_err"] = [math.nan] * 6  # a column the reference did not measure: NaN
    theirs = dict(ref, sharpness=[1.0] * 6, gap_err=[0.1] * 6)
    assert compared_columns(theirs, ref) == list(COLS[1:]) + ["sharpness"]
    theirs["sharpness"] = [1.5] * 6
    assert compare_records(theirs, ref, rtol=1e-9, atol=0.0).first[:2] == (1, "sharpness")
