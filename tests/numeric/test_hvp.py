"""HVPs and gradients against dense float64 ``torch.func`` references (1e-10 relative)."""

import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.hvp import (HVPError, block_grad, grad, grad_and_hvp, hvp, hvp_batch,
                                   resolve_method, tune_hvp)
from tests.numeric.cases import CASES, dense_gradient, dense_hessian, random_direction, relerr

TOL = 1e-10


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    task = CASES[request.param]()
    return task, dense_hessian(task)


def test_grad_matches_dense(case):
    task, _ = case
    value, g = grad(task.loss, task.params)
    assert value.dim() == 0
    assert float(value) == pytest.approx(float(task.loss(task.params)), rel=1e-14)
    assert relerr(tree.flatten(g), dense_gradient(task)) < TOL
    assert all(not t.requires_grad for t in g.values())


def test_block_grad_is_the_block_of_the_full_gradient(case):
    task, _ = case
    _, g = grad(task.loss, task.params)
    for name in task.block_names:
        keys = task.blocks[name]
        gb = block_grad(task.loss, task.params, keys)
        assert sorted(gb) == sorted(keys)
        for k in keys:
            assert relerr(gb[k], g[k]) < TOL


@pytest.mark.parametrize("method", ["forward", "reverse", "rof", "auto"])
def test_hvp_matches_dense_hessian(case, method):
    task, H = case
    for seed in (1, 2):
        v = random_direction(task.params, seed)
        hv = hvp(task.loss, task.params, v, method)
        assert set(hv) == set(task.params)
        assert relerr(tree.flatten(hv), H @ tree.flatten(v)) < TOL


@pytest.mark.parametrize("method", ["forward", "reverse", "rof", "auto"])
def test_hvp_batch_matches_dense_hessian(case, method):
    task, H = case
    vs = [random_direction(task.params, s) for s in (3, 4, 5)]
    out = hvp_batch(task.loss, task.params, vs, method)
    assert len(out) == 3
    for v, hv in zip(vs, out):
        assert relerr(tree.flatten(hv), H @ tree.flatten(v)) < TOL
    assert hvp_batch(task.loss, task.params, [], method) == []


@pytest.mark.parametrize("method", ["forward", "reverse", "rof", "auto"])
def test_grad_and_hvp_in_one_pass(case, method):
    task, H = case
    v = random_direction(task.params, 9)
    value, g, hv = grad_and_hvp(task.loss, task.params, v, method)
    assert float(value) == pytest.approx(float(task.loss(task.params)), rel=1e-14)
    assert relerr(tree.flatten(g), dense_gradient(task)) < TOL
    assert relerr(tree.flatten(hv), H @ tree.flatten(v)) < TOL


def test_hvp_batch_chunked(case):
    task, H = case
    vs = [random_direction(task.params, s) for s in range(5)]
    out = hvp_batch(task.loss, task.params, vs, "forward", chunk_size=2)
    for v, hv in zip(vs, out):
        assert relerr(tree.flatten(hv), H @ tree.flatten(v)) < TOL


# -- fallbacks -------------------------------------------------------------------
class _CubeNoForwardMode(torch.autograd.Function):
    """Old-style Function: double backward works, torch.func transforms refuse it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


class _NoBackward(torch.autograd.Function):
    """The identity with a forward-mode rule and a backward that refuses."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for this kernel is not implemented")

    @staticmethod
    def jvp(ctx, xt):
        return xt


class _CubeNoDoubleBackward(torch.autograd.Function):
    """torch.func-ready cube whose backward has no derivative by autograd (forward mode only)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _NoBackward.apply(3 * x**2 * g)

    @staticmethod
    def jvp(ctx, xt):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * xt


class _CubeNoVmap(torch.autograd.Function):
    """torch.func-ready Function with a jvp but no vmap rule: single HVPs work, vmap does not."""

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g

    @staticmethod
    def jvp(ctx, xt):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * xt


def _cube_setup():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    v = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float64)
    return {"x": x}, {"x": v}, 6 * x * v  # H = diag(6 x)


def test_auto_is_double_backward_else_forward_over_reverse_and_remembers_nothing():
    p, v, expected = _cube_setup()

    def no_forward(q):
        return _CubeNoForwardMode.apply(q["x"]).sum()

    def no_double_backward(q):  # forward mode works, double backward does not
        return _CubeNoDoubleBackward.apply(q["x"]).sum()

    with pytest.raises(Exception):
        hvp(no_forward, p, v, "forward")
    with pytest.raises(Exception):
        hvp(no_double_backward, p, v, "reverse")
    assert resolve_method(no_forward, p) == "reverse"
    assert resolve_method(no_double_backward, p) == "forward"
    assert resolve_method(no_forward, p, "rof") == "rof"
    for loss in (no_forward, no_double_backward):
        assert relerr(hvp(loss, p, v, "auto")["x"], expected) < TOL
        outs = hvp_batch(loss, p, [v, tree.scale(v, -2.0)], "auto")
        assert relerr(outs[1]["x"], -2 * expected) < TOL
        _, g, hv = grad_and_hvp(loss, p, v, "auto")
        assert relerr(g["x"], 3 * p["x"] ** 2) < TOL and relerr(hv["x"], expected) < TOL
    import crosscurv.numeric.hvp as module

    # no hidden memory
    assert not [n for n in vars(module) if n in ("_auto_choice", "_no_vmap", "hvp_choice")]


def test_batch_falls_back_to_loop_when_vmap_fails():
    p, v, expected = _cube_setup()

    def loss(q):
        return _CubeNoVmap.apply(q["x"]).sum()

    assert relerr(hvp(loss, p, v, "forward")["x"], expected) < TOL
    with pytest.raises(Exception):  # the model really refuses vmap
        torch.func.vmap(lambda t: torch.func.jvp(torch.func.grad(loss), (p,), (t,))[1])(
            tree.stack([v, v])
        )
    for _ in range(2):  # the same answer every time (nothing remembered)
        outs = hvp_batch(loss, p, [v, tree.scale(v, 3.0)], "forward")
        assert relerr(outs[0]["x"], expected) < TOL
        assert relerr(outs[1]["x"], 3 * expected) < TOL


def test_bad_requests_raise_one_line_errors():
    p, v, _ = _cube_setup()

    def loss(q):
        return (q["x"] ** 3).sum()

    with pytest.raises(HVPError, match="unknown HVP method"):
        hvp(loss, p, v, "sideways")
    with pytest.raises(HVPError, match="missing"):
        hvp(loss, p, {"y": v["x"]})
    with pytest.raises(HVPError, match="shape"):
        hvp(loss, p, {"x": torch.ones(4, dtype=torch.float64)})
    with pytest.raises(HVPError, match="unknown parameter"):
        block_grad(loss, p, ["nope"])


def test_parameters_the_loss_ignores_get_zero_products():
    p = {"a": torch.tensor([1.0, 2.0], dtype=torch.float64), "unused": torch.ones(3,
        dtype=torch.float64)}
    v = {"a": torch.tensor([1.0, -1.0], dtype=torch.float64), "unused": torch.ones(3,
        dtype=torch.float64)}

    def loss(q):
        return (q["a"] ** 4).sum()

    for method in ("forward", "reverse", "rof"):
        hv = hvp(loss, p, v, method)
        assert torch.equal(hv["unused"], torch.zeros(3, dtype=torch.float64))
        assert relerr(hv["a"], 12 * p["a"] ** 2 * v["a"]) < TOL
    _, g = grad(loss, p)
    assert torch.equal(g["unused"], torch.zeros(3, dtype=torch.float64))


def test_float32_products_are_float32_and_close():
    task = CASES["tanh_mlp"](dtype=torch.float32)
    v = random_direction(task.params, 7)
    H = dense_hessian(task)
    hv = hvp(task.loss, task.params, v)
    assert all(t.dtype == torch.float32 for t in hv.values())
    assert H.dtype == torch.float32
    assert relerr(tree.flatten(hv), H @ tree.flatten(v)) < 1e-5


def test_tune_hvp_names_a_working_winner_without_side_effects():
    p, v, expected = _cube_setup()

    def loss(q):  # only double backward works for this loss
        return _CubeNoForwardMode.apply(q["x"]).sum()

    out = tune_hvp(loss, p, v)
    assert out["best"] == "reverse"
    assert out["seconds"]["forward"] is None and out["seconds"]["rof"] is None
    assert out["seconds"]["reverse"] > 0
    assert relerr(hvp(loss, p, v, out["best"])["x"], expected) < TOL

    task = CASES["tiny_conv"]()
    out = tune_hvp(task.loss, task.params)
    assert out["best"] in ("forward", "reverse", "rof")
    H = dense_hessian(task)
    w = random_direction(task.params, 4)
    assert relerr(tree.flatten(hvp(task.loss, task.params, w)), H @ tree.flatten(w)) < TOL
    with pytest.raises(HVPError, match="no HVP method"):
        tune_hvp(loss, p, v, methods=("forward",))
