"""Initial parameters and data subsets are the same bits on every x86-64 CPU.

PyTorch's float32 samplers dispatch on the instruction set (``normal_`` is vectorised with AVX2,
``uniform_`` scales in float64 with AVX2 and in float32 without), so before the inputs were drawn
through :mod:`crosscurv.numeric.portable_random` a CPU without AVX2 rebuilt other initial parameters
and ``crosscurv report --check`` failed at k = 0. Here the kernels of other CPUs are emulated by
environment variables (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``) in subprocesses, and every built-in
task (smoke and default presets), golden case, test case and test problem must give the same digests
under each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: emulated CPUs: no AVX2 (scalar kernels, MKL's compatible code path), and AVX2
EMULATIONS = {
    "no-avx2": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
}

DIGESTS = r'''
import hashlib, json, warnings
warnings.filterwarnings("ignore")
import torch
from crosscurv.numeric.protocol import theta_digest
from crosscurv.experiments.tasks import build_task
from crosscurv.experiments.conformance.golden import CASES, build_case, case_task
from crosscurv.experiments.problems.networks import (
    tanh_mlp_problem, bilinear_problem, mnist_mlp_problem)
from crosscurv.experiments.problems.quartic import quartic_problem
from crosscurv.experiments.tasks.data import load_mnist, load_cifar10, load_sst2
from tests.numeric import cases

def h(t):
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()

out = {}
for name in ("mlp", "fl", "lora"):
    for preset in ("smoke", "default"):
        task, _ = build_task(name, preset, seed=1 if preset == "smoke" else 0)
        out[f"task {name} {preset}"] = [theta_digest(task.params), task.info.get("frozen_sha256"),
                                        task.info["init"]]
for name in CASES:
    out[f"golden {name}"] = theta_digest(case_task(build_case(name)).params)
for name, build in {**cases.CASES, "relu_mlp": cases.relu_mlp}.items():
    for dtype in (torch.float32, torch.float64):
        task = build(dtype=dtype)
        task = task[0] if isinstance(task, tuple) else task  # task_from_module: (task, ...)
        out[f"case {name} {dtype}"] = theta_digest(task.params)
out["problem tanh_mlp"] = theta_digest(tanh_mlp_problem(1).task.params)
out["problem bilinear"] = theta_digest(bilinear_problem(1).task.params)
out["problem quartic"] = theta_digest(quartic_problem(1, (2, 3)).task.params)
out["problem mnist_mlp"] = theta_digest(
    mnist_mlp_problem(1, examples=8, widths=(784, 16, 10), scale_iters=1).task.params)
out["data mnist seed 3"] = h(load_mnist(20, seed=3).x)
out["data cifar seed 2"] = h(load_cifar10(6, seed=2).x)
out["data sst2 seed 1"] = hashlib.sha256(
    json.dumps(load_sst2(8, seed=1).sentences).encode()).hexdigest()
print(json.dumps(out))
'''


def _digests(env_extra: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-c", DIGESTS], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# two interpreters that each build the default-preset T5 and ResNet (about 30 s together)
@pytest.mark.slow
def test_every_built_in_input_is_the_same_under_every_emulated_cpu():
    got = {name: _digests(env) for name, env in EMULATIONS.items()}
    a, b = got["no-avx2"], got["avx2"]
    assert a.keys() == b.keys() and len(a) > 20
    differ = [k for k in a if a[k] != b[k]]
    assert not differ, differ


def test_the_summarys_theta0_is_the_same_under_every_emulated_cpu(tmp_path):
    """What a user compares across machines: ``theta0_sha256`` in the summary of ``crosscurv run``.
    """
    seen = {}
    for name, extra in EMULATIONS.items():
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   **extra)
        out = str(tmp_path / name)
        proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--preset", "smoke",
                               "--iters", "1", "--out",
                               out], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        settings = json.load(open(os.path.join(out, "summary.json")))["settings"]
        seen[name] = (settings["theta0_sha256"], settings["task_info"]["init"])
    assert len(set(seen.values())) == 1, seen


def test_portable_draws_are_the_float64_draws_rounded_and_uniform_matches_torch():
    import torch

    from crosscurv.numeric.portable_random import (portable_default_init_, portable_normal_,
                                                   portable_uniform_)

    t = torch.empty(50, 40)
    portable_normal_(t, 0.5, 2.0, torch.Generator().manual_seed(7))
    ref = (torch.randn(50, 40, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
           * 2.0 + 0.5).float()
    assert torch.equal(t, ref)
    u = torch.empty(3000)
    portable_uniform_(u, -0.19, 0.19, torch.Generator().manual_seed(1))
    assert -0.19 <= u.min().item() and u.max().item() < 0.19 and abs(u.mean().item()) < 0.01
    # the same generator consumption as torch's own layer initialisation: the parameters equal
    # torch's draws up to the last float32 bit
    torch.manual_seed(3)
    lin = torch.nn.Linear(30, 20)
    mine = torch.nn.Linear(30, 20)
    torch.manual_seed(3)  # the same draws again
    portable_default_init_(mine)
    for p, q in zip(lin.parameters(), mine.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=torch.finfo(torch.float32).eps / 30 ** 0.5)
