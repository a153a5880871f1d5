"""The paper's Section 5.1 metrics on hand-made sequences, ties included."""

from __future__ import annotations

import math

import pytest

from crosscurv.numeric.metrics import (GS, JC, TIE, UNDEFINED, bound_coverage, evaluate, winner,
                                       winner_metrics)


def test_winner_function():
    assert winner(1e-300) == JC
    assert winner(-2.0) == GS
    assert winner(0.0) == TIE and winner(-0.0) == TIE
    assert winner(float("nan")) == UNDEFINED
    assert winner(float("inf")) == JC


def test_hand_made_sequence_without_ties():
    gaps = [0.5, 0.2, -0.1, -0.3, -0.4]
    est = [0.4, -0.1, -0.2, -0.3, 0.1]
    m = evaluate(gaps, est)
    # agreements at k = 1, 3, 4
    assert m.K == 5
    assert m.correct == pytest.approx(60.0, abs=0)
    assert m.jc_hits == (1, 2)
    assert m.s_hits == (2, 3)
    errors = [0.1, 0.3, 0.1, 0.0, 0.5]
    assert m.mae == pytest.approx(sum(errors) / 5, rel=1e-15)
    assert m.max_ae == pytest.approx(0.5, rel=1e-15)
    assert m.ties == 0


def test_ties_are_in_neither_count_and_need_equal_winners():
    gaps = [0.0, 0.0, 1.0, -1.0, 0.0]
    est = [0.0, 2.0, 0.0, -0.5, -0.0]
    m = evaluate(gaps, est)
    # k=1: tie vs tie agree; k=2: JC vs tie wrong; k=3: tie estimate vs JC wrong;
    # k=4: GS vs GS agree; k=5: -0.0 is a tie, agrees with a zero gap
    assert m.correct == pytest.approx(60.0, abs=0)
    assert m.jc_hits == (0, 1)  # the JC gap at k=3 is missed by a zero estimate
    assert m.s_hits == (1, 1)
    assert m.ties == 3
    assert m.jc_hits[1] + m.s_hits[1] + m.ties == m.K


def test_nan_estimate_never_agrees_and_poisons_errors():
    m = evaluate([1.0, -1.0], [float("nan"), -1.0])
    assert m.correct == 50.0
    assert m.jc_hits == (0, 1) and m.s_hits == (1, 1)
    assert math.isnan(m.mae) and math.isnan(m.max_ae)


def test_dict_form_and_table_row():
    d = winner_metrics([1.0, -1.0, -1.0, -1.0], [2.0, -1.0, 1.0, -3.0])
    assert d == {"K": 4, "correct": 75.0, "jc_hits": (1, 1), "s_hits": (2, 3), "mae": 1.25,
                 "max_ae": 2.0, "ties": 0, "undecided": 0}
    row = evaluate([1.0, -1.0], [1.0, -1.0]).row()
    assert row[:3] == ["100.0%", "1/1", "1/1"]


def test_gaps_within_their_error_bound_are_undecided():
    gaps = [1e-7, -2e-7, 0.5, -0.5, 0.0, 0.0]
    errs = [5e-7, 1e-7, 1e-3, 1e-3, 0.0, 1e-9]
    est = [-1.0, -1.0, 1.0, 1.0, 0.0, 0.0]
    m = evaluate(gaps, est, errs)
    assert m.undecided == 2  # |1e-7| <= 5e-7; the last zero gap with a positive bound
    assert m.ties == 1  # an exact zero with an exact (zero) bound stays a tie
    assert m.jc_hits == (1, 1) and m.s_hits == (1, 2)  # -2e-7 > its bound 1e-7: a decided GS win
    assert m.correct == 75.0  # 3 of the 4 decided iterations (the tie agrees with a zero estimate)
    assert m.mae == pytest.approx(sum(abs(a - b) for a, b in zip(est, gaps)) / 6)  # MAE over all K
    assert math.isnan(evaluate([1e-9], [1.0], [1e-8]).correct)  # nothing decided
    nan_errs = evaluate(gaps, est, [float("nan")] * 6)
    # no bound (an older records file): all decided
    assert nan_errs.undecided == 0 and nan_errs.ties == 2
    with pytest.raises(ValueError):
        evaluate([1.0], [1.0], [0.1, 0.2])


def test_length_mismatch_and_empty_are_errors():
    with pytest.raises(ValueError):
        evaluate([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        evaluate([], [])


def test_bound_coverage():
    c = bound_coverage([0.1, -0.5, 0.2], [0.2, 0.4, 0.0])
    assert c["covered"] == 1 and c["K"] == 3
    assert c["max_ratio"] == pytest.approx(0.5 / 0.4)
