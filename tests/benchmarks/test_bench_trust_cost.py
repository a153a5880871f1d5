"""bench_trust_cost.py: its ``without`` run really leaves out the extremes and error columns, and
nothing else."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_trust_cost  # noqa: E402


def test_the_run_without_differs_only_in_the_columns_it_leaves_out():
    from crosscurv.numeric.protocol import run_protocol
    from tests.numeric.cases import tanh_mlp

    with_ = run_protocol(tanh_mlp(), "gs", 0.1, 3, seed=0).records
    with bench_trust_cost.without_trust_columns():
        without = run_protocol(tanh_mlp(), "gs", 0.1, 3, seed=0).records
    again = run_protocol(tanh_mlp(), "gs", 0.1, 3, seed=0).records  # the switch is undone
    assert again == with_
    left_out = {"lambda_max", "lambda_min", "recursive_err", "cumulative_err", "jc_only_err"}
    for a, b in zip(with_, without, strict=True):
        assert all(math.isfinite(a[c]) for c in left_out) and all(math.isnan(b[c])
                                                                  for c in left_out)
        assert b["sharpness_hvps"] == 0
        for c in ("loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "sharpness"):
            assert a[c] == b[c], c


def test_the_benchmark_prints_its_ratios():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_trust_cost.py"),
                          "--tasks", "mlp", "--preset", "smoke", "--iters", "3", "--rounds", "1"],
                         capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "median: steady" in out.stdout and "(target <= 1.3)" in out.stdout
