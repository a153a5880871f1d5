"""``crosscurv advise --search`` as a user runs it: the front in JSON, two blocks, one-line errors.
"""

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

def make(n=3, seed=0):
    n = int(n)
    g = torch.Generator().manual_seed(seed)
    d = 2 * n
    A = torch.randn(d, d, generator=g, dtype=torch.float64)
    A = A @ A.T / d + torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    x = torch.randn(d, generator=g, dtype=torch.float64)
    names = [f"x{i}" for i in range(n)]
    p = {nm: x[2 * i:2 * i + 2].clone() for i, nm in enumerate(names)}

    def loss(q):
        t = torch.cat([q[nm] for nm in names])
        return 0.5 * t @ A @ t - b @ t + (t ** 4).sum() / 10

    return Task(p, loss, {f"b{i}": [nm] for i, nm in enumerate(names)}, name=f"quartic{n}"), {"lr":
    0.05, "iters": 5}

def make2():
    return make(2)

def make6():
    return make(6)
"""


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "crosscurv", "advise", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "zoo3.py"
    path.write_text(textwrap.dedent(FACTORY))
    return str(path)


def test_search_all_json_front(factory, tmp_path):
    out = tmp_path / "s"
    r = _cli(f"{factory}:make", "--search", "all", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["space"] == "all" and obj["n_patterns"] == 25 and obj["iters"] == 5
    front = obj["front"]
    assert front[0]["best"] == "jc" and [f["stages"] for f in front] == [1, 2, 3]
    for f in front[1:]:
        assert f["estimate"] <= (
            f["runner_up_estimate"] if f["runner_up_estimate"] is not None else f["estimate"]
        )
        if f["on_front"]:
            assert f["error"] is not None and f["certified"] in (True, False)
    assert any(f["certified"] is not None for f in front[1:])
    assert len(obj["per_iteration"]) == 5
    assert json.loads((out / "search.json").read_text())["front"] == front


def test_two_blocks_says_trying_is_what_to_compare_with(factory, tmp_path):
    r = _cli(f"{factory}:make2", "--search", "stages", "--out", str(tmp_path / "s2"))
    assert r.returncode == 0, r.stderr
    assert "three schemes" in r.stdout and "| stages | best pattern" in r.stdout


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--search", "stages:0"], "D >= 1"),
        (["--search", "orders", "--patterns", "jc;gs"], "--patterns"),
        (["--final-only"], "--final-only needs --search"),
        (["--search", "orders", "--final-only", "--resume"], "nothing to resume"),
    ],
)
def test_bad_search_input_is_one_line_exit_2(factory, tmp_path, extra, msg):
    r = _cli(f"{factory}:make", *extra, "--out", str(tmp_path / "bad"))
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and msg in lines[0], r.stderr


def test_python_api_with_the_cli_defaults_gives_the_cli_answer(factory, tmp_path):
    """``crosscurv.search_patterns`` with the task's settings (the CLI's defaults: its ``lr`` and
    ``iters``, certification on) names the front the CLI subprocess names, with its numbers."""
    import crosscurv

    r = _cli(f"{factory}:make", "--search", "stages", "--json", "--out", str(tmp_path / "cli"))
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)
    task, settings = crosscurv.load_task(f"{factory}:make")
    res = crosscurv.search_patterns(task, settings["lr"], settings["iters"], "stages")
    assert isinstance(res, crosscurv.SearchResult)
    assert isinstance(res.space, crosscurv.PatternSpace) and res.space.spec == cli["space"]
    api = res.to_json()
    assert api["n_patterns"] == cli["n_patterns"] == len(crosscurv.parse_space("stages", 3))
    assert [f["best"] for f in api["front"]] == [f["best"] for f in cli["front"]]
    assert [f["runner_up"] for f in api["front"]] == [f["runner_up"] for f in cli["front"]]
    assert [f["certified"] for f in api["front"]] == [f["certified"] for f in cli["front"]]
    for a, c in zip(api["front"], cli["front"]):
        assert a["estimate"] == pytest.approx(c["estimate"], rel=1e-9, abs=1e-15)
    assert api["recommendation"].split(" The search took")[0] == (
        cli["recommendation"].split(" The search took")[0]
    )


def test_final_only_search_names_the_same_front_at_K(factory, tmp_path):
    """``--final-only`` (the adjoint sweep) names the full search's front, with its numbers once
    certified (the certification's predictions of the named patterns at every ``k``)."""
    full = _cli(f"{factory}:make", "--search", "stages", "--json", "--out", str(tmp_path / "a"))
    fast = _cli(f"{factory}:make", "--search", "stages", "--json", "--final-only", "--out",
                str(tmp_path / "b"))
    assert full.returncode == 0 and fast.returncode == 0, fast.stderr
    a, b = json.loads(full.stdout), json.loads(fast.stdout)
    assert [f["best"] for f in b["front"]] == [f["best"] for f in a["front"]]
    assert [f["certified"] for f in b["front"]] == [f["certified"] for f in a["front"]]
    for x, y in zip(b["front"], a["front"]):
        assert x["estimate"] == pytest.approx(y["estimate"], rel=1e-9, abs=1e-15)
    assert [p["k"] for p in b["per_iteration"]] == [1, 2, 3, 4, 5]
    assert b["final_only"] is True and a["final_only"] is False


@pytest.mark.slow
def test_search_resumes_from_its_folder(factory, tmp_path):
    """``--resume`` continues the saved JC run to the larger ``--iters``: the same answer as one
    uninterrupted run."""
    run = str(tmp_path / "r")
    first = _cli(f"{factory}:make", "--search", "orders", "--iters", "3", "--no-certify", "--out",
                 run)
    assert first.returncode == 0, first.stderr
    args = (f"{factory}:make", "--search", "orders", "--iters", "6", "--no-certify", "--json")
    resumed = _cli(*args, "--resume", "--out", run)
    assert resumed.returncode == 0, resumed.stderr
    whole = _cli(*args, "--out", str(tmp_path / "w"))
    a, b = json.loads(resumed.stdout), json.loads(whole.stdout)
    assert a["iters"] == 6 and a["front"] == b["front"] and a["per_iteration"] == b["per_iteration"]
    bad = _cli(*args, "--resume", "--out", str(tmp_path / "none"))
    assert bad.returncode == 2 and "nothing to resume" in bad.stderr
    assert len([ln for ln in bad.stderr.splitlines() if ln.strip()]) == 1, bad.stderr


def test_the_front_table_names_each_arrangement_once(factory, tmp_path):
    """Six blocks: ``all`` searches the stage arrangements, then single-pair descent; the table's
    arrangement column holds the stages of a stage arrangement and ``-`` for any other pattern,
    never the pattern's name again."""
    r = _cli(f"{factory}:make6", "--search", "all", "--out", str(tmp_path / "s6"))
    assert r.returncode == 0, r.stderr
    rows = [ln.split(" | ") for ln in r.stdout.splitlines() if ln.startswith("| ")][1:]
    assert rows and rows[0][1] == "jc" and rows[0][2] == "{1,2,3,4,5,6}"
    for row in rows[1:]:
        best, arrangement = row[1], row[2]
        assert arrangement != best
        assert arrangement == "-" or arrangement.startswith("{") and "} > {" in arrangement
