"""`crosscurv derive`: JSON keys, exit codes, one-line errors, the report it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crosscurv.experiments.cli import main

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"lemma1", "theorem1", "corollary1", "order_invariance", "lemma3", "theorem2",
        "theorem3_quadratic"}


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "crosscurv", "derive", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)


def test_json_output_and_report(tmp_path):
    proc = _cli("--blocks", "2", "--pattern", "gs", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert {"pattern", "n_blocks", "dims", "identities", "eta3_coefficient"} <= set(obj)
    assert set(obj["identities"]) == KEYS and all(v is True for v in obj["identities"].values())
    assert obj["n_blocks"] == 2 and obj["dims"] == 1
    assert obj["pattern"]["pairs"] == [[2, 1]]
    assert obj["eta3_coefficient"] == "-H12**2*g1**2 - H12*H22*g1*g2 - T112*g1**2*g2/2"
    assert (tmp_path / "theory.md").is_file() and obj["report"] == str(tmp_path / "theory.md")
    assert "wrote" in proc.stderr
    found = (tmp_path / "theory.md").read_text().splitlines()[2]  # what was found comes first
    n = len(KEYS)
    assert found.startswith(f"- {n} of the paper's {n} identities hold exactly (SymPy)")


@pytest.mark.parametrize("args, needle", [
    (["--pattern", "1<-1"], "self pairs are not allowed: 1<-1"),
    (["--pattern", "2<-3,3<-2"], "cycle through pairs: 2<-3, 3<-2"),
    (["--pattern", "bogus"], "unknown pattern"),
    (["--pattern", "gs:1,2"], "names 2 blocks"),
    (["--blocks", "1"], ">= 2"),
    (["--dims", "3"], "1 or 2"),
    (["--blocks", "x"], "invalid int value"),
])
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path, capsys):
    rc = main(["derive", *args, "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("crosscurv: error:") and needle in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "theory.md").exists()


def test_bad_pattern_subprocess_exit_code():
    env = {k: v for k, v in os.environ.items() if k != "CROSSCURV_DEBUG"}
    proc = _cli("--pattern", "1<-1", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "crosscurv: error: self pairs are not allowed: 1<-1"
    assert proc.stdout == ""


def test_summary_and_default_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["derive", "--blocks", "2", "--pattern", "chain"])
    out, _ = capsys.readouterr()
    assert rc == 0
    assert "[ok] theorem3_quadratic" in out and "eta^3 coefficient" in out
    assert f"wrote {Path('reports') / 'theory.md'}" in out
    assert (tmp_path / "reports" / "theory.md").is_file()


def test_failing_identity_exits_1(tmp_path, monkeypatch, capsys):
    import crosscurv.theory.derivation as derive_mod

    real = derive_mod.eta3_gap_closed_form
    monkeypatch.setattr(derive_mod, "eta3_gap_closed_form", lambda m, p: real(m, p) + m.g[0])
    rc = main(["derive", "--blocks", "2", "--json", "--out", str(tmp_path)])
    obj = json.loads(capsys.readouterr().out)
    assert rc == 1 and obj["ok"] is False
    assert obj["extensions"]["eta3_closed_form"] is False


@pytest.mark.parametrize("args, size", [
    (["--blocks", "40"], "40 x --dims 1 = 40"),
    (["--blocks", "5", "--dims", "2"], "5 x --dims 2 = 10"),
    (["--blocks", "9"], "9 x --dims 1 = 9"),
    (["--blocks", "1000000000", "--pattern", "chain"], "= 1000000000"),
])
def test_sizes_beyond_the_symbolic_limit_answer_at_once(args, size, tmp_path):
    """Sizes SymPy cannot finish in reasonable time are refused within seconds, naming the limit."""
    env = {k: v for k, v in os.environ.items() if k != "CROSSCURV_DEBUG"}
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "derive", *args, "--out", str(
        tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error: --blocks ") and size in lines[
        0], lines
    assert "limit of 8" in lines[0] and proc.stdout == ""
    assert not (tmp_path / "theory.md").exists()


def test_limit_is_the_library_default_and_can_be_lifted():
    from crosscurv.theory.block_model import ModelError
    from crosscurv.theory.derivation import MAX_TOTAL_DIM, derive

    assert MAX_TOTAL_DIM == 8
    with pytest.raises(ModelError, match="above the symbolic limit of 3"):
        derive(2, 2, "gs", max_dim=3)
    stages = []
    r = derive(2, 1, "gs", max_dim=None, progress=lambda stage, s: stages.append(stage))
    assert r.ok and stages == ["one_step", "corollary1_orders", "lemma3_theorem2", "theorem3"]
