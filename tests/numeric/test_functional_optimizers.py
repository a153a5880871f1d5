"""The functional optimizer (crosscurv.numeric.optimizers.functional) against torch.optim in
float64.

Momentum and Adam, with and without weight decay, are compared bit for bit (the rule modules repeat
torch.optim's operations); plain SGD to round-off (the suite's ``theta - lr g``). Per-tensor
clipping, which torch.optim does not have, is checked against its equation; the direction's
derivative against the rule's closed-form Jacobian.
"""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric.optimizers import (OptimizerError, OptimizerState, clip_tensor,
                                          direction_jacobian_apply, functional_optimizer)

F64 = torch.float64
SETTINGS = [
    ("sgd", {}),
    ("sgd", {"weight_decay": 1e-2}),
    ("sgd", {"momentum": 0.9}),
    ("sgd", {"momentum": 0.9, "weight_decay": 1e-2}),
    ("adam", {}),
    ("adam", {"weight_decay": 1e-2}),
    ("adam", {"betas": (0.8, 0.99), "eps": 1e-6}),
]


def _torch_opt(name, params, lr, kw):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, **kw)
    return torch.optim.Adam(params, lr=lr, **kw)


def _assert_same(name, kw, ours, ref):
    if name == "sgd" and not kw.get("momentum"):
        # theta - lr g vs add_(g, alpha=-lr)
        torch.testing.assert_close(ours, ref, rtol=1e-13, atol=1e-15)
    else:
        assert torch.equal(ours, ref), (ours - ref).abs().max()


def _problem(seed=0, steps=5):
    gen = torch.Generator().manual_seed(seed)
    w0 = {"a": torch.randn(4, 3, generator=gen, dtype=F64), "b": torch.randn(5, generator=gen,
                                                                             dtype=F64)}
    grads = [{k: torch.randn(v.shape, generator=gen, dtype=F64) for k, v in w0.items()}
             for _ in range(steps)]
    return w0, grads


@pytest.mark.parametrize("name,kw", SETTINGS)
def test_joint_steps_match_torch_optim(name, kw):
    w0, grads = _problem()
    leaves = {k: torch.nn.Parameter(v.clone()) for k, v in w0.items()}
    topt = _torch_opt(name, list(leaves.values()), 0.1, kw)
    ours = functional_optimizer(name, 0.1, **kw)
    p, st = dict(w0), ours.init_state()
    for g in grads:
        for k, leaf in leaves.items():
            leaf.grad = g[k].clone()
        topt.step()
        p, st = ours.update(p, g, st)
    for k in p:
        _assert_same(name, kw, p[k], leaves[k].detach())
    assert st["step"] == {"a": len(grads), "b": len(grads)}


@pytest.mark.parametrize("name,kw", SETTINGS)
def test_block_by_block_steps_keep_torch_optims_per_parameter_state(name, kw):
    """Updating ``b`` twice as often as ``a`` in separate calls is torch.optim stepping with only
    the moved parameter's gradient set: each parameter keeps its own step count (Adam's bias
    correction) and buffers."""
    w0, grads = _problem(seed=1, steps=6)
    leaves = {k: torch.nn.Parameter(v.clone()) for k, v in w0.items()}
    topt = _torch_opt(name, list(leaves.values()), 0.05, kw)
    ours = functional_optimizer(name, 0.05, **kw)
    p, st = dict(w0), ours.init_state()
    for i, g in enumerate(grads):
        keys = ["b"] if i % 2 else ["a", "b"]
        for k, leaf in leaves.items():
            leaf.grad = g[k].clone() if k in keys else None
        topt.step()
        p, st = ours.update(p, {k: g[k] for k in keys}, st)
    for k in p:
        _assert_same(name, kw, p[k], leaves[k].detach())
    assert st["step"] == {"a": 3, "b": 6}


def test_update_leaves_unnamed_parameters_and_inputs_untouched():
    w0, grads = _problem()
    copy = {k: v.clone() for k, v in w0.items()}
    opt = functional_optimizer("adam", 0.1, weight_decay=0.1)
    st0 = opt.init_state()
    new, st = opt.update(w0, {"a": grads[0]["a"]}, st0)
    assert new["b"] is w0["b"]
    assert all(torch.equal(w0[k], copy[k]) for k in w0)
    assert st0 == {"step": {}, "buffers": {}} and set(st["buffers"]["exp_avg"]) == {"a"}


def test_clip_is_the_papers_projection():
    """``Pi_tau(g) = g min(1, tau / ||g||_F)``, ``Pi_tau(0) = 0``."""
    g = torch.tensor([3.0, 4.0], dtype=F64)
    torch.testing.assert_close(clip_tensor(g, 1.0), g / 5, rtol=1e-15, atol=0)
    assert torch.equal(clip_tensor(g, 10.0), g)
    assert torch.equal(clip_tensor(torch.zeros(2, dtype=F64), 1.0), torch.zeros(2, dtype=F64))
    assert clip_tensor(g, None) is g


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_clipping_then_weight_decay_is_the_step(momentum):
    """The rule receives ``g' = Pi_tau(g) + wd theta``: ``theta - lr g'`` (SGD), the heavy ball on
    ``g'``."""
    w0, grads = _problem()
    lr, wd, tau = 0.1, 0.05, 0.5
    opt = functional_optimizer("sgd", lr, momentum=momentum, weight_decay=wd, clip=tau)
    p, st, buf = dict(w0), opt.init_state(), {}
    ref = dict(w0)
    for g in grads:
        p, st = opt.update(p, g, st)
        for k in ref:
            gk = g[k] * min(1.0, tau / float(torch.linalg.vector_norm(g[k]))) + wd * ref[k]
            buf[k] = momentum * buf[k] + gk if k in buf else gk
            ref[k] = ref[k] - lr * buf[k]
    for k in p:
        torch.testing.assert_close(p[k], ref[k], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name,kw", SETTINGS + [("sgd", {"clip": 0.5, "momentum": 0.5})])
def test_direction_is_the_step(name, kw):
    """``theta - lr d(g)`` is the update, from a state with history."""
    w0, grads = _problem(seed=2)
    opt = functional_optimizer(name, 0.1, **kw)
    _, st = opt.update(w0, grads[0], opt.init_state())
    new, _ = opt.update(w0, grads[1], st)
    d = opt.direction(w0, grads[1], st)
    for k in new:
        torch.testing.assert_close(w0[k] - 0.1 * d[k], new[k], rtol=1e-13, atol=1e-15)


def test_adam_direction_derivative_is_the_rules_jacobian_also_at_zero_gradients():
    """``torch.func.jvp`` of the direction equals :func:`direction_jacobian_apply` (the closed-form
    diagonal ``J``), finite where a gradient entry and its second moment are 0 (Adam's kink)."""
    w0, grads = _problem(seed=3)
    g = {k: v.clone() for k, v in grads[1].items()}
    g["a"][0] = 0.0
    opt = functional_optimizer("adam", 0.1)
    first = {k: v.clone() for k, v in grads[0].items()}
    first["a"][0] = 0.0
    _, st = opt.update(w0, first, opt.init_state())
    v = {k: torch.randn(t.shape, generator=torch.Generator().manual_seed(4), dtype=F64) for k,
         t in g.items()}
    _, jv = torch.func.jvp(lambda gg: opt.direction(w0, gg, st), (g,), (v,))
    state = OptimizerState(1, st["buffers"])
    ref = direction_jacobian_apply(opt.spec, state, g, v)
    for k in g:
        assert torch.isfinite(jv[k]).all()
        torch.testing.assert_close(jv[k], ref[k], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("args,kw,needle", [
    (("rmsprop", 0.1), {}, "unknown optimizer"),
    (("sgd", 0.0), {}, "lr"),
    (("sgd", 0.1), {"momentum": 1.0}, "momentum"),
    (("sgd", 0.1), {"weight_decay": -1.0}, "weight_decay"),
    (("adam", 0.1), {"clip": 0.0}, "clip"),
])
def test_bad_settings_are_one_clear_error(args, kw, needle):
    with pytest.raises(OptimizerError, match=needle):
        functional_optimizer(*args, **kw)
