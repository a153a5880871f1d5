"""The default presets sit inside the expansions' regime: chosen by the stated rule, below the edge
at theta^0.

The rule (:func:`crosscurv.experiments.studies.regime.regime_learning_rate`): the largest rate of
``LR_GRID`` whose ``max_k eta * lambda_max`` over ``K = 500``, predicted from the committed ``edge``
run (``reports/sweeps/edge-seed0/runs/<task>-default-seed0``) by gradient-flow time, is at most
``MARGIN * EDGE = 1``. The K = 500 runs at the chosen rates (``reports/sweeps/seeds*``) are the
confirmation; ``reports/studies.md`` reports them.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

from crosscurv.experiments.studies.regime import EDGE, MARGIN, regime_learning_rate
from crosscurv.experiments.tasks import build_task, preset_settings
from crosscurv.numeric.estimates import hessian_extremes
from crosscurv.numeric.point import PointCurvature
from crosscurv.numeric.records import read_records, records_columns

warnings.filterwarnings("ignore", category=FutureWarning)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASKS = ("mlp", "fl", "lora")


def _reference(*parts):
    run = os.path.join(REPO, "reports", "sweeps", *parts)
    with open(os.path.join(run, "summary.json")) as fh:
        settings = json.load(fh)["settings"]
    return records_columns(read_records(os.path.join(run, "records.csv")))["lambda_max"], settings


#: the references of each task beside its edge run: runs at lower rates whose first K records stay
#: below the edge
MORE = {"lora": [("reference-lora", "runs", "lora-default-lr0.01-seed0")]}


@pytest.mark.parametrize("task", TASKS)
def test_default_rate_is_the_rule_s_choice_from_the_edge_run(task):
    lam, settings = _reference("edge-seed0", "runs", f"{task}-default-seed0")
    edge, default = preset_settings(task, "edge"), preset_settings(task, "default")
    assert settings["lr"] == edge["lr"] and settings["iters"] == edge["iters"] == default["iters"]
    more = []
    for parts in MORE.get(task, []):
        lam_m, s_m = _reference(*parts)
        more.append((lam_m, s_m["lr"]))
    lr, preds = regime_learning_rate(lam, settings["lr"], default["iters"], more=more)
    assert lr == default["lr"], preds
    # the edge rate itself is not inside the margin, or not covered below the edge
    assert preds.get(edge["lr"], float("inf")) > MARGIN * EDGE


def test_the_rule_on_a_known_sharpening_curve():
    # lambda_max(t) = 10 t at eta_ref = 0.1 (k = 1..100, t = 0.1 k): a run at lr, K = 50 reaches t =
    # 50 lr, so its prediction is lr * 10 * 50 lr = 500 lr^2; <= 1 for lr <= 0.0447
    lam = [10 * 0.1 * k for k in range(1, 101)]
    lr, preds = regime_learning_rate(lam, 0.1, 50, grid=(0.1, 0.05, 0.03, 0.02))
    assert lr == 0.03
    assert preds[0.03] == pytest.approx(500 * 0.03 ** 2, rel=1e-12)
    # beyond the reference's time below the edge (next lines)
    assert 0.1 not in preds and 0.05 not in preds
    assert regime_learning_rate(lam, 0.1, 50, grid=(0.1, 0.05))[0] is None
    # the reference reaches 0.1 * lambda = 2 at k = 20: it covers t <= 1.9 only, K = 50 at lr <=
    # 0.038
    lr, preds = regime_learning_rate(lam, 0.1, 50, grid=(0.05, 0.04, 0.03))
    assert set(preds) == {0.03} and lr == 0.03
    # a second reference at a lower rate covers what the first does not
    lr, preds = regime_learning_rate(lam[:5], 0.1, 50, grid=(0.05, 0.03, 0.02), more=[([1.0] * 100,
                                                                                       0.02)])
    assert lr == 0.03 and preds[0.03] == pytest.approx(0.03)


# ARPACK on the full models, one product per backward pass through the graph retained at theta^0; fl
# and lora take 10-25 s on a 2-core machine
@pytest.mark.parametrize("task", ["mlp", pytest.param("fl", marks=pytest.mark.slow),
                                  pytest.param("lora", marks=pytest.mark.slow)])
def test_default_preset_is_below_the_edge_with_margin_at_theta0(task):
    """eta * lambda_max(H(theta^0)) of the default preset, by ARPACK on HVPs, is at most MARGIN *
    EDGE.
    """
    torch.set_num_threads(1)
    t, settings = build_task(task, "default")
    params = {k: v.detach() for k, v in t.params.items()}
    # the graph engine's products: one backward through a retained graph
    point = PointCurvature(t.loss, params)
    ext = hessian_extremes(point.hvp, params)
    assert ext.lam_max > 0
    assert settings["lr"] * ext.lam_max <= MARGIN * EDGE, (settings["lr"], ext.lam_max)


def test_make_report_does_not_reuse_a_run_at_another_rate_than_the_preset_s():
    from crosscurv.experiments.reports.build import _reusable

    # preset default at the edge rate
    lam, settings = _reference("edge-seed0", "runs", "mlp-default-seed0")
    summary = {"status": "complete", "settings": settings}
    assert "lr 0.01, the study needs 0.007" in _reusable(summary, "mlp", "default")
    settings = dict(settings, lr=preset_settings("mlp", "default")["lr"])
    assert _reusable({"status": "complete", "settings": settings}, "mlp", "default") is None
