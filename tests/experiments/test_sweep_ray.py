"""``crosscurv sweep`` on a local Ray instance with 2 workers.

* the sweep's records equal the same runs made one by one with ``crosscurv
  run`` (same thread count: float32 reductions depend on it), and its
  ``sweep.csv`` holds their summaries' metrics;
* a rerun needs ``--resume``, reuses complete runs without starting Ray, and
  resumes a run that was killed mid-way;
* runs that diverge or crash their Ray worker are reported while the others
  finish, and the sweep's exit code says so.

The first test runs the command as users do (a subprocess that starts and stops its own Ray); the
others share one in-process Ray start (module fixture).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from crosscurv.experiments.sweep import (SWEEP_FAILED_EXIT_CODE, SweepError, expand, run_sweep,
                                         spec_from_mapping)
from crosscurv.numeric.records import count_rows, read_records, read_summary

pytestmark = pytest.mark.slow  # Ray start-ups: tens of seconds on the shared 2-core machine

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _cli(*argv, timeout=300, **env):
    return subprocess.run([sys.executable, "-m", "crosscurv", *argv], capture_output=True,
                          text=True, timeout=timeout, env=dict(ENV, **env))


def _run_one_thread(*argv) -> int:
    """``crosscurv run`` in this process with 1 intra-op thread, as each sweep worker here runs it.
    """
    import torch

    from crosscurv.experiments.cli import main

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return main(list(argv))
    finally:
        torch.set_num_threads(before)


def _read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_cli_sweep_equals_runs_one_by_one_and_resume_reuses(tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["sweep", "--task", "mlp", "--preset", "smoke", "--lr", "0.05", "--seed", "0", "1",
            "--workers", "2", "--threads", "1", "--out", str(out)]
    proc = _cli(*argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2/2 runs complete (2 run now, 0 reused)" in proc.stdout
    assert proc.stderr.count("crosscurv: sweep [") == 2  # one line per finished run
    rows = _read_csv(out / "sweep.csv")
    assert [r["name"] for r in rows] == ["mlp-smoke-lr0.05-seed0", "mlp-smoke-lr0.05-seed1"]
    info = read_summary(str(out / "sweep.json"))  # plain JSON
    assert info["workers"] == 2 and info["threads"] == 1 and info["cluster"]["CPU"] == 2.0
    for r in rows:
        run_dir = out / r["run_dir"]
        ref = tmp_path / "ref" / r["name"]
        assert _run_one_thread("run", "mlp", "--preset", "smoke", "--lr", r["lr"], "--seed", r[
            "seed"],
                               "--out", str(ref)) == 0
        assert read_records(str(run_dir / "records.csv")) == read_records(str(ref / "records.csv"))
        s = read_summary(str(run_dir / "summary.json"))
        assert r["status"] == "complete" and r["exit_code"] == "0" and r["action"] == "new"
        assert float(r["cumulative_correct"]) == s["metrics"]["cumulative"]["correct"]
        assert float(r["recursive_mae"]) == s["metrics"]["recursive"]["mae"]
        assert float(r["eta_L"]) == float(r["lr"]) * s["constants"]["L"]
    assert (out / "sweep.md").read_text().count("| mlp-smoke-") == 2
    assert (out / "sweep_agreement.png").stat().st_size > 1000

    again = _cli(*argv)
    assert again.returncode == 2 and "already holds a sweep; use --resume" in again.stderr
    stamps = {p: os.stat(out / "runs" / p / "records.csv").st_mtime_ns for p in os.listdir(out
        / "runs")}
    resumed = _cli(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "2/2 runs complete (0 run now, 2 reused)" in resumed.stdout
    assert "Ray start-up" not in resumed.stdout
    assert {p: os.stat(out / "runs" / p / "records.csv").st_mtime_ns for p in stamps} == stamps
    assert [r["action"] for r in _read_csv(out / "sweep.csv")] == ["reuse"] * 2


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance with 2 CPUs for the in-process tests; ``run_sweep`` uses it as it is.
    """
    ray = pytest.importorskip("ray")
    from crosscurv.experiments.sweep.ray_backend import connect

    start = connect(num_cpus=2)
    assert start.started and ray.is_initialized()
    yield ray
    ray.shutdown()


FAILING = """
import os
import torch
from crosscurv.numeric import Task

def quad(seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(4, 4, generator=g, dtype=torch.float64)
    A = A @ A.T / 4 + torch.eye(4, dtype=torch.float64)
    p = {"x": torch.randn(2, generator=g, dtype=torch.float64), "y": torch.randn(2, generator=g, \
dtype=torch.float64)}

    def loss(q):
        t = torch.cat([q["x"], q["y"]])
        return 0.5 * t @ A @ t + (t ** 4).sum() / 10

    return Task(p, loss, {"bx": ["x"], "by": ["y"]}, name="quad"), {"iters": 6}

def crash():
    os._exit(7)  # kills the process that runs it: under Ray, the worker
"""


def test_failed_runs_are_reported_and_the_others_finish(tmp_path, local_ray, capsys):
    tasks = tmp_path / "failing_tasks.py"
    tasks.write_text(textwrap.dedent(FAILING))
    spec = spec_from_mapping({"task": [f"{tasks}:quad", f"{tasks}:crash"], "lr": [0.1, 1000.0]})
    res = run_sweep(spec, str(tmp_path / "sw"), workers=2, threads=1)
    assert res.exit_code == SWEEP_FAILED_EXIT_CODE == 3
    by = {(r["task"].rpartition(":")[2], r["lr"]): r for r in res.rows}
    ok, div = by[("quad", 0.1)], by[("quad", 1000.0)]
    assert ok["status"] == "complete" and ok["records"] == 6 and ok["exit_code"] == 0
    assert div["status"] == "diverged" and div["exit_code"] == 3 and "diverged at k=" in div[
        "error"]
    for lr in (0.1, 1000.0):
        crash = by[("crash", lr)]
        assert crash["status"] == "failed" and crash["exit_code"] is None and crash[
            "records"] is None
        assert "Worker" in crash["error"] or "died" in crash["error"], crash["error"]
    rows = _read_csv(res.csv)
    assert len(rows) == 4 and sorted(r["status"] for r in rows) == ["complete", "diverged",
                                                                    "failed", "failed"]
    err = capsys.readouterr().err
    assert err.count("crosscurv: sweep [") == 4 and "diverged at k=" in err
    assert "failed" in (tmp_path / "sw" / "sweep.md").read_text()


def test_resume_reuses_complete_runs_and_resumes_a_killed_one(tmp_path, local_ray, capsys):
    spec = spec_from_mapping({"task": "mlp", "preset": "smoke", "seed": [0, 1], "iters": 40})
    out = tmp_path / "sw"
    done = run_sweep(spec_from_mapping({"task": "mlp", "preset": "smoke", "seed": 1, "iters": 40}),
                     str(out), workers=2, threads=1)
    assert done.exit_code == 0 and [r["action"] for r in done.rows] == ["new"]
    killed_point = expand(spec)[0]
    killed = out / "runs" / killed_point.name
    assert killed_point.name == "mlp-smoke-seed0-K40"
    # the same run started by hand and killed hard after 2 records (as a crashed machine would)
    # one thread, as the sweep gives each run below: a run records its thread count and a resume
    # with another count is refused (float32 reductions depend on it)
    proc = subprocess.Popen([sys.executable, "-m", "crosscurv", *killed_point.argv(str(killed))],
                            env=dict(ENV, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while count_rows(str(killed
                / "records.csv")) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    k_killed = count_rows(str(killed / "records.csv"))
    assert 2 <= k_killed < 40 and read_summary(str(killed / "summary.json"))["status"] == "running"

    with pytest.raises(SweepError, match="already holds a sweep"):
        run_sweep(spec, str(out), workers=2)
    stamp = os.stat(out / "runs" / "mlp-smoke-seed1-K40" / "records.csv").st_mtime_ns
    res = run_sweep(spec, str(out), workers=2, threads=1, resume=True)
    assert res.exit_code == 0 and res.timing["executed"] == 1
    first, second = res.rows
    assert (first["action"], first["status"], first["records"]) == ("resume", "complete", 40)
    assert (second["action"], second["status"], second["records"]) == ("reuse", "complete", 40)
    assert os.stat(out / "runs" / "mlp-smoke-seed1-K40" / "records.csv").st_mtime_ns == stamp
    s = read_summary(str(killed / "summary.json"))
    # the protocol checkpoints at k = 0 and then on a time cadence: it resumes from the last one
    assert s["status"] == "complete" and 0 <= s["timing"]["resumed_from"] <= k_killed
    assert [r["k"] for r in read_records(str(killed / "records.csv"))] == list(range(1, 41))
    capsys.readouterr()


def test_local_workers_run_at_the_drivers_priority(local_ray):
    """A local instance's workers are not reniced below the driver (Ray's default is niceness 15),
    so a sweep's runs are not starved by any other busy process on the machine."""
    @local_ray.remote(num_cpus=1)
    def niceness():
        return os.nice(0)

    assert local_ray.get(niceness.remote(), timeout=120) == os.nice(0)
