"""``python -m crosscurv.experiments.conformance.rounding``: the measurement the comparison
tolerances rest on."""

from __future__ import annotations

import math

import pytest

from crosscurv.experiments.cli.scripts import rounding as main
from crosscurv.experiments.conformance.rounding import (COLUMNS, column_spread, measure,
                                                        measured_rounding)
from crosscurv.numeric.record_comparison import EPS, MEASURED_ROUNDING, TOLERANCES, stated_rounding


def test_spread_of_a_known_perturbation():
    ref = {c: [2.0, -1.0, 1e-6] for c in COLUMNS}
    ref["gap_err"] = [0.0, 0.0, 0.0]
    var = {c: [2.0 * (1 + 1e-6), -1.0, 1e-6 + 3e-9] for c in COLUMNS}
    var["gap_err"] = [0.0, 0.0, 0.0]
    s = column_spread(ref, var)["recursive"]
    assert math.isclose(s["rel"], 1e-6)  # the values within a tenth of the largest: 2 and -1
    # the value near zero, in units of the loss scale
    assert math.isclose(s["beyond"], (3e-9 - 1e-6 * 1e-6) / 2.0)
    var["gap_err"] = [0.0, 0.0, 3e-9]  # the gap is only known to within gap_err
    assert column_spread(ref, var)["gap"]["beyond"] == 0.0
    var["loss_jc"][1] = math.nan
    assert column_spread(ref, var)["loss_jc"]["rel"] == math.inf


@pytest.mark.portable
def test_a_fresh_measurement_is_within_the_stated_rounding(capsys):
    """The golden quadratic, remeasured (threads, engine, the NumPy example): within
    MEASURED_ROUNDING.
    """
    res = measure(tasks=(), golden=["quadratic"])
    variants = {r["variant"] for r in res}
    assert variants == {"threads", "engine", "numpy", "subtraction"}
    got = measured_rounding(res)["float64"]
    # a part measured as exactly 0 on one CPU is rounding on another: stated at least eps
    for c in COLUMNS:
        rel, beyond = stated_rounding("float64", c)
        assert got[c][0] <= rel and got[c][1] <= beyond, (c, got[c], (rel, beyond))
    assert got["loss_jc"][0] > 0  # the NumPy implementation does round differently


def test_no_stated_rounding_or_tolerance_is_zero():
    for dtype, cols in MEASURED_ROUNDING.items():
        for c in cols:
            assert min(stated_rounding(dtype, c)) >= EPS[dtype] > 0, (dtype, c)
            assert min(TOLERANCES[dtype][c]) > 0, (dtype, c)


def test_the_table_is_printed_from_saved_measurements(tmp_path, capsys):
    import json

    res = measure(tasks=(), golden=["quadratic"])
    f = tmp_path / "m.json"
    f.write_text(json.dumps(res))
    assert main(["--load", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| `recursive` |" in out and "numpy" in out and "in force" in out


def test_the_emulation_table_states_the_largest_and_whether_the_stated_value_covers_it():
    from crosscurv.experiments.conformance.rounding import emulation_table

    def result(dt, variant, loss_jc_rel):
        spread = {c: {"rel": 0.0, "beyond": 0.0, "abs": 0.0} for c in COLUMNS}
        spread["loss_jc"]["rel"] = loss_jc_rel
        spread["loss_jc"]["abs"] = loss_jc_rel  # values about the size of the loss scale
        return {"run": "mlp smoke", "dtype": dt, "K": 10, "variant": variant, "spread": spread}

    stated = MEASURED_ROUNDING["float32"]["loss_jc"][0]
    by = {"this CPU": [result("float32", "threads", stated / 4)],
          "no AVX2": [result("float32", "engine", stated / 2), result("float32", "subtraction", 100
                                                                      * stated)]}
    text = emulation_table(by)
    row = next(x for x in text.splitlines() if x.startswith("| `loss_jc` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # subtraction is not rounding
    assert cells[1:3] == [f"{stated / 4:.1e} / 0", f"{stated / 2:.1e} / 0"]
    assert cells[3] == f"{stated / 2:.1e} / 0" and cells[-1] == "yes"
    # stated with the dtype's eps as its floor
    assert cells[4] == f"{stated:.1e} / {EPS['float32']:.1e}"
    by["no AVX2"].append(result("float32", "float64", 3 * stated))
    row = next(x for x in emulation_table(by).splitlines() if x.startswith("| `loss_jc` |"))
    assert row.rstrip(" |").endswith("**no**")


def test_a_stated_rounding_covers_by_its_parts_or_by_its_absolute_part():
    from crosscurv.experiments.conformance.rounding import covers

    assert covers((1e-6, 1e-9), (1e-6, 1e-9), 1.0)
    # a larger relative part, differences above the absolute one
    assert not covers((1e-6, 1e-9), (2e-6, 0.0), 2e-6)
    # a large ratio to a value near zero, every difference below 1e-7
    assert covers((0.0, 1e-7), (1e-2, 0.0), 8e-8)
    assert not covers((0.0, 1e-7), (1e-2, 0.0), 2e-7)


def test_gap_err_is_not_measured_against_a_float64_run():
    """A float64 run's gap_err is another quantity (its rounding part uses float64's eps), not
    rounding."""
    def result(variant, rel):
        spread = {c: {"rel": 0.0, "beyond": 0.0, "abs": 0.0} for c in COLUMNS}
        spread["gap_err"] = {"rel": rel, "beyond": 0.0, "abs": rel}
        spread["recursive"] = {"rel": rel, "beyond": 0.0, "abs": rel}
        return {"run": "mlp smoke", "dtype": "float32", "K": 10, "variant": variant,
                "spread": spread}

    got = measured_rounding([result("threads", 1e-3), result("float64", 1.0)])["float32"]
    assert got["gap_err"] == (1e-3, 0.0)
    # for every other column the float64 run measures the float32 one's error
    assert got["recursive"] == (1.0, 0.0)
