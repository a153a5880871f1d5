"""``crosscurv run --optimizer ... --block-lr ...`` and ``validate-records`` with an optimizer, as
users run them.

The command in a subprocess (default dtype and threads, bounded by a timeout) for the run, its
resume and its bad input (one stderr line, exit 2); ``validate-records`` in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crosscurv.experiments.cli import main
from crosscurv.numeric.records import read_records, read_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _cli(*argv, timeout=600):
    return subprocess.run([sys.executable, "-m", "crosscurv", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def _one_line_error(err: str, *words):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_run_with_momentum_and_block_factors_records_them_and_resumes(tmp_path):
    out = str(tmp_path / "run")
    args = ["run", "mlp", "--preset", "smoke", "--optimizer", "momentum:0.9", "--block-lr",
            "layer1=2,8=0.5", "--out", out]
    proc = _cli(*args, "--iters", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "optimizer momentum:0.9, block-lr layer1=2.0,layer8=0.5" in proc.stdout
    s = read_summary(os.path.join(out, "summary.json"))["settings"]
    assert s["optimizer"] == {"name": "momentum", "spec": "momentum:0.9", "beta": 0.9}
    assert s["block_lr"] == {"layer1": 2.0, "layer8": 0.5}
    # extend to 3 iterations: the momentum buffers come back from the checkpoint
    proc = _cli(*args, "--iters", "3", "--resume", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["records"] == 3
    rows = read_records(os.path.join(out, "records.csv"))
    assert [r["k"] for r in rows] == [1, 2, 3]
    assert all(r["cumulative"] != 0.0 and r["bound_bk"] > 0 for r in rows)
    # resuming with another optimizer is refused in one line
    proc = _cli(*args[:5], "adam", *args[6:], "--iters", "3", "--resume")
    assert proc.returncode == 2
    _one_line_error(proc.stderr, "optimizer")


def test_a_bad_optimizer_spec_fails_before_the_task_is_built(tmp_path):
    out = tmp_path / "run"
    proc = _cli("run", "lora", "--iters", "1", "--out", str(out), "--optimizer", "momentum",
                timeout=300)
    assert proc.returncode == 2, proc.stderr
    _one_line_error(proc.stderr, "momentum:BETA")
    assert not out.exists()


@pytest.mark.parametrize("flags,words", [
    (["--optimizer", "adam:0.9,0.999"], ["adam:B1,B2,EPS"]),
    (["--optimizer", "lion"], ["unknown optimizer"]),
    (["--optimizer", "momentum:1"], ["0 <= BETA < 1"]),
    (["--block-lr", "layer9=2"], ["unknown block", "layer1"]),
    (["--block-lr", "layer1"], ["NAME=FACTOR"]),
    (["--block-lr", "layer1=nan"], ["finite"]),
])
def test_bad_optimizer_flags_are_one_line_and_write_nothing(tmp_path, capsys, flags, words):
    out = tmp_path / "run"
    code = main(["run", "mlp", "--preset", "smoke", "--iters", "1", "--out", str(out), *flags])
    assert code == 2
    _one_line_error(capsys.readouterr().err, *words)
    assert not out.exists()


def test_validate_records_with_an_optimizer_reference(tmp_path, capsys):
    ref = str(tmp_path / "ref")
    common = ["--task", "mlp", "--preset", "smoke", "--lr", "0.05", "--iters", "2"]
    code = main(["run", "mlp", "--preset", "smoke", "--iters", "2", "--optimizer", "adam",
                 "--block-lr", "layer2=3", "--out", ref])
    assert code == 0
    theirs = os.path.join(ref, "records.csv")
    capsys.readouterr()
    assert main(["validate-records", theirs, "--reference", ref]) == 0
    assert main(["validate-records", theirs, *common, "--optimizer", "adam", "--block-lr",
                 "layer2=3"]) == 0
    out = capsys.readouterr().out
    assert "optimizer adam:0.9,0.999,1e-08 block-lr layer2=3.0" in out
    # the plain reference disagrees with records of another optimizer
    assert main(["validate-records", theirs, *common]) == 1
    capsys.readouterr()
    # --optimizer belongs to an on-the-fly reference only
    assert main(["validate-records", theirs, "--reference", ref, "--optimizer", "adam"]) == 2
    _one_line_error(capsys.readouterr().err, "--optimizer")
