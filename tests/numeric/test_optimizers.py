"""crosscurv.numeric.optimizers: spec parsing, torch.optim-exact updates, the scheme step with
optimizer state."""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric.hvp import block_grad, grad
from crosscurv.numeric.optimizers import (OptimizerError, OptimizerSpec, OptimizerState,
                                          block_factors, direction, optimizer_scheme_step,
                                          parse_block_lr, parse_optimizer)
from crosscurv.numeric.steps import scheme_step_with_grads
from tests.numeric.cases import bilinear_lora, tanh_mlp
from crosscurv.theory.patterns import gauss_seidel, jacobi, parse_pattern

SPECS = ["sgd", "momentum:0.9", "adam", "adam:0.8,0.99,1e-6"]


# -- parsing -----------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("sgd", OptimizerSpec()),
    (" SGD ", OptimizerSpec()),
    ("momentum:0.9", OptimizerSpec("momentum", beta=0.9)),
    ("momentum:0", OptimizerSpec("momentum", beta=0.0)),
    ("adam", OptimizerSpec("adam")),
    ("adam:0.8,0.99,1e-6", OptimizerSpec("adam", betas=(0.8, 0.99), eps=1e-6)),
])
def test_parse_optimizer(text, expected):
    spec = parse_optimizer(text)
    assert spec == expected
    assert parse_optimizer(spec.describe()) == spec


@pytest.mark.parametrize("text, needle", [
    ("rmsprop", "unknown optimizer"),
    ("momentum", "needs its coefficient"),
    ("momentum:", "needs its coefficient"),
    ("momentum:1", "0 <= BETA < 1"),
    ("momentum:-0.1", "0 <= BETA < 1"),
    ("momentum:abc", "must be a number"),
    ("momentum:nan", "must be finite"),
    ("adam:0.9,0.999", "three values"),
    ("adam:0.9,1.5,1e-8", "B2"),
    ("adam:0.9,0.999,-1", "EPS must be >= 0"),
    ("sgd:0.1", "takes no arguments"),
])
def test_bad_optimizer_spec_is_one_clear_line(text, needle):
    with pytest.raises(OptimizerError, match=needle) as info:
        parse_optimizer(text)
    assert "\n" not in str(info.value)


def test_parse_block_lr():
    names = ["A", "B", "C"]
    assert parse_block_lr("B=4", names) == {"B": 4.0}
    assert parse_block_lr(" A=0.5 , C=16 ", names) == {"A": 0.5, "C": 16.0}
    assert parse_block_lr("2=3", names) == {"B": 3.0}
    assert parse_block_lr("", names) == {}


@pytest.mark.parametrize("text, needle", [
    ("D=2", "unknown block 'D'"),
    ("B", "NAME=FACTOR"),
    ("B=", "NAME=FACTOR"),
    ("B=x", "must be a number"),
    ("B=0", "> 0"),
    ("B=-1", "> 0"),
    ("B=inf", "> 0"),
    ("B=2,B=3", "twice"),
    ("4=2", "unknown block '4'"),
])
def test_bad_block_lr_is_one_clear_line(text, needle):
    with pytest.raises(OptimizerError, match=needle) as info:
        parse_block_lr(text, ["A", "B", "C"])
    assert "\n" not in str(info.value)


def test_block_factors_default_one():
    task = bilinear_lora()
    assert block_factors(task, None) == [1.0, 1.0]
    assert block_factors(task, f"{task.block_names[1]}=4") == [1.0, 4.0]


# -- against torch.optim -------------------------------------------------------
def _assert_matches_torch(spec, p, ref):
    """Bit for bit for momentum and Adam (same operations); plain SGD keeps the suite's ``theta - lr
    g`` (what every existing record uses), which differs from torch's fused ``add_(g, alpha=-lr)``
    by round-off only."""
    for k in p:
        if spec.name == "sgd":
            torch.testing.assert_close(p[k], ref[k], rtol=1e-12, atol=1e-14)
        else:
            assert torch.equal(p[k], ref[k]), (k, (p[k] - ref[k]).abs().max())


def _torch_optimizer(spec, params, lr):
    if spec.name == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=False)
    if spec.name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=spec.beta, foreach=False)
    return torch.optim.Adam(params, lr=lr, betas=spec.betas, eps=spec.eps, foreach=False)


def _torch_run(task, spec, lr, factors, steps, order=None):
    """torch.optim on leaf copies: JC (order None, one optimizer, all groups) or an in-place GS
    sweep.
    """
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in task.params.items()}
    groups = [[leaves[k] for k in task.blocks[b]] for b in task.block_names]
    if order is None:
        opt = _torch_optimizer(spec, [{"params": g, "lr": lr * f} for g, f in zip(groups,
                                                                                  factors)], lr)
        for _ in range(steps):
            opt.zero_grad()
            task.loss(leaves).backward()
            opt.step()
    else:
        opts = [_torch_optimizer(spec, groups[i], lr * factors[i]) for i in range(task.n_blocks)]
        for _ in range(steps):
            for i in order:
                for o in opts:
                    o.zero_grad()
                task.loss(leaves).backward()
                opts[i].step()
    return {k: v.detach() for k, v in leaves.items()}


@pytest.mark.parametrize("spec_text", SPECS)
@pytest.mark.parametrize("factors", [None, "2=4"])
def test_jacobi_steps_match_torch_optim(spec_text, factors):
    task = tanh_mlp()
    spec = parse_optimizer(spec_text)
    f = block_factors(task, factors)
    lr = 0.05
    p, state = dict(task.params), OptimizerState()
    for _ in range(4):
        p, state, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), lr, spec, state, f)
    ref = _torch_run(task, spec, lr, f, 4)
    _assert_matches_torch(spec, p, ref)
    assert state.step == 4


@pytest.mark.parametrize("spec_text", SPECS)
def test_gauss_seidel_steps_match_an_in_place_torch_sweep(spec_text):
    task = tanh_mlp(seed=1)
    spec = parse_optimizer(spec_text)
    f = block_factors(task, "1=0.5,4=8")
    order = (2, 0, 3, 1)
    lr = 0.03
    p, state = dict(task.params), OptimizerState()
    for _ in range(3):
        p, state, _ = optimizer_scheme_step(task, p, gauss_seidel(task.n_blocks, order), lr, spec,
                                            state, f)
    ref = _torch_run(task, spec, lr, f, 3, order=order)
    _assert_matches_torch(spec, p, ref)


def test_plain_sgd_is_the_existing_step_exactly():
    task = tanh_mlp()
    for pat in ("jc", "gs", "2<-1,4<-3"):
        pattern = parse_pattern(pat, task.n_blocks)
        new, state, used = optimizer_scheme_step(task, task.params, pattern, 0.1, "sgd")
        ref, ref_used = scheme_step_with_grads(task, task.params, pattern, 0.1)
        for k in new:
            assert torch.equal(new[k], ref[k]) and torch.equal(used[k], ref_used[k])


@pytest.mark.parametrize("spec_text", ["momentum:0.7", "adam"])
def test_partial_pattern_uses_fresh_gradients_for_move_and_state(spec_text):
    """Block 2 sees fresh block 1 only; its state is updated with that fresh gradient."""
    task = tanh_mlp()
    spec = parse_optimizer(spec_text)
    pattern = parse_pattern("2<-1", task.n_blocks)
    lr = 0.05
    _, s1, _ = optimizer_scheme_step(task, task.params, jacobi(task.n_blocks), lr, spec)
    p1 = {k: v - 0.01 for k, v in task.params.items()}
    new, s2, used = optimizer_scheme_step(task, p1, pattern, lr, spec, s1)
    keys = [list(task.blocks[b]) for b in task.block_names]
    state = dict(p1)
    for k in keys[0]:
        state[k] = new[k]
    g2 = block_grad(task.loss, state, keys[1])
    _, g = grad(task.loss, p1)
    for k in keys[1]:
        assert torch.equal(used[k], g2[k])
    for b in (0, 2, 3):
        for k in keys[b]:
            assert torch.equal(used[k], g[k])
    # the new state equals one torch-style update of s1 with the gradients used
    buf = "momentum_buffer" if spec.name == "momentum" else "exp_avg"
    for k in keys[1]:
        if spec.name == "momentum":
            assert torch.equal(s2.buffers[buf][k], s1.buffers[buf][k].clone().mul_(spec.beta).add_(
                g2[k]))
        else:
            assert torch.equal(s2.buffers[buf][k], s1.buffers[buf][k].clone().lerp_(g2[k], 1
                - spec.betas[0]))


@pytest.mark.parametrize("spec_text", SPECS)
def test_direction_is_the_step(spec_text):
    """theta - lr phi(g, s) equals the JC step (to round-off)."""
    task = bilinear_lora()
    spec = parse_optimizer(spec_text)
    _, s1, _ = optimizer_scheme_step(task, task.params, jacobi(2), 0.1, spec)
    new, _, g = optimizer_scheme_step(task, task.params, jacobi(2), 0.1, spec, s1)
    phi = direction(spec, s1, g)
    for k in new:
        torch.testing.assert_close(task.params[k] - 0.1 * phi[k], new[k], rtol=1e-13, atol=1e-15)


def test_state_round_trip():
    task = bilinear_lora()
    _, s, _ = optimizer_scheme_step(task, task.params, jacobi(2), 0.1, "adam")
    s2 = OptimizerState.from_state_dict(s.state_dict())
    assert s2.step == 1 and set(s2.buffers) == {"exp_avg", "exp_avg_sq"}
    with pytest.raises(OptimizerError):
        OptimizerState.from_state_dict({"nope": 1})


def test_every_optimizer_is_one_module_with_the_rule_interface():
    """Each entry of RULES is a module with the names of optimizers/sgd.py; its specs print back to
    themselves."""
    from crosscurv.numeric.optimizers import RULES, STATE_BUFFERS

    assert list(RULES) == ["sgd", "momentum", "adam"]
    for name, rule in RULES.items():
        assert rule.__name__ == f"crosscurv.numeric.optimizers.{name}"
        for attr in ("USAGE", "BUFFERS", "parse", "describe", "settings", "update", "direction",
                     "jacobian_apply", "tangent_coefficients", "tangent_apply",
                     "BOUND_SCALES_FORCING", "bound_majorant"):
            assert hasattr(rule, attr), (name, attr)
        spec = parse_optimizer(rule.USAGE.split("[")[0].replace("BETA", "0.5"))
        assert spec.name == name and parse_optimizer(spec.describe()) == spec
        assert STATE_BUFFERS[name] == rule.BUFFERS and spec.stateful == bool(rule.BUFFERS)
        assert spec.to_dict()["spec"] == spec.describe()
