"""``crosscurv sweep`` without Ray: grid parsing (flags, TOML), expansion, run-folder states,
aggregation.

Bad grids must give one stderr line ``crosscurv: error: ...`` and exit code 2 before anything runs
(nothing is written).
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
import textwrap

import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.sweep import (SweepError, SweepSpec, expand, spec_from_mapping,
                                         spec_from_toml)
from crosscurv.experiments.sweep import aggregate, state
from crosscurv.experiments.sweep.grid import RunPoint
from crosscurv.numeric.records import read_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

QUAD = """
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

    return Task(p, loss, {"bx": ["x"], "by": ["y"]}, name="quad"), {"lr": 0.1, "iters": 6}
"""


@pytest.fixture()
def quad(tmp_path):
    path = tmp_path / "quad_tasks.py"
    path.write_text(textwrap.dedent(QUAD))
    return f"{path}:make"


# -- grid: flags and TOML ---------------------------------------------------------------
def test_toml_grid_and_flags_replace_its_axes(tmp_path, capsys):
    from crosscurv.experiments.cli.commands.sweep import build_spec

    grid = tmp_path / "grid.toml"
    grid.write_text('task = ["mlp", "fl"]\npreset = "smoke"\nlr = [0.01, 1]\nseed = "0-2"\n'
                    'pattern = ["gs", "2<-1"]\niters = 7\ndtype = "float64"\n')
    spec = spec_from_toml(str(grid))
    assert spec.task == ("mlp", "fl") and spec.preset == ("smoke",) and spec.lr == (0.01, 1.0)
    assert spec.seed == (0, 1, 2) and spec.pattern == ("gs",
        "2<-1") and spec.iters == 7 and spec.dtype == "float64"
    assert spec.size == 2 * 1 * 2 * 3 * 2

    class Args:  # what argparse gives `crosscurv sweep --grid grid.toml --seed 5 7-8 --lr 0.2`
        grid, task, preset, pattern, iters, dtype = str(tmp_path
                                                        / "grid.toml"), None, None, None, None, None
        seed, lr = ["5", "7-8"], ["0.2"]

    spec2 = build_spec(Args)
    assert spec2.seed == (5, 7, 8) and spec2.lr == (0.2,) and spec2.task == ("mlp",
        "fl") and spec2.iters == 7


def test_defaults_are_each_runs_own():
    spec = SweepSpec(task=("mlp",))
    (p,) = expand(spec)
    assert (p.preset, p.lr, p.seed, p.pattern, p.iters, p.dtype) == (None, None, 0, None, None,
                                                                     None)
    assert p.name == "mlp-seed0"
    assert p.argv("/o") == ["run", "mlp", "--out", "/o"]


def test_expansion_order_names_and_argv():
    spec = spec_from_mapping({"task": ["mlp", "pkg.mod:factory"], "preset": "smoke", "lr": [0.05,
                                                                                            1e-3],
                              "seed": [0, 1], "pattern": ["gs", "2<-1,3<-2"], "iters": 3})
    pts = expand(spec)
    assert len(pts) == spec.size == 16
    assert [p.name for p in pts[:4]] == ["mlp-smoke-lr0.05-seed0-gs-K3",
                                         "mlp-smoke-lr0.05-seed0-2from1_3from2-K3",
                                         "mlp-smoke-lr0.05-seed1-gs-K3",
                                         "mlp-smoke-lr0.05-seed1-2from1_3from2-K3"]
    assert pts[-1].name == "pkg.mod_factory-smoke-lr0.001-seed1-2from1_3from2-K3"
    assert len({p.name for p in pts}) == 16 and expand(spec) == pts  # unique and stable
    assert pts[1].argv("/o/x", resume=True) == ["run", "mlp", "--preset", "smoke", "--pattern",
                                                "2<-1,3<-2", "--lr", "0.05", "--iters", "3",
                                                "--out", "/o/x", "--resume"]
    assert pts[-1].argv("/o/y") == ["run", "pkg.mod:factory", "--preset", "smoke", "--pattern",
                                    "2<-1,3<-2", "--lr", "0.001", "--iters", "3", "--seed", "1",
                                    "--out", "/o/y"]


def test_colliding_names_get_a_hash():
    pts = expand(spec_from_mapping({"task": "mlp", "pattern": ["gs:2,1", "gs_2_1"]}))
    assert pts[0].name != pts[1].name and pts[0].name.startswith("mlp-seed0-gs_2_1-")
    assert len(pts[0].name) == len("mlp-seed0-gs_2_1-") + 8


@pytest.mark.parametrize(
    "toml, message",
    [
        ('task = "mlp"\nlr = [0.1, 0]\n', "learning rate must be a finite number > 0"),
        ('task = "mlp"\nlr = "fast"\n', "learning rate must be a finite number > 0"),
        ('task = []\n', "at least one task"),
        ('task = "mlp"\nseed = [1.5]\n', "seed must be an integer"),
        ('task = "mlp"\niters = 0\n', "iterations must be an integer >= 1"),
        ('task = "mlp"\ndtype = "float16"\n', "dtype must be one of"),
        ('task = "mlp"\nlearning_rate = 0.1\n', "unknown key 'learning_rate'"),
        ('task = "mlp"\npattern = [""]\n', "pattern must be a non-empty string"),
        ('task = "mlp"\n[preset]\nx = 1\n', "must be a value or a list"),
        ('task = [mlp\n', "is not valid TOML"),
    ],
)
def test_bad_toml_grids(tmp_path, toml, message):
    grid = tmp_path / "g.toml"
    grid.write_text(toml)
    with pytest.raises(SweepError, match=message.replace("[", r"\[")):
        spec_from_toml(str(grid))


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the grid needs at least one task"),
        (["--task", "nope"], "unknown task 'nope'"),
        (["--task", "mlp", "--lr", "-1"], "learning rate must be a finite number > 0"),
        (["--task", "mlp", "--lr", "nan"], "learning rate must be a finite number > 0"),
        (["--task", "mlp", "--seed", "4-2"], "seed range '4-2' is empty"),
        (["--task", "mlp", "--seed", "x"], "seed must be an integer or a range"),
        (["--task", "mlp", "mlp"], "axis task repeats 'mlp'"),
        (["--task", "mlp", "--preset", "huge"], "preset must be one of smoke, default, edge, "
                                                "paper, got 'huge'"),
        (["--task", "mlp", "--workers", "0"], "workers must be an integer >= 1"),
        (["--task", "mlp", "--threads", "-2"], "threads must be an integer >= 1"),
        (["--grid", "missing.toml"], "grid file missing.toml does not exist"),
        (["--task", "mlp", "--bogus"], "unrecognized arguments: --bogus"),
        (["--task", "mlp", "--address", "127.0.0.1:1"],
         "cannot reach the Ray cluster at 127.0.0.1:1"),
        (["--task", "mlp", "--address", "nohost"], "--address must be auto or HOST:PORT"),
    ],
)
def test_bad_grids_one_line_exit_2_nothing_written(tmp_path, capsys, argv, message):
    out = tmp_path / "sweep"
    rc = main(["sweep", *argv, "--out", str(out)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(
        "crosscurv: error: ") and message in lines[0], err
    assert not out.exists()


def test_bad_grid_in_a_subprocess(tmp_path):
    """As users run it: one line, exit 2, no traceback, no Ray started."""
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "sweep", "--task", "mlp", "--lr", "0",
                           "--out",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith("crosscurv: error: learning rate must be a finite number > 0")


def test_existing_sweep_needs_resume(tmp_path, capsys):
    (tmp_path / "s" / "runs" / "mlp-seed0").mkdir(parents=True)
    rc = main(["sweep", "--task", "mlp", "--out", str(tmp_path / "s")])
    assert rc == 2 and "already holds a sweep; use --resume" in capsys.readouterr().err


# -- run-folder states and aggregation on real runs (user task, milliseconds each)
# ------------------
def _point(task, lr, seed, iters=None):
    return RunPoint(task=task, preset=None, lr=lr, seed=seed, pattern=None, iters=iters,
                    name=f"r{lr}-{seed}")


def test_run_actions(tmp_path, quad, capsys):
    p = _point(quad, 0.1, 0)
    d = str(tmp_path / "a")
    assert state.run_action(p, d) == (state.NEW, None)
    assert main(p.argv(d)) == 0
    assert state.run_action(p, d) == (state.REUSE, None)
    other = _point(quad, 0.2, 0)
    action, reason = state.run_action(other, d)
    assert action == state.CONFLICT and "lr 0.1, requested 0.2" in reason
    # a hard-killed run: summary still "running", checkpoint present -> resume
    s = read_summary(os.path.join(d, "summary.json"))
    (tmp_path / "a" / "summary.json").write_text('{"status": "running", "settings": {}}')
    assert state.run_action(p, d) == (state.RESUME, None)
    (tmp_path / "a" / "summary.json").write_text('{"status": "comp')  # torn: no summary
    assert state.run_action(p, d) == (state.RESUME, None)
    assert s["status"] == "complete"
    # records of an interrupted run whose checkpoint is gone (a fresh clone): started afresh,
    # nothing kept
    (tmp_path / "a" / "summary.json").write_text('{"status": "running", "settings": {}}')
    os.remove(os.path.join(d, "checkpoint.pt"))
    action, reason = state.run_action(p, d)
    assert action == state.RESTART and "without its checkpoint" in reason
    state.clear_for_restart(d)
    assert state.run_action(p, d) == (state.NEW, None)
    assert main(p.argv(d)) == 0 and state.run_action(p, d) == (state.REUSE, None)
    capsys.readouterr()


def test_aggregation_rows_csv_markdown_and_figure(tmp_path, quad, capsys):
    runs = []
    for lr in (0.05, 0.1):
        for seed in (0, 1, 2):
            p = _point(quad, lr, seed)
            d = tmp_path / "runs" / p.name
            assert main(p.argv(str(d))) == 0
            runs.append((p, d))
    p = _point(quad, 1000.0, 0)  # diverges at k = 4
    d = tmp_path / "runs" / p.name
    assert main(p.argv(str(d))) == 3
    runs.append((p, d))
    capsys.readouterr()
    rows = []
    for p, d in runs:
        outcome = {"exit_code": 3 if p.lr == 1000.0 else 0, "error": "", "seconds": 0.5}
        rows.append(aggregate.run_row(p, str(d), state.NEW, outcome, state.read_run_summary(str(
            d))))
    for (p, d), r in zip(runs[:-1], rows[:-1]):
        s = read_summary(str(d / "summary.json"))
        assert r["status"] == "complete" and r["exit_code"] == 0 and r["records"] == 6 and r[
            "iters"] == 6
        assert r["lr"] == p.lr and r["seed"] == p.seed and r["pattern"] == "gs" and r[
            "dtype"] == "float64"
        assert r["eta_L"] == p.lr * s["constants"]["L"] and r["eta_G"] == p.lr * s["constants"]["G"]
        for est in ("recursive", "cumulative", "jc_only"):
            m = s["metrics"][est]
            assert r[f"{est}_correct"] == m["correct"] and r[f"{est}_mae"] == m["mae"]
            assert (r[f"{est}_jc_hits"], r[f"{est}_n_jc"]) == tuple(m["jc_hits"])
            assert (r[f"{est}_s_hits"], r[f"{est}_n_s"]) == tuple(m["s_hits"])
    bad = rows[-1]
    assert bad["status"] == "diverged" and bad["diverged_at"] == 4 and bad["records"] == 3
    assert "diverged at k=4" in bad["error"]
    reused = aggregate.run_row(runs[-1][0], "x", state.REUSE, None, state.read_run_summary(str(runs[
        -1][1])))
    assert (reused["status"], reused["exit_code"], reused["action"]) == ("diverged", 3, "reuse")
    assert "diverged at k=4" in reused["error"]  # the summary's message
    assert aggregate.run_row(runs[0][0], "x", state.REUSE, None, state.read_run_summary(str(runs[0][
        1])))[
        "exit_code"] == 0

    path = tmp_path / "sweep.csv"
    aggregate.write_csv(str(path), rows)
    with open(path, newline="") as fh:
        back = list(csv.DictReader(fh))
    assert list(back[0]) == list(aggregate.COLUMNS) and len(back) == 7
    assert float(back[0]["cumulative_mae"]) == rows[0]["cumulative_mae"]  # round-trip floats
    assert back[-1]["status"] == "diverged" and back[-1]["exit_code"] == "3"

    groups = aggregate.group_over_seeds(rows)
    assert [(g["lr"], g["n"], g["failed"]) for g in groups] == [(0.05, 3, 0), (0.1, 3, 0), (1000.0,
                                                                                            0, 1)]
    vals = [r["cumulative_mae"] for r in rows[:3]]
    mean, lo, hi = groups[0]["cumulative_mae"]
    assert math.isclose(mean, sum(vals) / 3) and (lo, hi) == (min(vals), max(vals))
    md = aggregate.render_markdown(rows, "t")
    assert md.count("\n| r") == 1 + 7 and "## Over seeds" in md and "diverged (" in md
    assert "| 1000 " not in md.split("## Over seeds")[1]  # a single run is not a group over seeds

    from crosscurv.experiments.sweep.figures import agreement_figure

    fig = agreement_figure(rows, tmp_path / "fig.png")
    assert fig is not None and os.path.getsize(fig) > 1000
    assert agreement_figure(rows[-1:], tmp_path / "none.png") is None


def test_docs_grid_example_parses(tmp_path):
    """The grid file shown in docs/studies.md is a valid grid of the size it says."""
    text = open(os.path.join(REPO, "docs", "studies.md"), encoding="utf-8").read()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "grid.toml").write_text(block)
    spec = spec_from_toml(str(tmp_path / "grid.toml"))
    assert spec.size == 2 * 1 * 3 * 5 * 2 and spec.iters == 200 and spec.seed == (0, 1, 2, 3, 4)
