"""Table 1's baseline rows: the majority winner and the one-step sign of eta^2 C_S along JC."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from crosscurv.experiments.reports.one_step_along_jc import SIDECAR, read_one_step, replay_drift
from crosscurv.experiments.reports.table import TABLE_ROWS, load_run, render_table, table_rows

from .test_table_report import _write_run

GAPS = [0.5, -0.1, -0.2, -0.3]


def test_majority_row_is_the_best_constant_predictor(tmp_path):
    run = load_run(_write_run(tmp_path / "r", "mlp", GAPS, [0.1] * 4))
    rows = {r["estimate"]: r for r in table_rows(run, TABLE_ROWS)}
    maj = rows["majority"]  # GS wins 3 of 4: always GS
    assert maj["correct"] == pytest.approx(75.0)
    assert tuple(maj["jc_hits"]) == (0, 1) and tuple(maj["s_hits"]) == (3, 3)
    assert np.isnan(maj["mae"]) and np.isnan(maj["max_ae"])
    assert "one_step" not in rows  # no one_step.csv beside the records: no row
    line = [ln for ln in render_table([run]).splitlines() if "majority" in ln][0]
    assert "75.0%" in line and line.count("n/a") >= 2 and "nan" not in line


def test_one_step_row_reads_the_file_beside_the_records(tmp_path):
    d = _write_run(tmp_path / "r", "fl", GAPS, [0.1] * 4)
    (d / SIDECAR).write_text(
        "k,one_step,loss_jc\n1,0.4,1.0\n2,-0.1,1.0\n3,0.2,1.0\n"
    )  # k = 4 missing
    before = (d / "records.csv").read_bytes()
    run = load_run(d)
    assert (d / "records.csv").read_bytes() == before
    one = {r["estimate"]: r for r in table_rows(run, TABLE_ROWS)}["one_step"]
    # winners JC, GS, JC, undefined against JC, GS, GS, GS: 2 of 4
    assert one["correct"] == pytest.approx(50.0)
    assert tuple(one["jc_hits"]) == (1, 1) and tuple(one["s_hits"]) == (1, 3)
    assert np.isnan(read_one_step(d, [1, 2, 3, 4])[3])
    assert read_one_step(tmp_path, [1]) is None


@pytest.mark.slow
def test_replay_gives_theorem_1_at_the_start_and_the_run_losses(tmp_path):
    """A smoke run, then `crosscurv table --one-step`: the file's first value is eta^2 C_S at
    theta^0 computed independently, and the replayed JC losses are the run's, bit for bit."""
    from crosscurv.experiments.tasks import build_task
    from crosscurv.numeric.one_step import one_step_coefficients

    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "crosscurv",
        "run",
        "mlp",
        "--preset",
        "smoke",
        "--iters",
        "3",
        "--out",
        str(out),
    ]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-m", "crosscurv", "table", str(out), "--one-step"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "Baseline: one-step eta^2 C_S" in proc.stdout and "Baseline: majority winner" in proc.stdout
    )
    rows = np.genfromtxt(out / SIDECAR, delimiter=",", names=True)
    run = load_run(out)
    assert list(rows["loss_jc"]) == list(run.columns["loss_jc"]) and replay_drift(out) == 0.0
    task, settings = build_task("mlp", "smoke", seed=0, dtype=torch.float32)
    lr = run.summary["settings"]["lr"]
    c_s = one_step_coefficients(task, task.params, "gs")[2]
    assert rows["one_step"][0] == pytest.approx(lr * lr * c_s, rel=1e-4)


def test_replay_command_refuses_a_folder_without_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "crosscurv.experiments.reports.one_step_along_jc", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
