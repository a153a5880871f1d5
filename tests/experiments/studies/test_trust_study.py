"""The trust study's rows and bins (crosscurv.experiments.studies.trust) on hand-made columns."""

from __future__ import annotations

import math

import pytest

from crosscurv.experiments.studies.trust import binned, render, run_rows


def _columns():
    # eta = 0.1: eta * sharpness 0.05, 0.05, 3.0, 3.0 -> the edge is first crossed at k = 3
    return {
        "k": [1, 2, 3, 4],
        "gap": [0.5, -0.5, 0.5, -0.5],
        "gap_err": [1e-9] * 4,
        "sharpness": [0.5, 0.5, 30.0, 30.0],
        # stale converged value: the power iteration's larger one counts
        "lambda_max": [0.4, 0.4, 0.4, 0.4],
        "sharpness_hvps": [20.0, 0.0, 0.0, 0.0],
        **{e: [0.4, -0.4, -0.4, -0.4] for e in ("recursive", "cumulative", "jc_only")},
        **{f"{e}_err": [0.15, 0.15, 2.0, 0.05] for e in ("recursive", "cumulative", "jc_only")},
        **{f"{e}_cert": [1.0, -1.0, 0.0, 0.0] for e in ("recursive", "cumulative", "jc_only")},
    }


def test_rows_split_at_the_first_crossing_of_the_edge():
    rows = {r["estimate"]: r for r in run_rows(_columns(), 0.1)}
    r = rows["recursive"]
    assert r["cross"] == 3 and r["hvps"] == pytest.approx(5.0)
    # |estimate - gap| = 0.1, 0.1, 0.9, 0.1: k = 4 not covered
    assert r["calibrated"] == pytest.approx(75.0)
    assert r["before"]["coverage"] == 100.0 and r["before"]["precision"] == 100.0
    assert r["after"]["coverage"] == 0.0 and math.isnan(r["after"]["precision"])
    assert "| recursive |" in render([("fl", 0.1, list(rows.values()))])


def test_bins_of_eta_sharpness():
    bins = binned(_columns(), 0.1, "recursive", [0.01, 1.0, 10.0])
    assert bins[0]["metrics"]["decided"] == 2 and bins[0]["metrics"]["precision"] == 100.0
    assert bins[1]["metrics"]["decided"] == 2 and bins[1]["metrics"]["coverage"] == 0.0
