"""``crosscurv run --resume``: extending a finished or killed run, and unreadable run folders.

Everything through the command in a subprocess, as a user types it: an extended run's
``records.csv`` is byte for byte that of an uninterrupted run to the new ``K``; a shorter ``K`` or
another changed setting is refused with one line and exit code 2; so is an undecodable, truncated or
foreign ``checkpoint.pt``, ``summary.json`` or ``records.csv``.
"""

from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from crosscurv.numeric.records import read_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TIMEOUT = 240

FACTORY = """
import os, time
import torch
from crosscurv.numeric import Task

def make(seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    dt = dtype or torch.float32
    A = torch.randn(6, 6, generator=g, dtype=dt)
    A = A @ A.T / 6 + torch.eye(6, dtype=dt)
    p = {"x": torch.randn(2, generator=g, dtype=dt), "y": torch.randn(2, generator=g, dtype=dt),
         "z": torch.randn(2, generator=g, dtype=dt)}
    slow = float(os.environ.get("SLOW_LOSS", "0"))

    def loss(q):
        if slow:
            time.sleep(slow)
        t = torch.cat([q["x"], q["y"], q["z"]])
        return 0.5 * t @ A @ t + (t ** 4).sum() / 10 + torch.tanh(t).prod()

    return Task(p, loss, {"bx": ["x"], "by": ["y"], "bz": ["z"]}, name="quad"), {"lr": 0.2, \
"iters": 4}
"""


@pytest.fixture()
def fac(tmp_path):
    path = tmp_path / "ext_tasks.py"
    path.write_text(textwrap.dedent(FACTORY))
    return f"{path}:make"


def _crosscurv(*argv, env=None, check_rc=None):
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr[-3000:]
    return proc


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error: "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


def _bytes(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def test_extending_a_finished_builtin_run_equals_an_uninterrupted_one(tmp_path):
    ref, run = str(tmp_path / "ref"), str(tmp_path / "run")
    _crosscurv("mlp", "--preset", "smoke", "--iters", "5", "--out", ref, check_rc=0)
    _crosscurv("mlp", "--preset", "smoke", "--iters", "3", "--out", run, check_rc=0)
    proc = _crosscurv("mlp", "--preset", "smoke", "--iters", "5", "--out", run, "--resume",
                      "--json", check_rc=0)
    summary = json.loads(proc.stdout)
    assert summary["records"] == 5 and summary["settings"]["iters"] == 5
    # the last iteration of the short run is recomputed
    assert summary["timing"]["resumed_from"] == 2
    assert _bytes(os.path.join(run, "records.csv")) == _bytes(os.path.join(ref, "records.csv"))
    with open(os.path.join(ref, "summary.json"), encoding="utf-8") as fh:
        reference = json.load(fh)
    assert summary["metrics"] == reference["metrics"]  # recomputed over all 5 records
    assert summary["constants"]["G"] == reference["constants"]["G"]
    # extended once more, from its own end: still the uninterrupted run's records
    _crosscurv("mlp", "--preset", "smoke", "--iters", "6", "--out", ref, "--resume", check_rc=0)
    _crosscurv("mlp", "--preset", "smoke", "--iters", "6", "--out", run, "--resume", check_rc=0)
    assert _bytes(os.path.join(run, "records.csv")) == _bytes(os.path.join(ref, "records.csv"))
    assert len(read_records(os.path.join(run, "records.csv"))) == 6


def test_a_killed_run_extended_equals_an_uninterrupted_one(tmp_path, fac):
    ref, run = str(tmp_path / "ref"), str(tmp_path / "run")
    _crosscurv(fac, "--iters", "12", "--out", ref, check_rc=0)
    env = dict(os.environ, SLOW_LOSS="0.05")
    proc = subprocess.Popen([sys.executable, "-m", "crosscurv", "run", fac, "--iters", "9", "--out",
                             run, "--checkpoint-every", "2"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = os.path.join(run, "records.csv")
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            if os.path.exists(records) and len(read_records(records)) >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -9
    assert 3 <= len(read_records(records)) < 9
    _crosscurv(fac, "--iters", "12", "--out", run, "--resume", check_rc=0)
    assert _bytes(records) == _bytes(os.path.join(ref, "records.csv"))


def test_a_shorter_run_or_another_changed_setting_is_refused(tmp_path, fac):
    run = str(tmp_path / "run")
    _crosscurv(fac, "--iters", "5", "--out", run, check_rc=0)
    before = _bytes(os.path.join(run, "records.csv"))
    line = _one_error_line(_crosscurv(fac, "--iters", "3", "--out", run, "--resume"))
    assert "5" in line and "extended, not shortened" in line
    line = _one_error_line(_crosscurv(fac, "--iters", "8", "--lr", "0.1", "--out", run, "--resume"))
    assert "setting lr " in line
    line = _one_error_line(_crosscurv(fac, "--iters", "8", "--pattern", "jc", "--out", run,
                                      "--resume"))
    assert "setting pattern" in line
    assert _bytes(os.path.join(run, "records.csv")) == before


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``(factory, folder)``: one finished 3-iteration run, copied by each test that damages it."""
    where = tmp_path_factory.mktemp("finished")
    path = where / "ext_tasks.py"
    path.write_text(textwrap.dedent(FACTORY))
    run = str(where / "run")
    _crosscurv(f"{path}:make", "--iters", "3", "--out", run, check_rc=0)
    return f"{path}:make", run


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "summary", "records"])
def test_an_unreadable_run_folder_answers_one_line(tmp_path, finished, damage):
    fac, run = finished[0], str(tmp_path / "run")
    shutil.copytree(finished[1], run)
    ck = os.path.join(run, "checkpoint.pt")
    if damage == "garbage":
        with open(ck, "wb") as fh:
            fh.write(os.urandom(4096))
    elif damage == "truncated":
        data = _bytes(ck)
        with open(ck, "wb") as fh:
            fh.write(data[: len(data) // 2])
    elif damage == "foreign":
        import torch

        torch.save({"format": 2, "weights": torch.ones(3)}, ck)
    elif damage == "summary":
        with open(os.path.join(run, "summary.json"), "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n" + os.urandom(300))
    else:
        with open(os.path.join(run, "records.csv"), "wb") as fh:
            fh.write(b"\xff\xfe\x00" + os.urandom(300))
    line = _one_error_line(_crosscurv(fac, "--iters", "5", "--out", run, "--resume"))
    assert run in line
