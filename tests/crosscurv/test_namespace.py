"""One import namespace: everything is under ``crosscurv``, and nothing of ours takes a generic
name.

The layers live in the repository folders ``theory/``, ``numeric/`` and ``experiments/`` and install
as ``crosscurv.theory``, ``crosscurv.numeric`` and ``crosscurv.experiments`` (setup.py), so a user's
own package called ``experiments`` (or ``numeric``, ``theory``) is theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CROSSCURV = str(Path(sys.executable).parent / "crosscurv")


def _python(code: str, cwd, **env):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_generic_names_are_free(tmp_path):
    """Outside the repository, ``import experiments`` / ``numeric`` / ``theory`` find nothing of
    ours.
    """
    for name in ("experiments", "numeric", "theory"):
        proc = _python(f"import {name}", tmp_path)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, (name, proc.stderr)


def test_the_api_is_re_exported_lazily(tmp_path):
    """``import crosscurv`` is cheap (no torch); a re-exported name imports its layer on first use.
    """
    code = textwrap.dedent("""
        import sys, crosscurv
        assert "torch" not in sys.modules
        assert crosscurv.parse_pattern("gs:2,1", 2).pairs == crosscurv.gauss_seidel(2, order=[1, \
0]).pairs
        assert "torch" not in sys.modules
        from crosscurv.numeric import Task
        assert crosscurv.Task is Task and "Task" in dir(crosscurv)
        try:
            crosscurv.no_such_name
        except AttributeError as e:
            print("ok", e)
    """)
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok") and "no_such_name" in proc.stdout


def test_every_exported_name_resolves():
    import crosscurv

    for name in crosscurv.__all__:
        assert getattr(crosscurv, name) is not None, name


def test_a_users_own_experiments_package_is_a_task_spec(tmp_path):
    """``crosscurv run experiments.mystep:make`` loads the user's ``experiments/mystep.py``."""
    pkg = tmp_path / "experiments"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mystep.py").write_text(textwrap.dedent("""
        import torch
        from crosscurv import Task

        def make(seed=0, dtype=None):
            p = {"x": torch.tensor([1.0, -0.5], dtype=torch.float64), "y": torch.tensor([0.3], \
dtype=torch.float64)}
            loss = lambda q: (q["x"] ** 2).sum() + (q["x"].sum() * q["y"]).sum() + \
q["y"].pow(4).sum()
            return Task(p, loss, {"bx": ["x"], "by": ["y"]}, name="mine"), {"lr": 0.05, "iters": 3}
    """))
    proc = subprocess.run([CROSSCURV, "run", "experiments.mystep:make", "--out", str(tmp_path
        / "run"), "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["settings"]["task"] == "experiments.mystep:make"
