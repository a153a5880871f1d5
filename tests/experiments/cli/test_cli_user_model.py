"""``crosscurv run`` on a user's own model as a new user runs it: a factory file with its defaults.

The factory here is a small matrix completion (blocks ``U`` and ``V``) whose default dtype is
float64 and which imports a neighbouring module when it runs, not when its file loads; the command
runs in a subprocess with the default thread count and dtype, as a user types it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from crosscurv.numeric.records import read_records, read_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

NEIGHBOUR = """
import torch


def observed(seed, dtype, device):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(12, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 8, generator=g,
                                                                            dtype=torch.float64)
    mask = torch.rand(12, 8, generator=g, dtype=torch.float64) < 0.5
    return m.to(dtype=dtype, device=device), mask.to(device)
"""

FACTORY = """
import torch

import crosscurv


def mf(dtype=torch.float64, device="cpu", seed=0):
    from mf_data import observed  # the folder must be importable while the factory runs

    m, mask = observed(seed, dtype, device)
    g = torch.Generator().manual_seed(seed + 1)
    params = {name: (0.3 * torch.randn(rows, 2, generator=g, dtype=torch.float64)).to(dtype=dtype,
                                                                                       device=device)
              for name, rows in (("U", 12), ("V", 8))}
    x = torch.ones(3, dtype=dtype)  # the factory's own dtype: float64 unless told otherwise

    def loss(p):
        r = (p["U"] @ p["V"].T - m)[mask]
        return 0.5 * (r * r).mean() + 0 * x.sum()

    blocks = {"U": ["U"], "V": ["V"]}
    return crosscurv.Task(params, loss, blocks, name="mf"), {"lr": 2.0, "iters": 6}
"""


@pytest.fixture()
def user_model(tmp_path):
    """A factory file and its neighbour in their own folder (not the current directory)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "mf_data.py").write_text(textwrap.dedent(NEIGHBOUR))
    (folder / "mf_model.py").write_text(textwrap.dedent(FACTORY))
    return str(folder / "mf_model.py")


def _crosscurv(*argv, cwd):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "CROSSCURV_DEFAULT_THREADS")
    }
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "crosscurv", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_factory_defaults_and_neighbour_import_hold_on_the_command_line(tmp_path, user_model):
    out = str(tmp_path / "runs" / "mf")
    proc = _crosscurv("run", f"{user_model}:mf", "--out", out, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    s = read_summary(os.path.join(out, "summary.json"))
    assert s["settings"]["dtype"] == "float64"  # the factory's default, not float32
    assert s["settings"]["threads"] == 1 and s["settings"]["threads_source"] == "default"
    rows = read_records(os.path.join(out, "records.csv"))
    assert len(rows) == 6
    # the answer, in the user's block names, with both final losses
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("(pattern gs {V<-U}, lr 2.0, float64, cpu)"), proc.stdout
    last = rows[-1]
    lower = (
        "S" if last["gap"] < -last["gap_err"] else "JC" if last["gap"] > last["gap_err"] else None
    )
    assert (
        lower is not None
    )  # this problem decides: S (GS) is lower by far more than the error bound
    assert lines[2] == (
        f"at K = 6: L_JC = {last['loss_jc']:.6g}, L_S = {last['loss_s']:.6g} (S = gs): {lower} is "
        f"lower by {abs(last['gap']):.3g} ({100 * abs(last['gap']) / last['loss_jc']:.3g}% of L_JC)"
    )
    assert lines[3].startswith(("no change of winner", "winner changed"))
    assert any(
        line.startswith("recursive ") and "%" in line for line in lines
    )  # Correct per estimate
    # the figure beside the records, a whole PNG
    with open(os.path.join(out, "figure.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert lines[-1].endswith(f"figure {os.path.join(out, 'figure.png')}")


def test_load_task_passes_only_the_settings_the_user_gave(tmp_path):
    """A setting left open (None) reaches a factory only where it declares no default of its own."""
    import torch

    from crosscurv.experiments.tasks.loading import load_task

    path = tmp_path / "kinds.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import crosscurv

        def _task(dtype, seen):
            p = {"a": torch.ones(2, dtype=dtype), "b": torch.ones(1, dtype=dtype)}
            blocks = {"A": ["a"], "B": ["b"]}
            return crosscurv.Task(p, lambda q: (q["a"] ** 2).sum() * q["b"].sum(), blocks,
                                  info={"seen": seen})

        def defaulted(dtype=torch.float64, device=None):
            return _task(dtype, [str(dtype), str(device)])

        def required(dtype, seed):
            return _task(dtype or torch.float32, [str(dtype)])

        def anything(**kwargs):
            return _task(kwargs.get("dtype", torch.float64), sorted(kwargs))
    """)
    )
    task, _ = load_task(f"{path}:defaulted")
    assert task.dtype == torch.float64 and task.info["seen"] == ["torch.float64", "None"]
    task, _ = load_task(f"{path}:defaulted", dtype=torch.float32)
    assert task.dtype == torch.float32 and task.info["seen"] == ["torch.float32", "None"]
    task, _ = load_task(f"{path}:required")  # no default of its own: told None, as before
    assert task.dtype == torch.float32 and task.info["seen"] == ["None"]
    task, _ = load_task(f"{path}:anything")
    assert task.dtype == torch.float64 and task.info["seen"] == ["seed"]


def test_divergence_ends_with_the_last_finite_state_not_metrics(tmp_path, user_model, capsys):
    from crosscurv.experiments.cli import main

    out = str(tmp_path / "diverged")
    rc = main(["run", f"{user_model}:mf", "--lr", "1e6", "--out", out])
    cap = capsys.readouterr()
    assert rc == 3
    rows = read_records(os.path.join(out, "records.csv"))
    assert rows and all(r["loss_s"] == r["loss_s"] for r in rows)
    k = rows[-1]["k"]
    assert f"last finite state: k = {k}, L_JC = {rows[-1]['loss_jc']:.6g}" in cap.out
    for word in ("Correct", "MAE", "Max. AE", "100.0%", "is lower by"):
        assert word not in cap.out, cap.out
    assert cap.err.strip().splitlines()[-1].startswith(f"crosscurv: diverged at k={k + 1}")


def test_resumed_run_answers_and_draws_over_all_its_records(tmp_path, user_model, capsys):
    from crosscurv.experiments.cli import main

    out = str(tmp_path / "run")
    assert main(["run", f"{user_model}:mf", "--iters", "3", "--out", out, "--no-figure"]) == 0
    assert not os.path.exists(os.path.join(out, "figure.png"))
    capsys.readouterr()
    assert main(["run", f"{user_model}:mf", "--iters", "5", "--out", out, "--resume"]) == 0
    text = capsys.readouterr().out
    assert "at K = 5: L_JC = " in text and os.path.getsize(os.path.join(out, "figure.png")) > 1000
    assert not [f for f in os.listdir(out) if f.endswith(".part")]
