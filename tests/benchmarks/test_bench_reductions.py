"""benchmarks/bench_reductions.py runs as a user types it and prints every kernel's row."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_kernel_is_timed_and_its_error_measured():
    proc = subprocess.run([sys.executable, "benchmarks/bench_reductions.py", "--preset", "smoke",
                           "--repeats", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith(
        "| a . b") or
            line.startswith("| norm of a")]
    assert [r[1].strip().split(" (")[0] for r in rows] == [
        "Tensor.sum of the products", "torch.dot per entry", "Tensor.sum of the squares",
        "torch.linalg.vector_norm per entry", "torch._foreach_norm"]
    for quantity, kernel, ms, ratio, err in rows:
        assert float(ms) > 0 and float(ratio) > 0
        assert 0 <= float(err) < 1e-3  # float32 rounding, not a wrong value
    # each quantity against the body's kernel
    assert rows[0][3].strip() == rows[2][3].strip() == "1.00"
