"""The certified winner of crosscurv.numeric.certificate: the rule, the records' state and the run's
columns."""

import math

import pytest
from crosscurv.numeric.certificate import (REMAINDER_WINDOW, SAFETY, CertificateState,
                                           advice_next_orders, certify_best, certify_gap,
                                           record_certificates, record_next_orders)


def test_certify_best_separates_by_the_safety_factor():
    est, nxt = {"jc": 0.0, "gs": -1.0, "chain": -0.2}, {"jc": 0.0, "gs": 0.1, "chain": 0.05}
    v = certify_best(est, nxt, True)
    assert v["best"] == "gs" and v["tied"] == ["gs"] and v["certified"]
    # -1 + 3 * 0.3 = -0.1 overlaps chain's -0.2 - 0.15: tied, not certified
    v = certify_best(est, {**nxt, "gs": 0.3}, True, factor=3.0)
    assert v["tied"] == ["gs", "chain"] and not v["certified"]
    # at 2: -1 + 0.6 = -0.4 is below chain's -0.2 - 0.1 = -0.3: separated
    assert certify_best(est, {**nxt, "gs": 0.3}, True, factor=2.0)["certified"]
    assert certify_best(est, {**nxt, "gs": 0.3}, True) == certify_best(
        est, {**nxt, "gs": 0.3}, True, factor=SAFETY)  # the default is the code's factor
    assert not certify_best(est, nxt, False)["certified"]  # outside the regime
    assert not certify_best(est, {**nxt, "chain": math.nan}, True)["certified"]
    assert not certify_best(est, nxt, True, factor=20.0)["certified"]


def test_full_gs_orders_are_certified_as_a_set():
    est = {"jc": 0.0, "gs": -1.0, "gs:2,1": -0.98}
    nxt = {"jc": 0.0, "gs": 0.01, "gs:2,1": 0.01}
    v = certify_best(est, nxt, True, gs_orders=["gs", "gs:2,1"])
    assert v["certified"] and v["tied"] == ["gs", "gs:2,1"]
    assert not certify_best(est, nxt, True)["certified"]  # without the GS orders named: a tie
    # every candidate tied: nothing to certify even if all are GS orders
    assert not certify_best(
        {"gs": -1.0, "gs:2,1": -1.0}, {"gs": 0.1, "gs:2,1": 0.1}, True, gs_orders=["gs", "gs:2,1"]
    )["certified"]


def test_certify_gap_is_the_two_candidate_case():
    # separated when the prediction's distance from 0 exceeds F times its first dropped order
    assert certify_gap(1.0, 0.99 / SAFETY, True) == 1.0
    assert certify_gap(-1.0, 0.99 / SAFETY, True) == -1.0
    assert certify_gap(1.0, 1.01 / SAFETY, True) == 0.0 and certify_gap(1.0, 0.1, False) == 0.0
    assert certify_gap(1.0, 0.3, True, factor=3.0) == 1.0
    assert certify_gap(1.0, 0.34, True, factor=3.0) == 0.0
    assert certify_gap(1.0, math.inf, True) == 0.0


def test_next_orders():
    rec = {"gap": 0.0, "recursive": 1.0, "cumulative": 1.5, "jc_only": 1.75}
    assert record_next_orders(rec, [0.1, 0.2])["recursive"] == math.inf  # fewer than the window
    n = record_next_orders(rec, [0.3, 0.1, 0.2])
    assert n["recursive"] == pytest.approx(
        0.3 * 2.0
    )  # the largest, times the last growth 0.2 / 0.1
    assert n["cumulative"] == pytest.approx(0.5 + n["recursive"])
    assert n["jc_only"] == pytest.approx(0.25 + n["cumulative"])
    errs = [{"jc": 0.0, "gs": 0.2}, {"jc": 0.0, "gs": 0.0}, {"jc": 0.0, "gs": 0.1}]
    assert advice_next_orders(errs, {"gs": 5.0}, REMAINDER_WINDOW + 1)["gs"] == 0.2
    assert advice_next_orders(errs, {"gs": 5.0}, REMAINDER_WINDOW)["gs"] == 5.0


def test_state_equals_the_columns_and_survives_a_checkpoint():
    cols = {
        "gap": [-0.1 * (k + 1) for k in range(12)],
        "recursive": [-0.1 * (k + 1) + 1e-4 for k in range(12)],
        "cumulative": [-0.1 * (k + 1) + 2e-4 for k in range(12)],
        "jc_only": [-0.1 * (k + 1) + 5e-4 for k in range(12)],
        "sharpness": [1.0] * 11 + [30.0],
    }
    want = record_certificates(cols, 0.1)
    assert want["recursive"][:REMAINDER_WINDOW] == [0.0] * REMAINDER_WINDOW
    assert want["recursive"][REMAINDER_WINDOW] == -1.0 and want["jc_only"][-2] == -1.0
    assert want["recursive"][-1] == 0.0  # eta * sharpness = 3: past the edge
    state, got = CertificateState(), {e: [] for e in want}
    for i in range(12):
        if i == 5:
            state = CertificateState.from_state_dict(state.state_dict())
        c = state.record(
            {n: cols[n][i] for n in ("gap", "recursive", "cumulative", "jc_only")},
            0.1 * cols["sharpness"][i] < 2,
        )
        for e in got:
            got[e].append(c[e])
    assert got == want
    assert not state.inside  # once past the edge, never back


def test_run_records_hold_the_certificate_of_their_columns():
    """crosscurv run's *_cert columns are record_certificates of its own columns, and right where
    certified."""
    from crosscurv.experiments.problems.zoo import logistic
    from crosscurv.numeric.metrics import certified_metrics
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.records import records_columns

    res = run_protocol(logistic(), "gs", 1.0, 25)
    cols = records_columns(res.records)
    want = record_certificates(cols, 1.0, dtype="float64")
    for e, c in want.items():
        assert cols[f"{e}_cert"] == c, e
        m = certified_metrics(cols["gap"], cols[e], c, cols["gap_err"])
        assert m["certified"] > 0 and m["precision"] == 100.0, (e, m)
    assert SAFETY > 1


def test_the_recommendation_names_exactly_the_certified_budgets():
    """Each range of the same predicted best states exactly its certified budgets, the head agrees
    with the last row, and a GS-order set says so (no sentence contradicts another)."""
    from crosscurv.numeric.advice import k_ranges, recommendation

    def row(k, best, cert, tied=None):
        return {"k": k, "best": best, "certified": cert, "tied": tied or [best]}

    rows = ([row(k, "jc", k in (3, 4, 5, 9)) for k in range(1, 11)]
            + [row(k, "gs", 12 <= k <= 14, ["gs", "gs:2,1"]) for k in range(11, 16)])
    text = recommendation(rows)
    assert text.startswith("at K = 15: use gs (not certified). ")
    assert "jc for K <= 10, certified at K = 3..5, 9;" in text
    assert ("gs for K = 11..15, certified at K = 12..14 (as one of the GS orders the errors "
            "cannot tell apart).") in text
    assert "certified from" not in text
    assert k_ranges(list(range(1, 30, 2)), 3) == "1, 3, 5, and 12 more iterations in 12 ranges"
    one = recommendation([row(1, "gs", True)])
    assert one == "at K = 1: use gs (certified). gs for every K <= 1, certified throughout."


def test_best_schemes_within_the_loss_rounding_make_one_range_of_any_scheme():
    """Where the best two predictions differ by less than the loss's rounding the best alternates
    by chance: those budgets form one range of "any scheme" (never certified there), the head
    says so at the last budget, and a margin above the rounding keeps its scheme."""
    from crosscurv.numeric.advice import recommendation

    def row(k, best, margin, cert=False):
        return {"k": k, "best": best, "certified": cert, "tied": [best], "margin": margin,
                "rounding": 1e-15}

    rows = ([row(k, "gs", 1e-6, k > 2) for k in range(1, 6)]
            + [row(k, "gs" if k % 2 else "gs:2,1", 1e-20) for k in range(6, 30)])
    text = recommendation(rows)
    assert text.startswith("at K = 29: use any scheme (predicted gs, not certified). ")
    assert "gs for K <= 5, certified at K = 3..5; any scheme for K = 6..29 (the best two " \
           "predictions within the loss's rounding)." in text
    assert "changes" not in text
    kept = recommendation([row(1, "gs", 1e-6), row(2, "gs:2,1", 2e-15)])
    assert kept.startswith("at K = 2: use gs:2,1 (not certified)") and "any scheme" not in kept


def test_a_noisy_remainder_sequence_is_bounded_by_its_recent_maximum():
    """A large remainder RECORD_WINDOW records back still bounds N: a non-monotone sequence's last
    values say nothing about the next one (a kink crossed, the curvature changing fast)."""
    from crosscurv.numeric.certificate import RECORD_WINDOW

    rec = {"recursive": 0.0, "cumulative": 0.0, "jc_only": 0.0}
    rems = [0.04] + [1e-3] * (RECORD_WINDOW - 1)
    assert record_next_orders(rec, rems)["recursive"] == 0.04
    assert RECORD_WINDOW >= REMAINDER_WINDOW
    assert record_next_orders(rec, [0.04] + [1e-3] * RECORD_WINDOW)["recursive"] == 1e-3


def test_a_remainder_beyond_its_gap_withdraws_the_certificate():
    """A measured remainder larger than the gap it corrects (a candidate's run diverging): the
    dropped order beyond the kept one, N = inf, nothing certified until it leaves the look-back."""
    from crosscurv.numeric.certificate import RECORD_WINDOW

    gaps = [-0.1, -0.4, -8.0, 1.4e3]
    rems = [0.02, 0.05, 4.0, 1.6e3]  # the last one exceeds |gap| on both sides
    rec = {"recursive": -6e6, "cumulative": -6e6, "jc_only": -6e6}
    assert math.isinf(record_next_orders(rec, rems, past_gaps=gaps)["recursive"])
    calm = {"recursive": -8.5, "cumulative": -8.5, "jc_only": -8.5}  # a change within its gap
    assert math.isfinite(record_next_orders(calm, rems[:-1], past_gaps=gaps[:-1])["recursive"])
    cols = {
        "gap": gaps + [-1e3] * RECORD_WINDOW + [-1e3],
        "recursive": [g - r for g, r in zip(gaps, rems)] + [-1e3] * (RECORD_WINDOW + 1),
        "sharpness": [1.0] * (len(gaps) + RECORD_WINDOW + 1),
    }
    cols["cumulative"] = list(cols["recursive"])
    cols["jc_only"] = list(cols["recursive"])
    certs = record_certificates(cols, 0.1)["recursive"]
    assert certs[len(gaps) : len(gaps) + RECORD_WINDOW] == [0.0] * RECORD_WINDOW
    assert certs[-1] == -1.0  # once out of the look-back, certified again
    # without the withdrawal the last growth (x400) does not cover the prediction: it would certify
    n = record_next_orders(rec, rems)["recursive"]
    assert certify_gap(rec["recursive"], n, True) == -1.0


def test_a_loss_that_rose_withdraws_the_next_record():
    """A step that raised the scheme's (or JC's) loss beyond the rounding of the difference: that
    run has left the regime the JC run's sharpness measures, and the next record is not certified;
    a rise within the rounding (a few ulps of a float32 loss) changes nothing; without a dtype
    (an optimizer's run) the losses are not checked. The state carries it across a checkpoint."""
    from crosscurv.numeric.certificate import rose

    n = 10
    cols = {
        "gap": [-0.1] * n,
        "recursive": [-0.1 + 1e-4] * n,
        "cumulative": [-0.1 + 1e-4] * n,
        "jc_only": [-0.1 + 1e-4] * n,
        "sharpness": [1.0] * n,
        "loss_jc": [1.0 - 0.01 * k for k in range(n)],
        "loss_s": [0.9 - 0.01 * k for k in range(n)],
    }
    calm = record_certificates(cols, 0.1, dtype="float64")["recursive"]
    assert calm[REMAINDER_WINDOW:] == [-1.0] * (n - REMAINDER_WINDOW)
    cols["loss_s"][6] = cols["loss_s"][5] + 1e-3  # the step to record 6 raised L_S
    got = record_certificates(cols, 0.1, dtype="float64")["recursive"]
    assert got[7] == 0.0 and got[:7] == calm[:7] and got[8:] == calm[8:]
    assert record_certificates(cols, 0.1)["recursive"] == calm  # not checked without a dtype
    jc = dict(cols, loss_s=[0.9 - 0.01 * k for k in range(n)], loss_jc=list(cols["loss_jc"]))
    jc["loss_jc"][4] = jc["loss_jc"][3] + 1e-3
    assert record_certificates(jc, 0.1, dtype="float64")["recursive"][5] == 0.0
    ulp32 = 2.0 ** -23 * 0.5  # float32 spacing at 0.8
    assert not rose((1.0, 0.8), (0.99, 0.8 + 3 * ulp32), "float32")
    assert rose((1.0, 0.8), (0.99, 0.8 + 3 * ulp32), "float64")
    state = CertificateState()
    for i in range(n):
        if i == 7:  # a checkpoint between the rise and the record it withdraws
            state = CertificateState.from_state_dict(state.state_dict())
        c = state.record({e: cols[e][i] for e in ("gap", "recursive", "cumulative", "jc_only")},
                         True, losses=(cols["loss_jc"][i], cols["loss_s"][i]), dtype="float64")
        assert c["recursive"] == got[i], i


def test_a_predicted_change_beyond_its_gap_withdraws_the_certificate():
    """A record whose recursive estimate moves by more than the gap it starts from (a candidate's
    run blowing up within one step, as a CP decomposition at lambda_max * eta = 1 does): N = inf
    at that record, though every past remainder is small."""
    gaps = [-1.3e-3, -2.7e-2, -9.7e-2]
    rems = [2.6e-4, 2.0e-2, 2.8e-2]
    blow = {"recursive": -3.96, "cumulative": -3.96, "jc_only": -3.96}
    n = record_next_orders(blow, rems, past_gaps=gaps)
    assert all(math.isinf(v) for v in n.values())
    assert certify_gap(blow["recursive"], n["recursive"], True) == 0.0
    steady = {"recursive": -0.15, "cumulative": -0.15, "jc_only": -0.15}
    assert math.isfinite(record_next_orders(steady, rems, past_gaps=gaps)["recursive"])
    # without the gaps (the withdrawal off) the jump is not seen
    assert math.isfinite(record_next_orders(blow, rems)["recursive"])


def test_a_first_step_the_expansion_does_not_describe_withdraws_the_advice_at_every_k():
    """The one-step check at theta^0 (float32 rounding of the iterates here): measured 3.2e-7 where
    eta^2 C_S = 4.4e-8 and the eta^3 term adds 5e-10; both kept orders miss it by more than they
    keep, so N = inf at every k, not only the first REMAINDER_WINDOW."""
    from crosscurv.numeric.certificate import first_step_remainders

    bad = {"measured": 3.2e-7, "eta2": 4.39e-8, "eta3": 4.33e-8, "floor": 1.0e-7}
    # the eta^3 term explains what eta^2 leaves out: a large but described first step
    good = {"measured": -0.0488, "eta2": -0.0216, "eta3": -0.0511, "floor": 2.5e-15}
    first = first_step_remainders([{"gs": bad, "chain": good}])
    assert math.isinf(first["gs"]) and first["chain"] == pytest.approx(0.0272)
    errs = [{"jc": 0.0, "gs": 1e-11, "chain": 1e-11}] * 3
    late = advice_next_orders(errs, first, 30)
    assert math.isinf(late["gs"]) and late["chain"] == 1e-11
    est = {"jc": 0.0, "gs": 1.6e-7, "chain": 5e-7}
    assert not certify_best(est, late, True)["certified"]


def test_the_first_step_term_is_the_certified_predictions_own_measured_error():
    """For k <= 3 advise's first dropped order is |L_S^1 - L_JC^1 - estimate_S^1| (the JC-only
    estimate it certifies, measured at the first step), not the remainder of eta^2 C_S (another
    prediction); a first step neither kept order describes, or none could measure, withdraws every
    k."""
    from crosscurv.numeric.certificate import first_step_orders

    # deep_linear-like numbers: eta^2 C_S misses the step by 2.5e-4, the estimate by 1.8e-5
    good = {"measured": -1.0e-3, "eta2": -1.25e-3, "eta3": -1.1e-3, "floor": 1e-16}
    bad = {"measured": 3.2e-7, "eta2": 4.39e-8, "eta3": 4.33e-8, "floor": 1.0e-7}
    first = first_step_orders([{"gs": good, "chain": bad}], {"gs": -1.018e-3, "chain": 4.4e-8})
    assert first["gs"] == pytest.approx(1.8e-5) and math.isinf(first["chain"])
    # a step that could not be measured (the loss raised outside its domain) withdraws every k
    unmeasured = first_step_orders([{"gs": {**good, "measured": math.nan}}], {"gs": 0.0})
    assert math.isinf(unmeasured["gs"])
    errs = [{"jc": 0.0, "gs": 1e-6, "chain": 1e-6}] * 3
    early = advice_next_orders(errs, first, 2)
    assert early["gs"] == pytest.approx(1.8e-5) and math.isinf(early["chain"])
    assert advice_next_orders(errs, first, 4)["gs"] == 1e-6
    # certified with the prediction's own error; the remainder of eta^2 C_S (2.5e-4) would not
    est = {"jc": 0.0, "gs": -2e-4}
    assert certify_best(est, {"jc": 0.0, "gs": early["gs"]}, True)["certified"]
    assert not certify_best(est, {"jc": 0.0, "gs": 2.5e-4}, True)["certified"]


def test_no_certificate_separates_differences_below_the_rounding_of_the_loss():
    """A converged run (negative-binomial regression, fourth fresh round): predicted gaps of 1e-17
    to 1e-25 against a loss of -0.23 in float64, where measured gaps are rounding noise. The loss's
    rounding floors every advised candidate's first dropped order (JC's exact 0 excepted) and a
    record's is floored at its own ``gap_err``, so neither certifies there."""
    from crosscurv.numeric.certificate import record_next_orders, rounding_floor
    from crosscurv.numeric.gap import difference_error

    floor = rounding_floor(-0.23005, "float64")
    assert floor == difference_error(-0.23005, -0.23005, "float64") and 1e-16 < floor < 1e-15
    errs = [{"jc": 0.0, "gs": 1.6e-18, "gs:s,w": 6.9e-19}] * 3
    est = {"jc": 0.0, "gs": -2.6e-17, "gs:s,w": 1.8e-18}
    assert certify_best(est, advice_next_orders(errs, {}, 64), True)["certified"]  # unfloored
    nxt = advice_next_orders(errs, {}, 64, floor=floor, exact=["jc"])
    assert nxt == {"jc": 0.0, "gs": floor, "gs:s,w": floor}
    assert not certify_best(est, nxt, True)["certified"]
    rec = {"gap": 2.5e-16, "gap_err": 2.2e-16, "recursive": -1.3e-19, "cumulative": -1.5e-19,
           "jc_only": -1.5e-19}
    n = record_next_orders(rec, [1e-20] * 3, past_gaps=[1e-16] * 4)
    assert n["recursive"] >= 2.2e-16
    assert certify_gap(rec["recursive"], n["recursive"], True) == 0.0


def test_edge_amplification_is_the_top_modes_accumulated_propagation():
    """``1 / (2 - x)`` for ``1 < x < 2``: the sum of ``|1 - x|^j`` over the steps; 1 at or below 1,
    ``inf`` at the edge. A sparse-coding run of the fourth fresh round (``x = 1.55``) certified
    ``gs:Z,D`` with margin 6.4e-4 against errors 1.0e-4 and 1.6e-4 while ``gs`` had the lower
    loss; amplified, the same numbers are not separated."""
    from crosscurv.numeric.certificate import SAFETY, edge_amplification

    assert edge_amplification(0.3) == 1.0 and edge_amplification(1.0) == 1.0
    assert edge_amplification(math.nan) == 1.0 and math.isinf(edge_amplification(2.0))
    for x in (1.2, 1.5, 1.9):
        assert edge_amplification(x) == pytest.approx(sum(abs(1 - x) ** j for j in range(5000)))
    est = {"jc": 0.0, "gs": -1.38e-3, "gs:Z,D": -2.02e-3}
    errs = [{"jc": 0.0, "gs": 1.0e-4, "gs:Z,D": 1.6e-4}] * 3
    plain = advice_next_orders(errs, {}, 22, exact=["jc"])
    assert certify_best(est, plain, True, factor=SAFETY)["certified"]
    amp = advice_next_orders(errs, {}, 22, amplification=edge_amplification(1.55), exact=["jc"])
    assert amp["gs"] == pytest.approx(1.0e-4 / 0.45)
    assert not certify_best(est, amp, True, factor=SAFETY)["certified"]
