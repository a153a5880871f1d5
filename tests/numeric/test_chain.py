"""crosscurv.numeric.chain: a chained loss gives scheme steps the same numbers bit for bit, with
fewer stage passes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from crosscurv.experiments.tasks.models.mlp import MLP, mlp_blocks, mlp_stages
from crosscurv.experiments.tasks import build_task
from crosscurv.numeric import Task
from crosscurv.numeric.chain import Chain, PrefixCache
from crosscurv.numeric.hvp import block_grad, grad
from crosscurv.numeric.steps import block_keys, check_pattern, scheme_step_with_grads
from crosscurv.numeric.task import TaskError
from tests.properties.strategies import acyclic_patterns


def relu_mlp_task(widths, seed: int = 0, examples: int = 12, chained: bool = True) -> Task:
    """The built-in MLP's construction at small widths, float32 (what users run), with or without
    its chain."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLP(widths)
    x = torch.randn(examples, widths[0], generator=gen)
    y = torch.randint(0, widths[-1], (examples,), generator=gen)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)

    def loss(p):
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    chain = Chain(mlp_stages(model.n_layers), x, lambda z: F.cross_entropy(z,
                                                                           y)) if chained else None
    return Task(params, loss, mlp_blocks(model.n_layers), "relu_mlp", {}, "gs", chain)


def _unchained(task: Task) -> Task:
    return Task(task.params, task.loss, task.blocks, task.name, task.info, task.default_pattern)


def _equal(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


@settings(max_examples=25, deadline=None)
@given(widths=st.lists(st.integers(1, 9), min_size=3, max_size=6), seed=st.integers(0, 10**6),
       data=st.data())
def test_scheme_step_with_a_chain_is_the_step_without_it_bit_for_bit(widths, seed, data):
    task = relu_mlp_task(widths, seed)
    pattern = data.draw(acyclic_patterns(task.n_blocks, nonempty=False))
    g = grad(task.loss, task.params)[1]
    for given_g in (None, g):
        new_c, used_c = scheme_step_with_grads(task, task.params, pattern, 0.3,
                                               grad_at_params=given_g)
        new_p, used_p = scheme_step_with_grads(_unchained(task), task.params, pattern, 0.3,
                                               grad_at_params=given_g)
        assert _equal(new_c, new_p) and _equal(used_c, used_p)


def test_the_builtin_mlp_chain_is_its_loss_bit_for_bit():
    task, _ = build_task("mlp", "smoke")
    assert task.chain is not None
    for p in (task.params, {k: v + 0.01 * torch.randn_like(v) for k, v in task.params.items()}):
        assert torch.equal(task.chain.loss(p), task.loss(p))


def test_prefix_cache_gradients_at_points_in_any_order_are_block_grad():
    """Back and forth between points that change early, late or no stages: always the plain block
    gradient."""
    task = relu_mlp_task([5, 4, 4, 3, 3], seed=3)
    keys = block_keys(task)
    cache = PrefixCache(task.chain, keys)
    base = dict(task.params)
    moved = {k: v + 0.1 for k, v in base.items()}
    points = [base, {**base, **{k: moved[k] for k in keys[0]}}, {**base, **{k: moved[k]
                                                                            for k in keys[2]}},
              base, moved, base]
    for point in points:
        for wrt in (keys[1], keys[3], keys[0] + keys[2]):
            assert _equal(cache.block_grad(point, wrt), block_grad(task.loss, point, wrt))


def test_a_gs_sweep_input_to_output_evaluates_each_stage_once_per_block_from_its_own_on():
    """The point of the chain: block ``i``'s gradient recomputes stages ``i-1..N`` (``i-1`` for the
    new ``theta_{i-1}``), not the whole chain; the first stage once in all instead of ``N - 1``
    times.
    """
    task = relu_mlp_task([6, 5, 4, 4, 3, 2], seed=1)
    n = task.n_blocks
    calls = [0] * n

    def counted(l, f):
        def g(p, h):
            calls[l] += 1
            return f(p, h)
        return g

    chain = Chain([counted(l, f) for l, f in enumerate(task.chain.stages)], task.chain.input,
                  task.chain.head)
    counted_task = Task(task.params, task.loss, task.blocks, task.name, {}, "gs", chain)
    g = grad(task.loss, task.params)[1]
    scheme_step_with_grads(counted_task, task.params, check_pattern(task, "gs"), 0.1,
                           grad_at_params=g)
    # block i >= 1 (0-based) runs stages i-1..n-1 (block 0 takes g itself): stage l runs min(l + 1,
    # n - 1) times
    assert calls == [min(l + 1, n - 1) for l in range(n)]
    assert sum(calls) < (n - 1) * n  # what n - 1 whole forward passes cost


def test_a_chain_that_does_not_fit_the_task_is_refused():
    task = relu_mlp_task([3, 3, 2])
    with pytest.raises(TaskError, match="2 stages for 3 blocks"):
        Task(task.params, task.loss,
             {"a": ["layer1.weight"], "b": ["layer1.bias"], "c": ["layer2.weight", "layer2.bias"]},
             chain=Chain(list(task.chain.stages), task.chain.input, task.chain.head))
    with pytest.raises(TaskError, match="must be a crosscurv.numeric.chain.Chain"):
        Task(task.params, task.loss, task.blocks, chain=lambda p: 0)
    wrong = Chain(list(task.chain.stages), task.chain.input, lambda z: 2 * task.chain.head(z))
    with pytest.raises(TaskError, match=r"chain.loss\(params\) = .* is not loss\(params\)"):
        Task(task.params, task.loss, task.blocks, chain=wrong).check_loss()
