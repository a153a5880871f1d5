"""Every built-in task's ``smoke`` preset, run exactly as a user types it.

``crosscurv run TASK --preset smoke --out DIR`` in a subprocess, with the task's default dtype
(float32) and the machine's default thread count (and the MLP again with ``OMP_NUM_THREADS=1``).
Each run is bounded by a timeout, so a hang in a compute kernel fails the test instead of stalling
CI; a crash of the interpreter (a segmentation fault, glibc's "double free or corruption") shows up
as a negative return code or SIGABRT's 134 and fails it too.

The float32 ``fl`` smoke task once crashed or spun in a oneDNN convolution kernel (its bundled
CIFAR-10 batch was channels-last; README, Performance); only these user-level runs saw it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crosscurv.experiments.tasks import TASKS, preset_settings
from crosscurv.numeric.records import read_records, read_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: a smoke run takes seconds; the bound only has to tell a hang from a busy machine
TIMEOUT_S = 240


def _env(threads: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CROSSCURV_DEBUG")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    return env


#: every task with the machine's default thread count; ``OMP_NUM_THREADS=1`` once (the command's
#: default is
#: one intra-op thread too, so the other tasks would repeat the same computation)
CASES = [pytest.param(t, None, id=f"{t}-default-threads") for t in sorted(TASKS)] + [
    pytest.param("mlp", "1", id="mlp-omp1")]


@pytest.mark.parametrize("task, threads", CASES)
def test_smoke_preset_runs_as_a_user_types_it(task, threads, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "crosscurv", "run", task, "--preset", "smoke", "--out", str(out)]
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=_env(threads), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`crosscurv run {task} --preset smoke` (OMP_NUM_THREADS={threads}) "
                    f"did not finish in {TIMEOUT_S} s: a hang")
    assert proc.returncode == 0, (
        f"`crosscurv run {task} --preset smoke` (OMP_NUM_THREADS={threads}) exited "
        f"{proc.returncode}: {proc.stderr[-2000:]}")
    summary = read_summary(out / "summary.json")
    assert summary["status"] == "complete"
    assert summary["settings"]["dtype"] == "float32"  # the user's default, not a test override
    records = read_records(out / "records.csv")
    iters = preset_settings(task, "smoke")["iters"]
    assert [r["k"] for r in records] == list(range(1, iters + 1))
    for r in records:
        for column in ("loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only"):
            assert r[column] == r[column], f"{column} is NaN at k={r['k']}"
