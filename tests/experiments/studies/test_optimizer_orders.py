"""`python -m crosscurv.experiments.studies.optimizers.orders`: the README's optimizer table, run as
users run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_quick_sgd_row_has_the_expected_orders():
    proc = subprocess.run([sys.executable, "-m", "crosscurv.experiments.studies.optimizers.orders",
                           "--quick", "--only", "sgd"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `sgd`")]
    assert len(rows) == 1, proc.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    one_step, rec_T, rec_K, cum, jc_only = (float(c) for c in cells[3:8])
    assert abs(one_step - 3) < 0.15 and abs(rec_T - 3) < 0.15 and abs(rec_K - 3) < 0.15
    assert abs(cum - 2) < 0.15 and abs(jc_only - 2) < 0.15
    assert "Adam's first step from zero moments" in proc.stdout
    assert "Adam one step on bilinear" in proc.stdout
