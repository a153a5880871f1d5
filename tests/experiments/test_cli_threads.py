"""The command line waits passively in OpenMP unless the user chose a policy."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = (
    "import os, sys\n"
    "from experiments import cli\n"
    "cli.main([])\n"
    "print('PROBE', os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n"
)


def _probe(policy):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1].split()[1:]


def test_passive_wait_is_the_default_and_set_before_torch_loads():
    policy, torch_loaded = _probe(None)
    assert policy == "PASSIVE"
    assert torch_loaded == "False"  # set before libgomp reads it


def test_a_users_wait_policy_is_kept():
    assert _probe("ACTIVE")[0] == "ACTIVE"
