"""The pytest plugin as an outside project uses it: ``pytest`` in a subprocess, green and red.

* ``examples/plugin_user`` (its own implementation, one decorated test and a property test with
  crosscurv's strategies) passes: one test per check, and the plugin's header line;
* a project whose "GS" step is really JC gets one failing test per violated check, each with its
  evidence (the verdict of the step identification, the observed order 2 of a remainder that must
  be of order 3), and the checks that need a function it lacks are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pytest(cwd, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_example_project_is_green():
    # the example's property test draws at random; a fixed seed keeps make test deterministic
    proc = _pytest(os.path.join(ROOT, "examples", "plugin_user"), "--hypothesis-seed=0")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "crosscurv.testing: 7 check test(s) of 7 checks" in out
    assert "8 passed" in out


WRONG = '''
"""A "GS" step that takes every block's gradient at the old point: really JC."""
import torch


def step(task, params, pattern, lr):
    x = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
    g = torch.autograd.grad(task.loss(x), list(x.values()))
    return {n: params[n] - lr * gn for n, gn in zip(x, g)}
'''

TEST = """
import stale_gs
from crosscurv.testing import parametrize_with_checks


@parametrize_with_checks(stale_gs, checks=["step_is_scheme", "one_step_remainder",
                                           "gs_order_invariance", "recursion_remainder"])
def test_mine(implementation, check):
    check(implementation)
"""


def test_a_wrong_project_is_red_with_one_failing_test_per_check(tmp_path):
    (tmp_path / "stale_gs.py").write_text(textwrap.dedent(WRONG))
    (tmp_path / "test_mine.py").write_text(textwrap.dedent(TEST))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = _pytest(tmp_path, "-rfs")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "3 failed, 1 skipped" in out
    for check in ("step_is_scheme", "one_step_remainder", "gs_order_invariance"):
        assert f"FAILED test_mine.py::test_mine[stale_gs-{check}]" in out
    assert "stale_gs has no protocol: recursion_remainder needs it" in out
    assert "verdict: matches jc; it does NOT perform the declared pattern gs" in out
    assert "L_S - L_JC - eta^2 C_S: expected order 3" in out and "least-squares order 2.0" in out
    assert "the two orders give the same loss to round-off" in out


def test_the_entry_point_is_seen_from_the_repository_root():
    # python -m pytest from the root puts the root on sys.path: an egg-info there (setup.py writes
    # it to build/) would shadow the installed distribution's pytest11 entry point
    code = (
        "import importlib.metadata as m; "
        "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'crosscurv'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "['crosscurv.testing.plugin']", (
        f"{proc.stdout}{proc.stderr}: a stale crosscurv.egg-info in {ROOT}? "
        "(make install removes it)"
    )
