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


def test_a_run_records_its_thread_count_and_refuses_to_resume_with_another(tmp_path, capsys):
    """Float32 reductions depend on the number of intra-op threads, so summary.json records it and a run
    resumed with another count (whose records would not equal an uninterrupted run's) is refused."""
    import json

    import torch

    from experiments.cli import main

    before = torch.get_num_threads()
    out = str(tmp_path / "r")
    try:
        torch.set_num_threads(1)
        assert main(["run", "mlp", "--preset", "smoke", "--iters", "2", "--device", "cpu", "--out", out]) == 0
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
            assert json.load(fh)["settings"]["threads"] == 1
        torch.set_num_threads(2)
        capsys.readouterr()
        assert main(["run", "mlp", "--preset", "smoke", "--iters", "3", "--device", "cpu", "--out", out,
                     "--resume"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "threads" in err[0] and "differs" in err[0]
    finally:
        torch.set_num_threads(before)
