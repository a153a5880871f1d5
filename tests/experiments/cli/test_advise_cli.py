"""``crosscurv advise`` as a user runs it: --json schema on the smoke MLP, a user factory, resume,
one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

FACTORY = """
import torch
from crosscurv.numeric import Task

def make(seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    dt = dtype or torch.float64
    A = torch.randn(6, 6, generator=g, dtype=dt)
    A = A @ A.T / 6 + torch.eye(6, dtype=dt)
    b = torch.randn(6, generator=g, dtype=dt)
    p = {"x": torch.randn(2, generator=g, dtype=dt), "y": torch.randn(2, generator=g, dtype=dt),
         "z": torch.randn(2, generator=g, dtype=dt)}

    def loss(q):
        t = torch.cat([q["x"], q["y"], q["z"]])
        return 0.5 * t @ A @ t - b @ t + (t ** 4).sum() / 10

    return Task(p, loss, {"bx": ["x"], "by": ["y"], "bz": ["z"]}, name="quartic3"), {"lr": 0.05, \
"iters": 6}
"""


def _cli(*args, cwd=None, timeout=300):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "crosscurv", "advise", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "task3.py"
    path.write_text(textwrap.dedent(FACTORY))
    return f"{path}:make"


def test_smoke_mlp_json_schema(tmp_path):
    r = _cli("mlp", "--preset", "smoke", "--iters", "5", "--json", "--out", str(tmp_path / "run"),
             timeout=600)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert isinstance(obj["recommendation"], str) and obj["recommendation"].startswith(
        "at K = 5: use ")
    rows = obj["per_iteration"]
    assert [row["k"] for row in rows] == [1, 2, 3, 4, 5]
    # the MLP has 8 blocks: no full list of GS orders; the defaults are spelled with its block names
    cands = ["jc", "gs", "gs:" + ",".join(f"layer{b}" for b in range(8, 0, -1)), "chain"]
    for row in rows:
        assert {"k", "estimates", "errors", "best", "certified"} <= set(row)
        assert list(row["estimates"]) == cands and list(row["errors"]) == cands
        assert row["estimates"]["jc"] == 0.0 and row["errors"]["jc"] == 0.0
        assert row["best"] in cands and isinstance(row["certified"], bool)
        assert all(isinstance(v, float) and v >= 0 for v in row["errors"].values())
    assert (tmp_path / "run" / "advice.csv").exists() and (tmp_path / "run"
                                                           / "advice.json").exists()


def test_user_factory_spelling_resume_and_validate(tmp_path, factory):
    out = str(tmp_path / "a")
    r = _cli(factory, "--patterns", "gs:bz,by,bx;chain;2<-1", "--json", "--out", out)
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert list(first["per_iteration"][0]["estimates"]) == ["jc", "gs:bz,by,bx", "chain", "2<-1"]
    r = _cli(factory, "--patterns", "gs:bz,by,bx;chain;2<-1", "--json", "--out", out, "--resume",
             "--iters", "9", "--validate")
    assert r.returncode == 0, r.stderr
    ext = json.loads(r.stdout)
    assert ext["per_iteration"][:6] == first["per_iteration"]
    assert len(ext["per_iteration"]) == 9
    val = ext["validation"]
    assert val["agree_all"][1] == 9 and 0 <= val["agree_all"][0] <= 9
    assert os.path.exists(os.path.join(out, "validation.json"))


@pytest.mark.parametrize("args, needle", [
    (["--patterns", "gs;3<-3"], "self pairs"),
    (["--patterns", "gs;gs:1,2,3"], "same scheme"),
    (["--optimizer", "bogus"], "optimizer"),
    (["--optimizer", "momentum"], "momentum:BETA"),
    (["--block-lr", "nope=2"], "unknown block"),
    (["--lr", "-1"], "--lr"),
    (["--iters", "0"], "--iters"),
])
def test_bad_input_one_line_exit_2(tmp_path, factory, args, needle):
    out = tmp_path / "bad"
    r = _cli(factory, "--out", str(out), *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error: ") and needle in lines[
        0], r.stderr
    assert not (out / "advice.csv").exists()


def test_resume_refusals(tmp_path, factory):
    out = str(tmp_path / "r")
    r = _cli(factory, "--resume", "--out", out)
    assert r.returncode == 2 and "nothing to resume" in r.stderr
    assert _cli(factory, "--out", out).returncode == 0
    r = _cli(factory, "--out", out)
    assert r.returncode == 2 and "already holds" in r.stderr and len(
        r.stderr.strip().splitlines()) == 1
    r = _cli(factory, "--out", out, "--resume", "--lr", "0.07")
    assert r.returncode == 2 and "setting lr differs" in r.stderr


def test_optimizer_and_block_lr_match_crosscurv_run(tmp_path, factory):
    """``--optimizer`` / ``--block-lr`` mean what they mean for ``crosscurv run``: advise's
    prediction for a pattern is the run's optimizer-aware jc_only column, and the settings record
    the optimizer."""
    flags = ["--optimizer", "momentum:0.9", "--block-lr", "by=2", "--iters", "5"]
    r = _cli(factory, "--patterns", "gs;chain", "--json", "--out", str(tmp_path / "adv"), *flags)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["settings"]["optimizer"]["spec"] == "momentum:0.9" and obj["settings"][
        "block_lr"] == {"by": 2.0}
    assert "momentum:0.9" in obj["recommendation"]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "crosscurv", "run", factory, "--pattern", "gs",
                          "--out", str(tmp_path / "run"),
                          *flags], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    from crosscurv.numeric.records import read_records

    recs = read_records(str(tmp_path / "run" / "records.csv"))
    assert [row["estimates"]["gs"] for row in obj["per_iteration"]] == pytest.approx(
        [rec["jc_only"] for rec in recs], rel=1e-12, abs=1e-16)
    assert all(row["errors"]["gs"] is None and row["certified"] is False for row in obj[
        "per_iteration"])


def test_validation_study_resumes_from_its_cache(tmp_path):
    """The study writes the report after each configuration and reads finished ones back instead of
    rerunning."""
    from crosscurv.experiments.cli.commands.advise import study

    out = str(tmp_path / "study")
    text = study(["mlp"], [0], {"mlp": 2}, out, "smoke", {"mlp": [0.05]}, command="study-test")
    assert "| mlp | 0 | 0.05 | 2 |" in text and "Generated by `study-test`" in text
    assert "Pending" not in text
    found = text.splitlines()[2:4]  # what was found comes first
    assert found[0].startswith("- Regret ") and "certified iterations were wrong" in found[0]
    assert found[1].startswith("- mlp: the advice named the measured best scheme in ")
    assert "(eta = 0.05)" in found[1]
    cached = os.path.join(out, "validation-runs", "mlp-seed0-lr0.05-K2.json")
    before = os.stat(cached).st_mtime_ns
    again = study(["mlp"], [0], {"mlp": 2}, out, "smoke", {"mlp": [0.05]}, command="study-test")
    assert again == text and os.stat(cached).st_mtime_ns == before
    row = json.load(open(os.path.join(out, "validation.json")))["rows"][0]
    assert row["agree_all"][1] == 2 and row["covered_embedded"][1] <= 2 * 3
    # regret is the headline column; a cached configuration from before regret is run again
    assert "| regret (decided) | regret (certified) | certified wrong |" in text
    assert row["summary"]["decided"] <= 2 and "regret_mean" in row["summary"]
    old = json.load(open(cached))
    del old["summary"]
    with open(cached, "w") as fh:
        json.dump(old, fh)
    study(["mlp"], [0], {"mlp": 2}, out, "smoke", {"mlp": [0.05]}, command="study-test")
    assert "summary" in json.load(open(cached))


def test_a_diverged_jc_run_ends_with_the_divergence_not_advice(tmp_path, factory):
    """With a learning rate far past the stable regime the JC run diverges: text and --json say so
    first, with the last finite state, and advise no scheme (nothing before it is certified)."""
    text = _cli(factory, "--lr", "1e6", "--iters", "20", "--out", str(tmp_path / "a"), timeout=120)
    js = _cli(factory, "--lr", "1e6", "--iters", "20", "--json", "--out", str(tmp_path / "b"),
              timeout=120)
    assert text.returncode == js.returncode == 3, text.stderr + js.stderr
    obj = json.loads(js.stdout)
    assert obj["status"] == "diverged"
    rows = obj["per_iteration"]
    assert rows and not any(r["certified"] for r in rows)
    for rec in (obj["recommendation"], text.stdout.splitlines()[1]):
        assert rec.startswith("the JC run diverged (diverged at k=")
        assert f"last finite state: k = {rows[-1]['k']}, L_JC = " in rec
        assert "no advice over a diverged run" in rec and "use " not in rec


def test_a_diverged_search_ends_with_the_divergence_not_a_front(tmp_path, factory):
    """``--search`` with a learning rate far past the stable regime: no front table and no pattern
    advised, the divergence and the last finite state instead."""
    r = _cli(factory, "--lr", "1e6", "--iters", "20", "--search", "all", "--out",
             str(tmp_path / "s"), timeout=120)
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("diverged: ") and len(lines) == 2
    assert lines[1].startswith("the JC run diverged (diverged at k=")
    assert "last finite state: k = " in lines[1] and "no advice over a diverged run" in lines[1]
    assert "use jc" not in lines[1]
