"""Steps with an optimizer state passed in: heavy ball and Adam written with torch.optim.

The step ``step(params, lr, state)`` loads the given buffers into the torch optimizer's state and
steps; the harness compares it with the optimizer-aware scheme steps
(:func:`crosscurv.numeric.optimizers.optimizer_scheme_step`).
"""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric import task_from_module
from crosscurv.numeric.validation import as_user_step, identify_step

FAST = dict(seeds=(0, 1), n_etas=4)


def _setup():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4,
                                                                                        2)).double()
    x, y = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    task = task_from_module(model, lambda forward, p: ((forward(x) - y) ** 2).mean(),
                            [("hidden", r"^0\."), ("out", r"^2\.")], name="mlp2")
    named = dict(model.named_parameters())

    def load(params, state, opts):
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(params[n])
                p.grad = None
        for opt in opts:
            for p in [q for g in opt.param_groups for q in g["params"]]:
                n = next(k for k, v in named.items() if v is p)
                if "momentum_buffer" in state:
                    opt.state[p]["momentum_buffer"] = state["momentum_buffer"][n].clone()
                else:
                    opt.state[p] = {"step": torch.tensor(float(state["step"])),
                                    "exp_avg": state["exp_avg"][n].clone(), "exp_avg_sq": state[
                                    "exp_avg_sq"][n].clone()}

    def loss():
        return ((model(x) - y) ** 2).mean()

    return model, task, named, load, loss


def _make(kind, order):
    model, task, named, load, loss = _setup()
    groups = {"hidden": list(model[0].parameters()), "out": list(model[2].parameters())}

    def opt(ps, lr):
        return torch.optim.SGD(ps, lr=lr, momentum=0.9) if kind == "momentum" else torch.optim.Adam(
            ps, lr=lr)

    def step(params, lr, state):
        if order == "jc":
            opts = [opt(list(model.parameters()), lr)]
            load(params, state, opts)
            loss().backward()
            opts[0].step()
        else:  # sequential: each block with a fresh forward pass
            opts = [opt(groups[b], lr) for b in order]
            load(params, state, opts)
            for o in opts:
                o.zero_grad()
                loss().backward()
                o.step()
        return {n: p.detach().clone() for n, p in named.items()}

    return task, step


@pytest.mark.parametrize("kind, spec", [("momentum", "momentum:0.9"), ("adam", "adam")])
def test_optimizer_steps_with_state_are_identified(kind, spec):
    task, step = _make(kind, "jc")
    r = identify_step(as_user_step((task, step, "jc")), optimizer=spec, **FAST)
    assert r.ok and r.matches == ["jc"], r.text()
    task, step = _make(kind, ("out", "hidden"))
    r = identify_step(as_user_step((task, step, "gs:out,hidden")), optimizer=spec, **FAST)
    assert r.ok and r.matches == ["gs:out,hidden"], r.text()
    assert r.result("jc").order == pytest.approx(2.0, abs=0.2)


def test_the_state_matters():
    """Checked against the wrong optimizer (Adam), the heavy-ball step matches no scheme."""
    task, step = _make("momentum", "jc")
    r = identify_step(as_user_step((task, step, "jc")), optimizer="adam", **FAST)
    assert not r.ok and r.matches == []
