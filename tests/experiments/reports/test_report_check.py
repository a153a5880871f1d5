"""``crosscurv report --check``: committed runs recomputed from their summary and compared with
their records.

Through the command line in a subprocess, as a user runs it: a fresh smoke run agrees with itself
recomputed (exit 0); one committed value moved beyond its tolerance is named by iteration and column
(exit 1, checking stops there); a corrupt summary is one line (exit 2); and a prefix of the
committed MLP study still comes out of the code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from crosscurv.experiments.reports.check import ReportCheckError, check_run, find_runs, run_threads
from crosscurv.numeric.record_comparison import reference_tolerances
from crosscurv.numeric.records import read_records, records_columns

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _cli(*args, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "crosscurv", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _copy(run, dst):
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns("checkpoint.pt", "offload"))
    return str(dst)


def test_a_run_agrees_with_itself_recomputed(smoke_run):
    proc = _cli("report", "--check", smoke_run, "--iters", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{smoke_run}: agree at k=1..2 of 3 (9 columns;"), lines
    threads = json.load(open(os.path.join(smoke_run, "summary.json")))["settings"]["threads"]
    # as the run recorded
    assert f"{threads} thread{'s' if threads != 1 else ''} (summary)" in lines[0]
    # same machine, build and threads: the same bits
    assert lines[0].endswith("): bitwise"), lines[0]
    assert lines[-1] == "all 1 runs agree with their committed records"
    assert "k=2/2" in proc.stderr  # progress goes to stderr


def test_a_value_moved_beyond_its_tolerance_is_named(smoke_run, tmp_path):
    bad = _copy(smoke_run, tmp_path / "bad")
    rec = os.path.join(bad, "records.csv")
    ref = records_columns(read_records(rec))
    rtol, atol = reference_tolerances(ref, "float32", ["recursive"])["recursive"]
    lines = open(rec).read().splitlines()
    cells = lines[2].split(",")  # k = 2
    old = float(cells[4])  # recursive
    cells[4] = repr(old + 3 * (atol + rtol * abs(old)))
    lines[2] = ",".join(cells)
    open(rec, "w").write("\n".join(lines) + "\n")
    proc = _cli("report", "--check", bad, smoke_run, "--iters", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"{bad}: DISAGREE at k=2, column recursive: recomputed "), first
    assert f"committed {float(cells[4])!r}" in first and "> tolerance" in first
    assert "stopped at the first disagreement; 1 run(s) not checked" in proc.stdout
    assert smoke_run + ":" not in proc.stdout  # the second run was not checked


def test_the_library_returns_the_same_verdict(smoke_run, tmp_path):
    rc = check_run(smoke_run, 1)
    assert rc.agree and rc.iterations == 1 and rc.recorded == 3
    assert rc.columns[-2:] == ["sharpness", "gap_err"] and rc.skipped == []
    assert rc.comparison.ok and rc.comparison.ks == [1]


def test_a_corrupt_summary_is_one_line(smoke_run, tmp_path):
    bad = _copy(smoke_run, tmp_path / "corrupt")
    with open(os.path.join(bad, "summary.json"), "w") as fh:
        fh.write('{"settings": {"task": "mlp", "lr": ')
    proc = _cli("report", "--check", bad, "--iters", "2")
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "crosscurv: error: summary ") and "not valid JSON" in err[0], err


def test_bad_flags_are_one_line(tmp_path):
    proc = _cli("report", "--iters", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "crosscurv: error: RUN_DIR and --iters only apply with --check"
    proc = _cli("report", "--check", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr and len(
        proc.stderr.strip().splitlines()) == 1


def test_runs_are_found_under_a_reports_folder_and_sweeps(smoke_run, tmp_path):
    root = tmp_path / "reports"
    a = _copy(smoke_run, root / "runs" / "mlp")
    b = _copy(smoke_run, root / "sweeps" / "lr" / "runs" / "mlp-smoke-lr0.05-seed0-gs")
    (root / "sweeps" / "lr" / "sweep.json").write_text(json.dumps({"threads": 2, "workers": 1}))
    # another command's records: not a protocol run
    other = root / "runs" / "motivation" / "mlp" / "seed0"
    other.mkdir(parents=True)
    (other / "summary.json").write_text("{}")
    (other / "records.csv").write_text("k,epoch,loss_seq\n1,0.1,2.3\n")
    assert find_runs(str(root)) == sorted([a, b])
    summary = json.load(open(os.path.join(b, "summary.json")))
    summary["settings"]["threads"] = 3
    assert run_threads(b, summary) == (3, "summary")
    del summary["settings"]["threads"]  # summaries of earlier versions do not record it
    assert run_threads(b, summary) == (2, "sweep.json")
    assert run_threads(a, summary) == (1, "not recorded")
    with pytest.raises(ReportCheckError, match="is not a folder"):
        find_runs(str(tmp_path / "missing"))


@pytest.mark.portable
def test_a_prefix_of_every_committed_study_reproduces():
    """The committed Table 1 runs (``reports/runs/<task>``) still come out of ``crosscurv run``:
    their first two records, recomputed through the command from each ``summary.json``, agree within
    the tolerances."""
    runs = [os.path.join("reports", "runs", t) for t in ("fl", "lora", "mlp")]
    proc = _cli("report", "--check", *runs, "--iters", "2", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    for run in runs:
        line = next(x for x in lines if x.startswith(f"{run}: "))
        assert line.startswith(f"{run}: agree at k=1..2 of ")
        assert "(9 columns;" in line


def test_records_of_an_older_crosscurv_are_refused_in_one_line(smoke_run, tmp_path):
    """A folder whose records.csv has the eight columns of the first versions: one line, exit 2."""
    old = _copy(smoke_run, tmp_path / "eight")
    rec = os.path.join(old, "records.csv")
    rows = [",".join(line.split(",")[:8]) for line in open(rec).read().splitlines()]
    open(rec, "w").write("\n".join(rows) + "\n")
    proc = _cli("report", "--check", old, "--iters", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(
        "crosscurv: error:") and "records of an older crosscurv (8 columns" in line, line


def test_a_different_start_is_a_disagreement_at_k0(smoke_run, tmp_path):
    moved = _copy(smoke_run, tmp_path / "moved")
    path = os.path.join(moved, "summary.json")
    summary = json.load(open(path))
    summary["settings"]["theta0_sha256"] = "0" * 64
    json.dump(summary, open(path, "w"))
    rc = check_run(moved, 2)
    assert not rc.agree and rc.first[:2] == (0, "theta0")
    assert rc.line().startswith(f"{moved}: DISAGREE at k=0: the rebuilt initial parameters differ")


def test_tolerances_grow_as_a_run_perturbed_at_rounding_parts():
    """The third promise: beyond the fixed tolerances, within them grown as the trajectory's own
    sensitivity."""
    from crosscurv.experiments.reports.check import sensitivity
    from crosscurv.numeric.record_comparison import compare_records

    run = {"k": [1, 2, 3, 4], "loss_jc": [2.0, 1.5, 1.2, 1.0], "loss_s": [2.0, 1.4, 1.1, 0.9]}
    twin = {"k": run["k"], "loss_jc": [2.0 * (1 + 1e-7), 1.5 * (1 + 1e-6), 1.2 * (1 + 1e-5), 1.0],
            "loss_s": [2.0 * (1 + 1e-7), 1.4, 1.1, 0.9 * (1 + 1e-4)]}
    assert sensitivity(twin, run) == pytest.approx([1.0, 10.0, 100.0, 1000.0])
    assert sensitivity(run, run) == [1.0] * 4  # never parts: the fixed tolerances
    ref = {"k": run["k"], "loss_jc": [2.0, 1.5, 1.2 * (1 + 5e-5), 1.0], "loss_s": run["loss_s"]}
    tol, cols = {"loss_jc": (1e-6, 0.0), "loss_s": (1e-6, 0.0)}, ["loss_jc", "loss_s"]
    assert compare_records(run, ref, tolerances=tol, columns=cols).first[:2] == (3, "loss_jc")
    assert compare_records(run, ref, tolerances=tol, columns=cols, growth=sensitivity(twin, run)).ok
    # growth does not excuse a difference larger than the measured sensitivity
    ref["loss_jc"][2] = 1.2 * (1 + 5e-4)
    assert not compare_records(run, ref, tolerances=tol, columns=cols, growth=sensitivity(twin,
                                                                                          run)).ok


def test_a_folder_made_with_another_initializer_says_so(smoke_run, tmp_path):
    """A folder from before the inputs were drawn the same on every CPU: no ``init`` and another
    start.
    """
    old = _copy(smoke_run, tmp_path / "old-init")
    path = os.path.join(old, "summary.json")
    summary = json.load(open(path))
    assert summary["settings"]["task_info"]["init"] == "float64-normal-v1"
    del summary["settings"]["task_info"]["init"]
    summary["settings"]["theta0_sha256"] = "1" * 64
    json.dump(summary, open(path, "w"))
    proc = _cli("report", "--check", old, "--iters", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert proc.stdout.startswith(f"{old}: DISAGREE at k=0: made with another initializer "
                                  "(recorded: none, "), proc.stdout
    assert "this code: float64-normal-v1" in proc.stdout
    assert "recompute the folder with this code" in proc.stdout
    # the same start without the field (fl folders of before): checked as usual
    del summary["settings"]["task_info"]
    summary["settings"]["theta0_sha256"] = json.load(open(os.path.join(smoke_run, "summary.json")))[
        "settings"][
        "theta0_sha256"]
    json.dump(summary, open(path, "w"))
    assert check_run(old, 1).agree


def test_a_run_with_an_optimizer_is_rebuilt_with_it(tmp_path):
    """The summary's optimizer and per-block step sizes are part of the run (a plain-step rebuild
    would part)."""
    out = str(tmp_path / "mom")
    proc = _cli("run", "mlp", "--preset", "smoke", "--iters", "2", "--device", "cpu", "--out", out,
                "--optimizer", "momentum:0.9", "--block-lr", "layer1=2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rc = check_run(out, 2)
    assert rc.agree, rc.line()
    path = os.path.join(out, "summary.json")
    summary = json.load(open(path))
    # as a summary of plain steps
    del summary["settings"]["optimizer"], summary["settings"]["block_lr"]
    json.dump(summary, open(path, "w"))
    assert not check_run(out, 2).agree
