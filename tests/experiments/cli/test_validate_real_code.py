"""``crosscurv validate-step`` on real training code, as a user runs it: the CLI in a subprocess.

peft LoRA on a random T5 with its default sdpa attention (no second derivatives: curvature by
differences of gradients, with and without ``--eta0``), FedAlt with inferred and given per-block
step factors, factory files importing their neighbours, and the one-line answer for a task name.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EX = os.path.join(REPO, "examples")
FAST = ["--seeds", "0", "--n-etas", "3"]


def _cli(*argv, cwd=REPO, timeout=300):
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "validate-step", *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


# two CLI runs that import transformers and peft (about 10 s each at load 1, 40 s at load 6)
@pytest.mark.slow
def test_peft_t5_alternating_and_stale_gradient():
    code, out, err = _cli(f"{EX}/peft_lora_t5.py:alternating", *FAST)
    assert code == 0, err
    assert "verdict: matches gs:B,A (the declared pattern)" in out
    route = [ln for ln in out.splitlines() if ln.startswith("curvature route:")]
    assert len(route) == 1 and "central differences of gradients" in route[
        0] and "flash_attention" in route[0]
    code, out, err = _cli(f"{EX}/peft_lora_t5.py:stale_alternating", "--eta0", "0.002", "--no-fit",
                          *FAST)
    assert code == 1, err
    assert "verdict: matches jc; it does NOT perform the declared pattern gs:B,A" in out, err


# one CLI run importing transformers and peft, with the fit by differences of gradients
@pytest.mark.slow
def test_eta0_without_no_fit_on_sdpa_t5():
    code, out, err = _cli(f"{EX}/peft_lora_t5.py:alternating", "--eta0", "0.002", *FAST)
    assert code == 0 and "verdict: matches gs:B,A" in out and "internal error" not in err, err
    assert "second-order term fitted" in out


@pytest.mark.slow  # three CLI runs (about 5 s each at load 1, 50 s in all at load 13)
def test_fedalt_factors_inferred_and_given():
    code, out, err = _cli(f"{EX}/federated.py:fedalt", *FAST)
    assert code == 0, err
    assert "step factors (inferred from the first-order term): personal=2, shared=1" in out
    assert ("verdict: matches gs:personal,shared with step factors personal=2, shared=1 "
            "(the declared pattern)") in out
    code, out, _ = _cli(f"{EX}/federated.py:fedalt", "--block-lr", "personal=1", "--no-fit", *FAST)
    assert code == 1 and "step factors (given by --block-lr): personal=1, shared=1" in out
    assert "differs from every candidate at first order" in out
    code, _, err = _cli(f"{EX}/federated.py:fedalt", "--block-lr", "other=2", *FAST)
    assert code == 2 and err.strip().startswith(
        "crosscurv: error:") and "unknown block 'other'" in err


def test_factory_file_imports_its_neighbours(tmp_path):
    sub = tmp_path / "project"
    sub.mkdir()
    (sub / "mysteps_helpers.py").write_text(
        "import torch\nfrom crosscurv import Task\ndef task():\n    p = {'a': torch.tensor([1.0, "
        "-0.5], dtype=torch.float64), 'b': torch.tensor([0.3], dtype=torch.float64)}\n    return "
        "Task(p, lambda q: (q['a'] ** 2).sum() * (1 + q['b'] ** 2).sum(), {'A': ['a'], 'B': "
        "['b']})\n"
    )
    (sub / "mysteps.py").write_text(
        "from mysteps_helpers import task\nfrom crosscurv.numeric.steps import scheme_step\n"
        "def factory():\n    t = task()\n    return t, lambda p, lr: scheme_step(t, p, 'jc', "
        "lr), 'jc'\n"
    )
    code, out, err = _cli(f"{sub}/mysteps.py:factory", *FAST, cwd=str(tmp_path))
    assert code == 0 and "matches jc (the declared pattern)" in out, err


def test_builtin_task_name_says_what_validate_step_takes():
    code, out, err = _cli("mlp")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and out == ""
    assert lines[0].startswith("crosscurv: error: validate-step takes a step factory")
    assert "module:factory or path/to/file.py:factory" in lines[0] and "(task, step" in lines[0]
