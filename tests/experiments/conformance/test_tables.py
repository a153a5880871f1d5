"""Table-level comparison of a rerun with the committed run, within the spread over seeds (small
synthetic tables)."""

from __future__ import annotations

import math

import pytest

from crosscurv.experiments.conformance.tables import compare_tables, seed_spread, table_quantities


def _columns(gap, rec, err=None):
    """Records of a run: the measured gap, its error bound and three estimates (cumulative = jc_only
    =
    -rec)."""
    n = len(gap)
    return {"gap": list(gap), "gap_err": list(err or [0.0] * n), "recursive": list(rec),
            "cumulative": [-x for x in rec], "jc_only": [-x for x in rec]}


def test_quantities_count_correct_hits_and_switch_points():
    # observed winners J J G . G J (the 4th undecided: |gap| <= gap_err); recursive predicts J G G J
    # G J
    cols = _columns([1.0, 2.0, -1.0, 0.1, -3.0, 4.0], [1.0, -1.0, -1.0, 1.0, -2.0, 3.0],
                    err=[0.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    q = table_quantities(cols)
    assert q["correct/recursive"] == pytest.approx(100 * 4 / 5)  # k = 2 wrong, k = 4 undecided
    assert q["jc_hits/recursive"] == 2 and q["s_hits/recursive"] == 2
    assert q["correct/cumulative"] == pytest.approx(100 * 1 / 5) and q["jc_hits/cumulative"] == 1
    # J->G at k = 3, G->J at k = 6 (k = 4 undecided)
    assert q["switches"] == 2 and q["first_switch"] == 3
    short = table_quantities(cols, K=2)
    assert short["switches"] == 0 and math.isnan(short["first_switch"]) and short[
        "correct/recursive"] == 50.0
    with pytest.raises(ValueError):
        table_quantities(cols, K=7)


def test_a_rerun_passes_within_the_seed_spread_and_fails_beyond_it():
    seeds = [{"correct/recursive": 90.0, "switches": 2.0, "first_switch": 5.0},
             {"correct/recursive": 96.0, "switches": 4.0, "first_switch": 3.0},
             {"correct/recursive": 93.0, "switches": 3.0, "first_switch": math.nan}]
    spread = seed_spread(seeds)
    assert spread["correct/recursive"] == (90.0, 96.0, 3) and spread["first_switch"] == (3.0, 5.0,
                                                                                         2)
    committed = {"correct/recursive": 94.0, "switches": 3.0, "first_switch": 4.0}
    ok = compare_tables({"correct/recursive": 99.0, "switches": 1.0, "first_switch": 6.0},
                        committed, spread)
    assert all(r["passed"] for r in ok)  # differences 5, 2, 2 within the spreads 6, 2, 2
    bad = compare_tables({"correct/recursive": 100.5, "switches": 6.0, "first_switch": math.nan},
                         committed, spread)
    by = {r["quantity"]: r for r in bad}
    assert not by["correct/recursive"]["passed"] and by["correct/recursive"][
        "difference"] == pytest.approx(6.5)
    assert not by["switches"]["passed"]  # 3 > spread 2
    assert not by["first_switch"]["passed"]  # a switch point in one run only


def test_no_switch_point_in_either_run_passes_and_zero_spread_needs_equality():
    spread = seed_spread([{"first_switch": math.nan, "switches": 0.0}, {"first_switch": math.nan,
                                                                        "switches": 0.0}])
    assert spread["first_switch"][2] == 0 and spread["switches"] == (0.0, 0.0, 2)
    rows = compare_tables({"first_switch": math.nan, "switches": 0.0}, {"first_switch": math.nan,
                                                                        "switches": 0.0},
                          spread)
    assert all(r["passed"] for r in rows)
    rows = compare_tables({"switches": 1.0}, {"switches": 0.0}, spread)
    assert not rows[0]["passed"]


def test_identical_tables_pass_on_real_shaped_records():
    cols = _columns([(-1.0) ** (k // 3) * (k + 1) for k in range(12)], [(-1.0) ** (k // 4)
                                                                        for k in range(12)])
    q = table_quantities(cols)
    # one seed: zero spread; the committed table itself passes
    rows = compare_tables(q, q, seed_spread([q]))
    assert all(r["passed"] and (r["difference"] == 0 or math.isnan(r["difference"])) for r in rows)
