"""validate-step on a step written in NumPy: loss, gradient and step as NumPy callables, curvature
from differences of the gradient (no autodiff)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from crosscurv.numeric.validation import (ValidationInputError, as_user_step, identify_step,
                                          numpy_user_step)

FACTORY = textwrap.dedent("""
    import numpy as np

    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))
    A = A @ A.T / 5 + np.eye(5)
    W = rng.standard_normal((2, 5))
    b = rng.standard_normal(5)
    SLICES = {"x1": slice(0, 2), "x2": slice(2, 4), "x3": slice(4, 5)}

    def cat(p):
        return np.concatenate([p[n] for n in SLICES])

    def split(x):
        return {n: x[s].copy() for n, s in SLICES.items()}

    def loss(p):  # a quadratic plus a quartic ridge: the Hessian varies
        x = cat(p)
        return 0.5 * x @ A @ x - b @ x + 0.25 * np.sum((W @ x) ** 4)

    def grad(p):
        x = cat(p)
        return split(A @ x - b + W.T @ (W @ x) ** 3)

    def gs_step(p, lr):  # the in-place sweep: each block sees the blocks updated before it
        for n in SLICES:
            p[n] = p[n] - lr * grad(p)[n]
        return p

    def stale_step(p, lr):  # one gradient for the whole sweep: JC, whatever it is called
        g = grad(p)
        return {n: p[n] - lr * g[n] for n in p}

    def gs():
        return {"params": split(0.5 * rng.standard_normal(5)), "loss": loss, "grad": grad,
        "step": gs_step,
                "pattern": "gs"}

    def stale():
        return dict(gs(), step=stale_step)

    def float32():
        return dict(gs(), params={n: v.astype(np.float32) for n, v in gs()["params"].items()})
""")


@pytest.fixture()
def factory(tmp_path):
    path = tmp_path / "numpy_steps.py"
    path.write_text(FACTORY)
    return str(path)


def _cli(spec):
    return subprocess.run(
        [sys.executable, "-m", "crosscurv", "validate-step", spec],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_numpy_steps_are_identified(factory):
    proc = _cli(factory + ":gs")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "because the loss is NumPy callables" in proc.stdout
    assert "verdict: matches gs:x1,x2,x3 (the declared pattern)" in proc.stdout
    proc = _cli(factory + ":stale")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "verdict: matches jc; it does NOT perform the declared pattern gs:x1,x2,x3" in proc.stdout
    )
    proc = _cli(factory + ":float32")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not float64" in proc.stderr


def test_the_fit_reads_the_pattern_through_differences_of_the_gradient():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((4, 4))
    A = A @ A.T + np.eye(4)

    def grad(p):
        x = np.concatenate([p["u"], p["v"]])
        g = A @ x
        return {"u": g[:2], "v": g[2:]}

    def step(p, lr):  # v sees the fresh u: the partial pattern v<-u (= gs:u,v for two blocks)
        u = p["u"] - lr * grad(p)["u"]
        return {"u": u, "v": p["v"] - lr * grad({"u": u, "v": p["v"]})["v"]}

    user = as_user_step(
        {
            "params": {"u": rng.standard_normal(2), "v": rng.standard_normal(2)},
            "loss": lambda p: (
                0.5 * np.concatenate([p["u"], p["v"]]) @ A @ np.concatenate([p["u"], p["v"]])
            ),
            "grad": grad,
            "step": step,
        }
    )
    report = identify_step(user, seeds=[0], n_etas=3)
    assert report.ok, report.text()
    assert "verdict: matches gs:u,v" in report.text() or "verdict: matches v<-u" in report.text(), (
        report.text()
    )
    with pytest.raises(ValidationInputError, match="not float64"):
        as_user_step(
            {"params": {"u": np.zeros(2, np.float32)}, "loss": None, "grad": None, "step": None}
        )


def test_the_numpy_bridge_reads_any_layout():
    """The NumPy loss bridge (a custom autograd rule) gives the user's value and gradient whatever
    the layout of its operands: non-contiguous, expanded and channels-last float64 tensors; float32
    parameters are refused."""
    import torch

    def loss(p):
        return float(sum((v ** 2 * np.arange(1, v.size + 1).reshape(v.shape)).sum()
                         for v in p.values()))

    def grad(p):
        return {n: 2 * v * np.arange(1, v.size + 1).reshape(v.shape) for n, v in p.items()}

    def step(p, lr):
        g = grad(p)
        return {n: p[n] - lr * g[n] for n in p}

    shape = (2, 3, 4, 5)
    base = {"w": np.random.default_rng(0).standard_normal(shape)}
    task = as_user_step(numpy_user_step(base, loss, grad, step), name="bridge").task
    dense = torch.as_tensor(base["w"])
    layouts = {
        "contiguous": dense,
        "non-contiguous": dense.transpose(0, 3).contiguous().transpose(0, 3),
        "expanded": torch.as_tensor(base["w"][:1]).expand(shape),
        "channels-last": dense.contiguous(memory_format=torch.channels_last),
    }
    for what, w in layouts.items():
        w = w.clone() if what == "expanded" else w
        w = w.detach().requires_grad_(True)
        value = task.loss({"w": w})
        (g,) = torch.autograd.grad(value, [w])
        w_np = w.detach().numpy()
        assert float(value.detach()) == pytest.approx(loss({"w": w_np}), rel=1e-15), what
        assert torch.equal(g, torch.as_tensor(grad({"w": w_np})["w"])), what
    with pytest.raises(ValidationInputError, match="float64"):
        numpy_user_step({"w": base["w"].astype(np.float32)}, loss, grad, step)
