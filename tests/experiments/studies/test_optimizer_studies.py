"""The optimizer studies' runner plan and report (``python -m
crosscurv.experiments.studies.optimizers.runner``) on synthetic records."""

from __future__ import annotations

import json
import math
import os

from crosscurv.experiments.studies.optimizers.report import estimate_winners, switch_points, winners
from crosscurv.experiments.cli.scripts import optimizer_runner as main
from crosscurv.experiments.studies.optimizers.runner import STUDIES, planned
from crosscurv.numeric.records import RecordWriter, make_record


def test_winners_and_switch_points():
    t = winners([0.1, -0.2, 1e-9, -0.3, 0.4, math.nan], [0.0, 0.0, 1e-8, 0.0, 0.0, 0.0])
    assert t == "JG.GJ."
    assert switch_points(t) == [2, 5]
    assert switch_points("..GG.G") == [] and switch_points("G.J") == [3]
    assert estimate_winners([1.0, -1.0, 0.0, math.inf]) == "JG0?"


def test_plan_is_seed_major_and_shares_the_sgd_baseline():
    plan = [(t, label, s) for t, label, s, _ in planned([0, 1])]
    assert plan[0] == ("lora", "sgd", 0)
    assert plan.count(("lora", "sgd", 0)) == 1  # shared by the LoRA+ and Adam studies
    assert max(i for i, p in enumerate(plan) if p[2] == 0) < min(i for i, p in enumerate(plan) if p[
        2] == 1)
    flags = {v.label: v.flags() for st in STUDIES for v in st.variants}
    assert flags["block-lr-B16"] == ["--block-lr", "B=16"]
    assert flags["momentum-0.9"] == ["--optimizer", "momentum:0.9"]
    assert flags["adam-lr1e-3"] == ["--optimizer", "adam", "--lr", "0.001"]


def _fake_run(path, gaps, est, iters, lr=0.03, gap_err=0.0, recorded=None):
    os.makedirs(path)
    with RecordWriter(os.path.join(path, "records.csv")) as w:
        for k, (g, e) in enumerate(zip(gaps, est), start=1):
            r = g if recorded is None else recorded[k - 1]
            w.write(make_record(k, loss_jc=1.0, loss_s=1.0 + g, gap=r, recursive=e, cumulative=e,
                                jc_only=e, bound_bk=1.0, sharpness=1.0, gap_err=gap_err))
    with open(os.path.join(path, "summary.json"), "w") as fh:
        json.dump({"status": "complete", "settings": {"iters": iters, "lr": lr, "preset": "default",
                                                      "pattern_spec": "gs", "dtype": "float32"}},
                  fh)


def test_report_states_what_the_records_show(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs / "lora" / "sgd" / "seed0", [-1, -1, 1, -1], [-1, -1, 1, -1], 4)
    # a variant whose winner switches later and whose estimate blows up at k = 1
    _fake_run(runs / "lora" / "adam-lr1e-3" / "seed0", [-1, -1, -1, 1], [1e6, -1, -1, 1], 4,
              lr=1e-3)
    assert main(["report", "--runs", str(runs), "--out", str(tmp_path / "rep"), "--seeds", "0",
                 "--iters", "4"]) == 0
    text = (tmp_path / "rep" / "optimizers.md").read_text()
    copied = tmp_path / "rep" / "optimizers" / "runs" / "lora" / "adam-lr1e-3" / "seed0"
    assert sorted(os.listdir(copied)) == ["records.csv", "summary.json"]
    assert ("adam-lr1e-3, seed 0: the measured winner equals plain sgd's at 2/4 decided "
            "iterations") in text
    assert "switch points [4] against [3, 4]" in text
    assert "the cumulative estimate is 1e+06 times the gap" in text
    assert ("from k = 2 on (one tangent step from the measured differences) the recursive "
            "estimate has MAE/mean abs gap 0 and the gap's sign at 100% of the iterations: "
            "follows the gap") in text
    assert ("lora_lrplus, sgd, seed 0: Recursive 100% correct, MAE/mean abs gap 0: follows "
            "the gap") in text
    assert "No runs yet." in text  # fl_momentum
    # what was found comes first, one line per variant beside plain sgd
    assert text.splitlines()[2] == (f"- lora_adam, adam-lr1e-3: recursive Correct 75.0%, MAE/gap "
                                    f"{text.splitlines()[2].split('MAE/gap ')[1].split(';')[0]}; "
                                    f"the measured winner is sgd's at 2/4 iterations.")


def test_iterations_measured_by_the_plain_difference_are_reported(tmp_path):
    """Where a run recorded the plain difference ``loss_s - loss_jc`` with its rounding bound
    (:func:`crosscurv.numeric.gap.reconcile`), the report says at how many iterations."""
    from crosscurv.numeric.gap import difference_error

    runs = tmp_path / "runs"
    _fake_run(runs / "fl" / "sgd" / "seed0", [-1, -1, -1], [-1, -1, -1], 3)
    _fake_run(runs / "fl" / "momentum-0.9" / "seed0", [-1, -1, -1], [-1, -1, -1], 3,
              gap_err=difference_error(0.0, 1.0, "float32"))
    assert main(["report", "--runs", str(runs), "--out", str(tmp_path / "rep"), "--seeds", "0",
                 "--iters", "3"]) == 0
    text = (tmp_path / "rep" / "optimizers.md").read_text()
    assert ("momentum-0.9, seed 0: at 3/3 iterations the gap is the plain difference "
            "L_S - L_JC") in text
    assert "sgd, seed 0: at" not in text
    assert ("fl_momentum, momentum-0.9, seed 0: the measured winner equals plain sgd's at 3/3 "
            "decided iterations") in text
    assert ("fl_momentum, momentum-0.9, seed 0: Recursive 100% correct, MAE/mean abs gap 0: "
            "follows the gap") in text


def test_each_study_run_is_a_run_description():
    """A study's run is the ``crosscurv run`` of its description: the variant's flags, the default
    preset, the seed, K, a checkpoint every 5 records and one thread."""
    from crosscurv.experiments.studies.optimizers.runner import description

    adam = next(v for st in STUDIES for v in st.variants if v.label == "adam-lr1e-3")
    d = description("lora", adam, 1, 40)
    assert d.to_args() == ["lora", "--preset", "default", "--lr", "0.001", "--iters", "40",
                           "--seed", "1", "--threads", "1", "--optimizer", "adam",
                           "--checkpoint-every", "5"]
    assert set(adam.flags()) <= set(d.to_args())


def test_error_bars_count_calibration_over_finite_bars_and_certified_winners():
    import math

    from crosscurv.experiments.studies.optimizers.report import error_bars

    inf = math.inf
    cols = {"gap": [1.0, -1.0, 1.0, 1.0], "recursive": [0.9, -0.5, -0.2, 1.1],
            "recursive_err": [inf, 0.1, 1.5, 0.2], "recursive_cert": [0.0, -1.0, 0.0, 1.0]}
    b = error_bars(cols, "recursive")
    # k = 2 misses (|-0.5 + 1| > 0.1); the inf bar is not counted
    assert b["calibrated"] == 100.0 * 2 / 3
    assert (b["correct"], b["certified"], b["coverage"], b["precision"]) == (2, 2, 50.0, 100.0)
    cols["recursive_cert"] = [0.0, 1.0, 0.0, 0.0]  # a wrong certificate
    assert error_bars(cols, "recursive")["precision"] == 0.0
