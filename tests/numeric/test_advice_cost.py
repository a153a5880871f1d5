"""Advise priced against trying: plain training's measured steps and the sentence advise prints."""

from __future__ import annotations

import torch

from crosscurv.numeric import Task
from crosscurv.numeric.advice_cost import plain_losses, plain_seconds, trying_note
from crosscurv.numeric.steps import scheme_step
from crosscurv.theory.patterns import as_pattern


def _task(n):
    g = torch.Generator().manual_seed(0)
    A = torch.randn(2 * n, 2 * n, generator=g, dtype=torch.float64)
    A = A @ A.T / (2 * n) + torch.eye(2 * n, dtype=torch.float64)
    x = torch.randn(2 * n, generator=g, dtype=torch.float64)
    names = [f"x{i}" for i in range(n)]

    def loss(p):
        t = torch.cat([p[k] for k in names])
        return 0.5 * t @ A @ t + (t**4).sum() / 10

    params = {k: x[2 * i : 2 * i + 2].clone() for i, k in enumerate(names)}
    return Task(params, loss, {k: [k] for k in names}, name=f"q{n}")


def test_plain_losses_are_the_scheme_steps():
    task, lr = _task(3), 0.1
    got = plain_losses(task, "gs:3,1,2", lr, 3)
    theta = dict(task.params)
    for k in range(4):
        assert got[k] == float(task.loss(theta))
        theta = scheme_step(task, theta, as_pattern("gs:3,1,2", 3), lr)


def test_trying_note_only_when_trying_is_cheaper_and_two_blocks_say_what_advise_adds():
    task = _task(2)
    steps = plain_seconds(task, ["jc", "gs"], 0.1, steps=2)
    assert set(steps) == {"jc", "gs"} and all(v > 0 for v in steps.values())
    assert trying_note(task, ["jc", "gs", "gs:2,1"], 0.1, 5, 0.0) == ""
    note = trying_note(task, ["jc", "gs", "gs:2,1"], 0.1, 5, 1e6)
    assert "trying them is cheaper" in note and "c_12" in note
    assert "c_12" not in trying_note(_task(3), ["jc", "gs"], 0.1, 5, 1e6)
