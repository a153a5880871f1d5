"""Models without second derivatives still get a verdict: curvature by central differences of
gradients.

Hugging Face T5 with its default ``sdpa`` attention runs PyTorch's CPU flash attention kernel, which
has neither forward-mode nor double-backward derivatives; a custom ``torch.autograd.Function`` with
a once-differentiable backward has no double backward. The step size and the freshness fit then take
their curvature products from central differences of gradients
(:class:`crosscurv.numeric.hvp_differences.CurvatureRoute`).
"""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric import Task, task_from_module
from crosscurv.numeric.hvp_differences import CurvatureRoute
from crosscurv.numeric.steps import scheme_step
from crosscurv.numeric.validation import as_user_step, identify_step

FAST = dict(seeds=(0, 1), n_etas=4)


class Cube(torch.autograd.Function):
    """``x^3`` with a backward that autograd cannot differentiate again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


def _quartic(cube):
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(4, 5, generator=gen, dtype=torch.float64) / 2
    params = {"a": torch.randn(2, generator=gen, dtype=torch.float64),
              "b": torch.randn(3, generator=gen, dtype=torch.float64)}

    def loss(p):
        z = W @ torch.cat([p["a"], p["b"]])
        return 0.25 * (z * cube(z)).sum() + 0.5 * (z**2).sum()

    return Task(params, loss, {"A": ["a"], "B": ["b"]}, name="quartic-cube")


def test_central_differences_match_the_dense_hessian():
    task = _quartic(Cube.apply)
    ref = _quartic(lambda z: z**3)  # the same function with autograd's own derivatives
    p = {k: v.clone() for k, v in task.params.items()}
    flat = torch.cat([p["a"], p["b"]])
    H = torch.autograd.functional.hessian(lambda x: ref.loss({"a": x[:2], "b": x[2:]}), flat)
    route = CurvatureRoute(task.loss)
    gen = torch.Generator().manual_seed(1)
    vs = [{"a": torch.randn(2, generator=gen, dtype=torch.float64), "b": torch.randn(3,
        generator=gen, dtype=torch.float64)}
          for _ in range(3)]
    hvs = route.batch(p, vs)
    assert route.name == "central-differences" and "disagrees" in route.reason
    for v, hv in zip(vs, hvs):
        dense = H @ torch.cat([v["a"], v["b"]])
        err = float((torch.cat([hv["a"], hv["b"]]) - dense).norm() / dense.norm())
        assert err < 1e-8
        assert err <= max(route.max_rel_error, 1e-15)  # the stated bound holds
    assert route.max_rel_error < 1e-5


def test_custom_function_without_double_backward_gets_a_verdict():
    task = _quartic(Cube.apply)

    def gs_step(params, lr):
        return scheme_step(task, params, "gs:B,A", lr)

    r = identify_step(as_user_step((task, gs_step, "gs:B,A")), **FAST)
    assert r.ok and r.matches == ["gs:B,A"], r.text()
    assert r.route is not None and r.route.name == "central-differences"
    assert "curvature route: central differences of gradients" in r.text()
    # A sees the fresh B
    assert r.fit is not None and r.fit.coef[0][1] == pytest.approx(1.0, abs=1e-3)


def tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=16, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_decoder_layers=1,
                   num_heads=2, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).double()
    gen = torch.Generator().manual_seed(0)
    batch = dict(input_ids=torch.randint(1, 16, (2, 5), generator=gen), labels=torch.randint(1, 16,
        (2, 3), generator=gen))
    return model, batch


def test_t5_with_sdpa_attention_gets_a_verdict():
    model, batch = tiny_t5()
    assert model.config._attn_implementation == "sdpa"
    task = task_from_module(model, lambda forward, p: forward(**batch).loss,
                            [("encoder", r"^encoder\.|^shared\."), ("decoder",
                            r"^decoder\.|^lm_head\.")], name="t5-tiny")

    def alternating(params, lr):  # encoder, then a fresh forward pass for the decoder
        p = dict(params)
        for blk in ("encoder", "decoder"):
            q = {k: v.detach().requires_grad_(k in task.blocks[blk]) for k, v in p.items()}
            ks = task.blocks[blk]
            gs = torch.autograd.grad(task.loss(q), [q[k] for k in ks])
            p.update({k: p[k] - lr * g for k, g in zip(ks, gs)})
        return p

    r = identify_step(as_user_step((task, alternating, "gs")), seeds=(0,), n_etas=3)
    assert r.ok and r.matches == ["gs:encoder,decoder"], r.text()
    assert r.route.name == "central-differences" and "flash_attention" in r.route.reason


def test_compiled_module_gets_a_verdict():
    """``torch.compile`` (dynamo and AOTAutograd, here with the compiler-free ``aot_eager`` backend)
    has no double backward through its compiled graph: the step still gets its verdict, by gradient
    differences."""
    from torch import nn

    torch.manual_seed(0)
    model = torch.compile(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double(),
                          backend="aot_eager")
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randn(8, 2, dtype=torch.float64)
    task = task_from_module(model, lambda forward, p: torch.nn.functional.mse_loss(forward(x), y),
                            [("A", r"0\."), ("B", r"2\.")], name="compiled")

    def gs_step(params, lr):
        return scheme_step(task, params, "gs:A,B", lr)

    r = identify_step(as_user_step((task, gs_step, "gs:A,B")), **FAST)
    assert r.ok and r.matches == ["gs:A,B"], r.text()
    assert r.route is not None and r.route.name == "central-differences"
