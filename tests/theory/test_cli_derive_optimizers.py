"""`crosscurv derive` reports the block-separable optimizer results next to the paper's identities.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPT_KEYS = {
    "one_step_generic", "one_step_sgd", "one_step_preconditioner", "one_step_momentum",
    "one_step_adam",
    "recursion_sgd", "recursion_preconditioner", "recursion_momentum",
    "cumulative_sgd", "cumulative_preconditioner", "cumulative_momentum",
}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "crosscurv", "derive", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)


def test_json_has_every_optimizer_check_and_the_report_its_section(tmp_path):
    proc = _cli("--blocks", "2", "--pattern", "gs", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    opt = obj["optimizers"]
    assert set(opt["checks"]) == OPT_KEYS and all(opt["checks"].values()) and opt["ok"]
    # per-block step sizes, S = {(2,1)}: f1 f2 g2 H12 g1
    assert opt["expressions"]["C_S_sgd"] == "H12*f1*f2*g1*g2"
    text = (tmp_path / "theory.md").read_text(encoding="utf-8")
    assert "## Beyond the paper: block-separable optimizers" in text
    assert text.count("| `one_step_") == 5 and "**FAILS**" not in text


def test_plain_summary_and_opt_out(tmp_path):
    proc = _cli("--blocks", "3", "--pattern", "3<-1", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "block-separable optimizers" in proc.stdout and "[ok] cumulative_momentum" in proc.stdout
    proc = _cli("--blocks", "2", "--no-optimizers", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "block-separable optimizers" not in proc.stdout
    assert "block-separable optimizers" not in (tmp_path / "theory.md").read_text(encoding="utf-8")
