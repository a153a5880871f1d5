"""The contested-settings report: shares, switches, the regime, and the bounds at K = 500."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crosscurv.experiments.studies.collect import read_sweep
from crosscurv.experiments.studies.contest import contest_rows

from .test_studies import write_run


def _sweep(tmp_path):
    sw = tmp_path / "explore"
    # 10 iterations: JC 4, GS 5, one undecided (left out), switches at k = 4 and 9; inside the
    # regime
    write_run(
        sw,
        "mlp-a",
        lr=0.01,
        seed=0,
        gaps=[1, 1, 1, -1, -1, -1, -1, -1, 1, 1e-9],
        est=[1] * 10,
        errs=[0.0] * 9 + [1e-6],
        sharp=[10.0] * 10,
    )
    # JC only 1 of 11 (under 10%) and one switch: not contested
    write_run(sw, "mlp-b", lr=0.01, seed=1, gaps=[1] + [-1] * 10, est=[1] * 11)
    # balanced but crossing eta * sharpness = 2 at k = 3: not inside the regime
    write_run(
        sw, "mlp-c", lr=0.1, seed=0, gaps=[1, -1] * 5, est=[1] * 10, sharp=[1, 1, 30] + [1] * 7
    )
    return sw


def test_contest_rows_count_shares_switches_and_the_regime(tmp_path):
    rows = {(r["lr"], r["seed"]): r for r in contest_rows([read_sweep(_sweep(tmp_path))])}
    a = rows[(0.01, 0)]
    assert a["jc"] == pytest.approx(4 / 9) and a["gs"] == pytest.approx(5 / 9)
    assert a["switches"] == [4, 9] and a["cross"] is None and a["top"] == pytest.approx(0.1)
    assert a["jc_lo"] == pytest.approx(4 / 500) and a["contested"] == "so far"
    assert rows[(0.01, 1)]["contested"] == "no"
    c = rows[(0.1, 0)]
    assert c["cross"] == 3 and c["contested"] == "no" and len(c["switches"]) == 9


def test_contest_command_writes_findings_first(tmp_path):
    out = tmp_path / "contest.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosscurv.experiments.studies.contest",
            str(_sweep(tmp_path)),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith(
        "- mlp: no learning rate contested in every seed"
    )
    assert (
        "Most balanced of the longest: eta = 0.01, seed 0, K = 10: JC 44%, GS 56%, 2 switches"
        in lines[2]
    )
    assert lines[3] == "- Contested at K = 500 by the records alone: none."
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosscurv.experiments.studies.contest",
            str(tmp_path / "none"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
