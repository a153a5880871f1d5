"""The answer ``crosscurv run`` prints: the lower scheme at K, by how much, where the winner
changed."""

from __future__ import annotations

from crosscurv.experiments.reports.answer import answer_lines, diverged_lines, final_answer


def _columns(gaps, errs=None):
    n = len(gaps)
    return {
        "k": list(range(1, n + 1)),
        "loss_jc": [1.0] * n,
        "loss_s": [1.0 + g for g in gaps],
        "gap": list(gaps),
        "gap_err": list(errs or [1e-9] * n),
    }


def test_changes_skip_undecided_iterations_and_name_segments():
    gaps = [0.1, 0.2, -0.1, 0.0, -0.3, 0.05, 0.05]  # k = 4 within its error bound: undecided
    a = final_answer(_columns(gaps))
    assert a["changes"] == [3, 6] and a["lower"] == "JC" and a["timeline"] == "JJG.GJJ"
    head, change = answer_lines(_columns(gaps), "gs:V,U")
    assert head == "at K = 7: L_JC = 1, L_S = 1.05 (S = gs:V,U): JC is lower by 0.05 (5% of L_JC)"
    assert (
        change
        == "winner changed 2 times, at k = 3, 6: JC at k = 1..2, S at k = 3..5, JC at k = 6..7"
    )


def test_a_gap_within_its_error_names_no_winner():
    head, change = answer_lines(_columns([-0.2, -0.1, 1e-12], [1e-9, 1e-9, 1e-9]), "gs")
    assert head.endswith("neither is lower: the gap 1e-12 is within its measurement error 1e-09")
    assert (
        change == "no change of winner: S lower at every decided k (1 undecided: |gap| <= gap_err)"
    )


def test_diverged_run_reports_its_last_finite_state_only():
    rows = [
        {"k": 1, "loss_jc": 2.0, "loss_s": 3.0, "gap": 1.0},
        {"k": 2, "loss_jc": 5e9, "loss_s": 7e30, "gap": 7e30},
    ]
    lines = diverged_lines(rows, "runs/x")
    assert (
        lines[0]
        == "last finite state: k = 2, L_JC = 5e+09, L_S = 7e+30, gap 7e+30; "
           "records of k = 1..2 in runs/x"
    )
    assert diverged_lines([], "runs/x")[0].startswith("no finite iteration after theta^0")


def test_equal_losses_say_so():
    head, change = answer_lines(_columns([0.0, 0.0], [0.0, 0.0]), "jc")
    assert head.endswith("neither is lower: the two losses are equal")
    assert change == "no iteration decided: every gap is 0 or within its measurement error"
