"""The committed runs (``reports/runs/*``) still come out of ``crosscurv run``: a short prefix of each,
rerun through the command with the settings in its ``summary.json``, agrees with the committed records up
to float32 round-off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from numeric.records import read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = os.path.join(REPO, "reports", "runs")
PREFIX = 1
#: float32 round-off of the estimates, over the first iteration (measured: <= 2e-7 relative).
REL = 1e-5


def _committed():
    return sorted(d for d in os.listdir(RUNS) if os.path.isfile(os.path.join(RUNS, d, "summary.json")))


@pytest.mark.parametrize("name", _committed())
def test_a_prefix_of_each_committed_run_is_reproduced(tmp_path, name):
    with open(os.path.join(RUNS, name, "summary.json"), encoding="utf-8") as fh:
        s = json.load(fh)["settings"]
    out = str(tmp_path / name)
    argv = [sys.executable, "-m", "experiments", "run", s["task"], "--preset", s["preset"], "--lr", repr(s["lr"]),
            "--pattern", s["pattern_spec"], "--seed", str(s["seed"]), "--dtype", s["dtype"], "--device", "cpu",
            "--iters", str(PREFIX), "--out", out]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    new = read_records(os.path.join(out, "records.csv"))
    old = read_records(os.path.join(RUNS, name, "records.csv"))[:PREFIX]
    assert [r["k"] for r in new] == [r["k"] for r in old]
    for field in ("loss_jc", "loss_s", "recursive", "cumulative", "jc_only", "bound_bk"):
        a, b = np.array([r[field] for r in new]), np.array([r[field] for r in old])
        assert np.all(np.abs(a - b) <= REL * np.abs(b) + 1e-12), (field, a, b)
    for rn, ro in zip(new, old):
        # committed gaps were loss_s - loss_jc of float32 losses (off by up to an ulp of the loss each);
        # records with gap_err hold the segment integral, within gap_err of the truth
        spacing = float(np.spacing(np.float32(max(abs(ro["loss_jc"]), abs(ro["loss_s"])))))
        slack = 2 * spacing + (0.0 if np.isnan(ro["gap_err"]) else ro["gap_err"]) + rn["gap_err"]
        assert abs(rn["gap"] - ro["gap"]) <= slack + REL * abs(ro["gap"]), (rn, ro)
