"""The harness copies what a step returns: steps that return live parameters or views of them.

Training code on an ``nn.Module`` often ends in ``return model.state_dict()``,
``dict(model.named_parameters())`` or ``{n: p.detach() ...}``: tensors that alias the model's
parameters, overwritten by the next call. A plain JC SGD step returning each form must be identified
as JC.
"""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric import task_from_module
from crosscurv.numeric.validation import as_user_step, identify_step

FAST = dict(seeds=(0, 1), n_etas=4)


def _model_and_task():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4,
                                                                                        2)).double()
    x = torch.randn(6, 3, dtype=torch.float64)
    y = torch.randn(6, 2, dtype=torch.float64)
    task = task_from_module(model, lambda forward, p: ((forward(x) - y) ** 2).mean(),
                            [("hidden", r"^0\."), ("out", r"^2\.")], name="mlp2")
    return model, task, x, y


RETURNS = {
    "state_dict": lambda m: m.state_dict(),
    "named_parameters": lambda m: dict(m.named_parameters()),
    "detached_views": lambda m: {n: p.detach() for n, p in m.named_parameters()},
    "data": lambda m: {n: p.data for n, p in m.named_parameters()},
}


@pytest.mark.parametrize("form", sorted(RETURNS))
def test_jc_sgd_step_returning_aliases_is_jc(form):
    model, task, x, y = _model_and_task()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)

    def step(params, lr):
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(params[n])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        return RETURNS[form](model)

    r = identify_step(as_user_step((task, step, "jc")), **FAST)
    assert r.deterministic and r.ok and r.matches == ["jc"], r.text()


def test_returned_copy_is_not_an_alias():
    model, task, _, _ = _model_and_task()
    from crosscurv.numeric.validation import check_step_output

    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = check_step_output(model.state_dict(), params, 0.1)
    with torch.no_grad():
        model[0].weight.add_(1.0)
    assert torch.equal(out["0.weight"], params["0.weight"])
