"""The command line waits passively in OpenMP unless the user chose a policy."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_PROBE = (
    "import os, sys\nfrom experiments import cli\ncli.main([])\nprint('PROBE', "
    "os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n"
)


def _probe(policy):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1].split()[1:]


def test_passive_wait_is_the_default_and_set_before_torch_loads():
    policy, torch_loaded = _probe(None)
    assert policy == "PASSIVE"
    assert torch_loaded == "False"  # set before libgomp reads it


def test_a_users_wait_policy_is_kept():
    assert _probe("ACTIVE")[0] == "ACTIVE"


def test_a_run_records_its_thread_count_and_refuses_to_resume_with_another(tmp_path, capsys):
    """Float32 reductions depend on the number of intra-op threads, so summary.json records it and a
    run resumed with another count (whose records would not equal an uninterrupted run's) is
    refused."""
    import json

    import torch

    from crosscurv.experiments.cli import main

    before = torch.get_num_threads()
    out = str(tmp_path / "r")
    try:
        torch.set_num_threads(1)
        assert main(["run", "mlp", "--preset", "smoke", "--iters", "2", "--device", "cpu", "--out",
                     out]) == 0
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
            assert json.load(fh)["settings"]["threads"] == 1
        torch.set_num_threads(2)
        capsys.readouterr()
        assert main(["run", "mlp", "--preset", "smoke", "--iters", "3", "--device", "cpu", "--out",
                     out, "--resume"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "threads" in err[0] and "differs" in err[0]
    finally:
        torch.set_num_threads(before)


def _run_cli(tmp_path, name, env_threads=None, extra=()):
    """``crosscurv run mlp --preset smoke`` in a fresh process; returns (settings, stderr lines
    about threads)."""
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",
                                                            "CROSSCURV_DEFAULT_THREADS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if env_threads is not None:
        env["OMP_NUM_THREADS"] = env_threads
    out = str(tmp_path / name)
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--preset", "smoke",
                           "--iters", "2", "--device", "cpu", "--out", out,
                           *extra], env=env, capture_output=True,
                          text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
        settings = json.load(fh)["settings"]
    return settings, [ln for ln in proc.stdout.splitlines() if "intra-op thread" in ln]


def test_the_cli_uses_one_thread_by_default_and_records_why(tmp_path):
    settings, lines = _run_cli(tmp_path, "default")
    assert settings["threads"] == 1 and settings["threads_source"] == "default"
    assert len(lines) == 1 and lines[0].startswith(
        "1 intra-op thread (the default: the same float32 records")


def test_the_users_thread_count_wins_and_is_recorded(tmp_path):
    settings, lines = _run_cli(tmp_path, "env", env_threads="2")
    assert settings["threads"] == 2 and settings["threads_source"] == "OMP_NUM_THREADS"
    assert lines == ["2 intra-op threads (from OMP_NUM_THREADS)"]
    settings, lines = _run_cli(tmp_path, "flag", env_threads="1", extra=("--threads", "2"))
    assert settings["threads"] == 2 and settings["threads_source"] == "--threads"
    # resuming with the same count keeps the reason the run started with, so the settings compare
    # equal
    settings, lines = _run_cli(tmp_path, "flag", extra=("--threads", "2", "--resume", "--iters",
                                                        "3"))
    assert settings["threads"] == 2 and settings["threads_source"] == "--threads" and settings[
        "iters"] == 3


def test_threads_auto_measures_records_and_resumes_with_its_count(tmp_path):
    """--threads auto: the measured count and its seconds per gradient are recorded and printed; a
    resumed run takes them from the run folder instead of measuring again (its settings compare
    equal)."""
    from crosscurv.experiments.thread_count import candidates

    settings, lines = _run_cli(tmp_path, "auto", extra=("--threads", "auto"))
    timed = settings["threads_auto_seconds"]
    assert settings["threads_source"] == "--threads auto" and settings["threads"] in candidates()
    assert sorted(int(k) for k in timed) == candidates() and all(t > 0 for t in timed.values())
    assert len(lines) == 1 and "--threads auto" in lines[0] and "seconds per gradient" in lines[0]
    again, _ = _run_cli(tmp_path, "auto", extra=("--threads", "auto", "--resume", "--iters", "3"))
    assert again["iters"] == 3 and again["threads"] == settings["threads"] and again[
        "threads_auto_seconds"] == timed


def test_a_bad_thread_count_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",
                                                            "CROSSCURV_DEFAULT_THREADS")}
    for value, needle in (("x", "an integer >= 1 or auto, got 'x'"), ("0",
            "an integer >= 1 or auto, got 0")):
        proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--threads", value,
                               "--out",
                               str(tmp_path / "bad")], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr


def test_advise_with_threads_auto_resumes_with_its_measured_count(tmp_path):
    """In advise's default run folder (runs/advise-mlp under the working directory)."""
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",
                                                            "CROSSCURV_DEFAULT_THREADS")}
    out = str(tmp_path / "runs" / "advise-mlp")
    saved = []
    for iters, extra in (("2", ()), ("3", ("--resume",))):
        proc = subprocess.run([sys.executable, "-m", "crosscurv", "advise", "mlp", "--preset",
                               "smoke", "--iters", iters, "--threads", "auto",
                               *extra], env=env, cwd=tmp_path,
                              capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        with open(os.path.join(out, "advice.json"), encoding="utf-8") as fh:
            saved.append(json.load(fh)["settings"])
    assert saved[0]["threads_auto_seconds"] == saved[1]["threads_auto_seconds"]
    assert saved[0]["threads"] == saved[1]["threads"] and saved[1]["iters"] == 3
