"""Shared fixtures of the report tests."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """A float32 ``mlp`` smoke run with K = 3, made by ``crosscurv run`` (default thread count)."""
    out = str(tmp_path_factory.mktemp("check") / "mlp")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--preset", "smoke",
                           "--iters", "3", "--device", "cpu", "--out", out], cwd=REPO, env=env,
                          capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out
