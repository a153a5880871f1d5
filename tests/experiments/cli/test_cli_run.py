"""``crosscurv run``: user factories, flags overriding settings, --json, --resume, and every bad
input.

Bad input must give exactly one stderr line ``crosscurv: error: ...``, exit code 2, no traceback and
no output written or overwritten.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from crosscurv.experiments.cli import main
from crosscurv.numeric.records import read_records, read_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

GOOD = """
import torch
from crosscurv.numeric import Task

def make(seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    dt = dtype or torch.float64
    A = torch.randn(5, 5, generator=g, dtype=dt)
    A = A @ A.T / 5 + torch.eye(5, dtype=dt)
    b = torch.randn(5, generator=g, dtype=dt)
    p = {"x": torch.randn(2, generator=g, dtype=dt), "y": torch.randn(3, generator=g, dtype=dt)}

    def loss(q):
        t = torch.cat([q["x"], q["y"]])
        return 0.5 * t @ A @ t - b @ t + (t ** 4).sum() / 10

    return Task(p, loss, {"bx": ["x"], "by": ["y"]}, name="quad"), {"lr": 0.1, "iters": 4}

def bare():
    t, _ = make()
    return t

def boom():
    raise RuntimeError("factory exploded")

def wrong():
    return 42

def vector_loss():
    t, _ = make()
    return Task(t.params, lambda p: p["x"] * 2, t.blocks)

def nan_loss():
    t, _ = make()
    return Task(t.params, lambda p: p["x"].sum() * float("nan"), t.blocks)

def leaves_domain():
    t, _ = make()

    def loss(p):
        if max(float(v.detach().abs().max()) for v in p.values()) > 20:
            raise torch.linalg.LinAlgError("linalg.cholesky: the input is not positive-definite")
        return t.loss(p)

    return Task(t.params, loss, t.blocks)

def wrong_chain():
    from crosscurv.numeric import Chain
    t, settings = make()
    stages = [lambda q, h: q["x"], lambda q, h: torch.cat([h, q["y"]])]
    return Task(t.params, t.loss, t.blocks, chain=Chain(stages, torch.zeros(0), lambda t: \
t.sum())), settings

not_callable = 3
"""


@pytest.fixture()
def fac(tmp_path):
    path = tmp_path / "user_tasks.py"
    path.write_text(textwrap.dedent(GOOD))
    (tmp_path / "broken.py").write_text("def make(:\n")
    return str(path)


def _run(capsys, *argv):
    rc = main(["run", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("crosscurv: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_user_factory_runs_and_json_summary_holds_effective_settings(capsys, tmp_path, fac):
    out = str(tmp_path / "run")
    rc, stdout, err = _run(capsys, f"{fac}:make", "--out", out, "--json", "--iters", "3", "--seed",
                           "1")
    assert rc == 0, err
    s = json.loads(stdout)
    assert s["status"] == "complete" and s["records"] == 3
    st = s["settings"]
    # --iters overrides the factory's 4
    assert st["lr"] == 0.1 and st["iters"] == 3 and st["seed"] == 1
    assert st["pattern"]["name"] == "gs" and st["dtype"] == "float64" and st["device"] == "cpu"
    assert set(s["metrics"]) == {"recursive", "cumulative", "jc_only"}
    assert "not certified" in s["constants"]["note"]
    assert s["hvp"]["requested"] == "auto" and s["timing"]["iterations_per_s"] > 0
    assert [r["k"] for r in read_records(os.path.join(out, "records.csv"))] == [1, 2, 3]
    assert read_summary(os.path.join(out, "summary.json"))["settings"] == st
    assert "k=3/3" in err  # non-terminal progress lines


def test_module_factory_flags_and_plain_output(capsys, tmp_path, fac, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, stdout, err = _run(capsys, "user_tasks:bare", "--lr", "0.05", "--iters", "2", "--pattern",
                           "jc", "--hvp", "reverse", "--dtype", "float64", "--device", "cpu",
                           "--offload", "on")
    assert rc == 0, err
    assert stdout.startswith("complete: 2 iterations of user_tasks:bare (pattern jc")
    s = read_summary(os.path.join("runs", "quad-jc", "summary.json"))
    assert s["settings"]["lr"] == 0.05 and s["hvp"]["used"] == "reverse" and s["settings"][
        "offload"] is True
    assert sorted(os.listdir(os.path.join("runs", "quad-jc"))) == [
        "checkpoint.pt", "figure.png", "records.csv", "summary.json"]
    assert all(r["gap"] == 0.0 for r in read_records(os.path.join("runs", "quad-jc",
                                                                  "records.csv")))


def test_resume_continues_and_refuses_changed_settings(capsys, tmp_path, fac):
    out = str(tmp_path / "run")
    rc, _, err = _run(capsys, f"{fac}:make", "--out", out)
    assert rc == 0, err
    ref = open(os.path.join(out, "records.csv"), "rb").read()
    # an existing run without --resume: refused, untouched
    rc, _, err = _run(capsys, f"{fac}:make", "--out", out)
    assert rc == 2 and "already holds a run" in _one_error_line(err)
    # a different learning rate: refused, untouched
    rc, _, err = _run(capsys, f"{fac}:make", "--out", out, "--resume", "--lr", "0.2")
    assert rc == 2 and "setting lr " in _one_error_line(err)
    assert open(os.path.join(out, "records.csv"), "rb").read() == ref
    # the same settings: nothing left to compute, same records
    rc, stdout, err = _run(capsys, f"{fac}:make", "--out", out, "--resume", "--json")
    assert rc == 0, err
    assert json.loads(stdout)["timing"]["iterations_this_session"] == 0
    assert open(os.path.join(out, "records.csv"), "rb").read() == ref


def test_divergence_exit_code_3_keeps_records(capsys, tmp_path, fac):
    out = str(tmp_path / "run")
    rc, stdout, err = _run(capsys, f"{fac}:make", "--out", out, "--lr", "3", "--iters", "60")
    assert rc == 3
    last = err.strip().splitlines()[-1]
    assert last.startswith("crosscurv: diverged at k=") and "records kept" in last
    s = read_summary(os.path.join(out, "summary.json"))
    assert s["status"] == "diverged"
    assert len(read_records(os.path.join(out, "records.csv"))) == s["diverged_at"] - 1


def test_a_run_leaving_the_loss_domain_exits_3_naming_what_the_loss_raised(tmp_path, fac):
    """Run as users run it (a subprocess): a loss that raises where the run leaves its domain ends
    the run as a divergence (exit 3, one line naming what it raised), not an internal error."""
    out = str(tmp_path / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "crosscurv", "run", f"{fac}:leaves_domain", "--out", out, "--lr",
         "3", "--iters", "60"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("crosscurv: diverged at k=") and "the loss raised" in last
    assert "LinAlgError" in last and "internal error" not in proc.stderr


def test_divergence_json_ends_with_the_last_finite_state_not_metrics(tmp_path, fac):
    """A diverged run's ``--json`` and summary.json hold no metrics (they would be taken over values
    running into the divergence), but the divergence and the last finite state."""
    out = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "crosscurv", "run", f"{fac}:make", "--out", out, "--lr", "1e6",
           "--iters", "20", "--json", "--no-figure"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    printed = json.loads(proc.stdout)
    saved = read_summary(os.path.join(out, "summary.json"))
    records = read_records(os.path.join(out, "records.csv"))
    for s in (printed, saved):
        assert s["status"] == "diverged" and s["diverged_at"] == len(records) + 1
        assert s["metrics"] == {} and s["bound_bk_coverage"] is None
        assert s["metrics_note"].startswith("none over a diverged run")
        last = s["last_finite_state"]
        if records:
            assert last["k"] == records[-1]["k"] == len(records)
            assert last["loss_jc"] == records[-1]["loss_jc"]
            assert last["loss_s"] == records[-1]["loss_s"]
        else:
            assert last is None


BAD = [
    (["--lr", "0"], "--lr: learning rate must be a finite number > 0"),
    (["--lr", "-0.1"], "--lr: learning rate must be a finite number > 0"),
    (["--lr", "nan"], "--lr: learning rate must be a finite number > 0"),
    (["--lr", "inf"], "--lr: learning rate must be a finite number > 0"),
    (["--lr", "abc"], "invalid float value"),
    (["--iters", "0"], "--iters: iterations must be an integer >= 1"),
    (["--iters", "1.5"], "invalid int value"),
    (["--dtype", "float16"], "invalid choice"),
    (["--hvp", "sideways"], "invalid choice"),
    (["--hvp-chunk", "0"], "--hvp-chunk: HVP chunk size must be an integer >= 1"),
    (["--offload", "maybe"], "invalid choice"),
    (["--device", "tpu"], "unknown device"),
    (["--pattern", "3<-1"], "outside 1..2"),
    (["--pattern", "zigzag"], "unknown pattern"),
    (["--bogus"], "unrecognized arguments"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_flags(capsys, tmp_path, fac, extra, message):
    out = tmp_path / "run"
    rc, stdout, err = _run(capsys, f"{fac}:make", "--out", str(out), *extra)
    assert rc == 2
    assert message in _one_error_line(err)
    assert not out.exists()


BAD_TASKS = [
    ("nosuchtask", "unknown task 'nosuchtask'"),
    ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz': ModuleNotFoundError"),
    ("{dir}/broken.py:make", "cannot import"),
    ("{dir}/missing.py:make", "does not exist"),
    ("{fac}:nope", "has no attribute 'nope'"),
    ("{fac}:not_callable", "is not callable"),
    ("{fac}:boom", "raised RuntimeError: factory exploded"),
    ("{fac}:wrong", "returned int, expected a crosscurv.numeric.Task"),
    ("{fac}:vector_loss", "must return a scalar"),
    ("{fac}:nan_loss", "not finite"),
    ("{fac}:wrong_chain", "is not loss(params)"),
    ("{fac}:bare", "sets no learning rate: pass --lr"),
    (":make", "bad task"),
]


@pytest.mark.parametrize("spec,message", BAD_TASKS, ids=[b[0] for b in BAD_TASKS])
def test_bad_tasks(capsys, tmp_path, fac, spec, message):
    out = tmp_path / "run"
    spec = spec.format(fac=fac, dir=os.path.dirname(fac))
    rc, stdout, err = _run(capsys, spec, "--out", str(out))
    assert rc == 2
    assert message in _one_error_line(err)
    assert not out.exists()


def test_console_entry_point_prints_one_line_without_traceback(tmp_path, fac):
    proc = subprocess.run(
        [sys.executable, "-m", "crosscurv", "run", f"{fac}:boom", "--out", str(tmp_path / "r")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"crosscurv: error: task factory {fac}:boom raised "
                                   "RuntimeError: factory exploded")
    assert proc.stdout == ""
