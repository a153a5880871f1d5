"""Regret and rightness of an advice against measured gaps (crosscurv.numeric.regret)."""

import math

from crosscurv.numeric.regret import advice_right, measured_ties, regret, summarise


def test_regret_relative_to_the_spread():
    gaps = {"jc": 0.0, "gs": -1.0, "chain": -0.5}
    errs = {"jc": 0.0, "gs": 1e-9, "chain": 1e-9}
    assert measured_ties(gaps, errs) == ("gs", ["gs"])
    assert regret("gs", gaps, errs) == 0.0 and advice_right("gs", gaps, errs)
    assert regret("chain", gaps, errs) == 0.5 and regret("jc", gaps, errs) == 1.0
    assert not advice_right("chain", gaps, errs)


def test_ties_of_the_measurement_and_of_the_theory():
    gaps = {"jc": 0.0, "gs": -1.0, "gs:2,1": -0.9}
    errs = {"jc": 0.0, "gs": 0.06, "gs:2,1": 0.06}
    assert advice_right("gs:2,1", gaps, errs) and regret("gs:2,1", gaps, errs) == 0.0  # within 0.12
    errs = {"jc": 0.0, "gs": 0.01, "gs:2,1": 0.01}
    assert abs(regret("gs:2,1", gaps, errs) - 0.1) < 1e-15
    assert regret("gs:2,1", gaps, errs, theory_ties=["gs", "gs:2,1"]) == 0.0
    assert math.isnan(regret("jc", {"jc": 0.0, "gs": 1e-12}, {"jc": 0.0, "gs": 1e-9}))  # undecided


def test_summarise_counts_the_wrong_certified_iterations():
    rows = [
        {"k": 1, "advised": "a", "certified": True, "right": True, "regret": 0.0},
        {"k": 2, "advised": "a", "certified": True, "right": False, "regret": 0.4},
        {"k": 3, "advised": "a", "certified": False, "right": False, "regret": 0.2},
        {"k": 4, "advised": "a", "certified": True, "right": True, "regret": math.nan},
    ]
    s = summarise(rows)
    assert s["decided"] == 3 and s["certified"] == 2 and s["wrong_k"] == [2]
    assert s["precision"] == 50.0 and abs(s["regret_mean"] - 0.2) < 1e-15 and s["agree"] == [1, 3]
