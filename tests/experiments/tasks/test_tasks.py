"""Built-in task registry: presets, settings, smoke builds, HVPs through every task."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from crosscurv.experiments.tasks.errors import DataError
from crosscurv.experiments.tasks import (PRESETS, TASKS, UnknownTaskError, build_task,
                                         preset_settings)
from crosscurv.numeric import tree
from crosscurv.numeric.hvp import grad, hvp
from crosscurv.numeric.point import PointCurvature
from crosscurv.theory.errors import InputError
from crosscurv.theory.patterns import parse_pattern

warnings.filterwarnings("ignore", category=FutureWarning)


def test_registry_names_and_presets():
    from crosscurv.experiments.tasks.names import TASK_NAMES

    # the torch-free names the commands check
    assert tuple(TASKS) == TASK_NAMES == ("mlp", "fl", "lora")
    assert PRESETS == ("smoke", "default", "edge", "paper")
    for name, spec in TASKS.items():
        assert set(spec.presets) == set(PRESETS), name
        for preset in PRESETS:
            s = preset_settings(name, preset)
            assert s["lr"] > 0 and isinstance(s["iters"], int) and s["iters"] >= 1
        assert preset_settings(name, "paper")["iters"] == 500
        assert preset_settings(name, "smoke")["iters"] <= 10


def test_paper_preset_sizes():
    assert preset_settings("mlp", "paper")["widths"] == [784, 512, 384, 256, 192, 128, 64, 32, 10]
    assert preset_settings("mlp", "paper")["examples"] == 256
    fl = preset_settings("fl", "paper")
    assert (fl["width"], fl["clients"], fl["examples_per_client"]) == (64, 3, 8)
    lora = preset_settings("lora", "paper")
    assert lora["t5"] == {"d_model": 768, "d_kv": 64, "num_heads": 12, "d_ff": 3072,
                          "num_layers": 12}
    assert (lora["rank"], lora["alpha"], lora["examples"], lora["seq_len"]) == (8, 16, 8, 128)
    # the paper's 884,736 adapter parameters: 6 q/v families x 12 layers x (A + B)
    t5 = lora["t5"]
    assert t5["num_heads"] * t5["d_kv"] == t5["d_model"]
    assert 6 * t5["num_layers"] * 2 * lora["rank"] * t5["d_model"] == 884_736


def test_unknown_names_are_one_line_input_errors():
    with pytest.raises(UnknownTaskError, match="built-in tasks: mlp, fl, lora") as e:
        build_task("cnn")
    assert isinstance(e.value, InputError) and "\n" not in str(e.value)
    with pytest.raises(UnknownTaskError, match="presets: smoke, default, edge, paper"):
        build_task("mlp", "huge")
    with pytest.raises(UnknownTaskError, match="takes no model path"):
        build_task("mlp", "smoke", model_path="/tmp")
    with pytest.raises(DataError, match="does not exist"):
        build_task("mlp", "smoke", data_path="/nonexistent/mnist")
    with pytest.raises(DataError, match="does not exist"):
        build_task("lora", "smoke", model_path="/nonexistent/t5-base")


def _check_settings(task, s, name, preset):
    assert s["task"] == name and s["preset"] == preset
    assert s["pattern"] == task.default_pattern == "gs"
    assert s["dtype"] == "float64" and s["device"] == "cpu"
    assert s["data_source"] == task.info["data_source"]
    assert s["block_sizes"] == dict(zip(task.block_names, task.block_sizes()))
    assert s["n_params"] == task.num_params()
    parse_pattern(s["pattern"], task.n_blocks, task.block_names)  # a valid spec


def _hvp_matches_finite_difference(loss, params, method="forward"):
    """H v by forward-over-reverse vs double backward and a central difference of gradients
    (float64).

    ReLU networks are only piecewise smooth; the point must keep every pre-activation away from 0 by
    more than ``eps * ||v||`` (callers jitter the initial point, where dead units give
    pre-activations exactly 0).
    """
    gen = torch.Generator().manual_seed(1)
    v = {k: torch.randn(p.shape, generator=gen, dtype=p.dtype) for k, p in params.items()}
    v = tree.scale(v, 1.0 / float(tree.norm(v)))
    hv = hvp(loss, params, v, method=method)
    scale = max(1.0, float(tree.norm(hv)))
    hv_rev = hvp(loss, params, v, method="reverse")
    assert float(tree.norm(tree.sub(hv, hv_rev))) <= 1e-10 * scale
    hv_point = PointCurvature(loss, params).hvp(v)
    assert float(tree.norm(tree.sub(hv_point, hv_rev))) <= 1e-10 * scale
    eps = 1e-5
    _, gp = grad(loss, tree.axpy(eps, v, params))
    _, gm = grad(loss, tree.axpy(-eps, v, params))
    fd = tree.scale(tree.sub(gp, gm), 1 / (2 * eps))
    assert float(tree.norm(hv)) > 0
    err = float(tree.norm(tree.sub(hv, fd)))
    assert err <= 1e-6 * scale, err
    return hv


def _jitter(params, keys=None, size=0.05, seed=3):
    """``params`` plus seeded Gaussian noise on ``keys`` (all by default)."""
    gen = torch.Generator().manual_seed(seed)
    keys = set(params) if keys is None else set(keys)
    return {k: (p + size * torch.randn(p.shape, generator=gen, dtype=p.dtype) if k in keys else p)
            for k, p in params.items()}


@pytest.fixture(scope="module")
def smoke_tasks():
    return {n: build_task(n, "smoke", dtype=torch.float64, seed=0) for n in TASKS}


def test_mlp_smoke(smoke_tasks):
    task, s = smoke_tasks["mlp"]
    _check_settings(task, s, "mlp", "smoke")
    assert task.block_names == [f"layer{l}" for l in range(1, 9)]
    assert all(task.blocks[f"layer{l}"] == [f"layer{l}.weight", f"layer{l}.bias"] for l in range(1,
                                                                                                 9))
    assert s["widths"][0] == 784 and s["widths"][-1] == 10 and len(s["widths"]) == 9
    value = task.check_loss()
    assert math.isfinite(value) and abs(value - math.log(10)) < 0.5
    _hvp_matches_finite_difference(task.loss, _jitter(task.params))


def test_fl_smoke(smoke_tasks):
    task, s = smoke_tasks["fl"]
    _check_settings(task, s, "fl", "smoke")
    assert task.block_names == ["personal", "shared"]
    personal, shared = task.blocks["personal"], task.blocks["shared"]
    assert all(n.startswith(("client0.", "client1.", "client2.")) for n in personal)
    assert all(n.startswith("shared.") for n in shared)
    assert {n.split(".", 1)[1] for n in personal if n.startswith("client0.")} == \
        {n.split(".", 1)[1] for n in personal if n.startswith("client2.")}
    assert task.info["examples_per_client"] == [2, 2, 2] and s["client_examples"] == [2, 2, 2]
    assert math.isfinite(task.check_loss())
    hv = _hvp_matches_finite_difference(task.loss, _jitter(task.params), method="auto")
    # the objective is the mean of client objectives: client i's personal
    # parameters only see client i's data, so its gradient differs per client
    _, g = grad(task.loss, task.params)
    k0, k1 = "client0.stem.conv.weight", "client1.stem.conv.weight"
    assert not torch.allclose(g[k0], g[k1])
    assert float(tree.norm(tree.restrict(hv, shared))) > 0


def test_fl_objective_is_the_mean_of_client_objectives(smoke_tasks):
    from torch.nn import functional as F

    from crosscurv.experiments.tasks.data import load_cifar10
    from crosscurv.experiments.tasks.models.resnet import FederatedResNet18

    task, _ = smoke_tasks["fl"]
    data = load_cifar10(6, dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = FederatedResNet18(3, 4)
    model = model.double()
    with torch.no_grad():
        per_client = [F.cross_entropy(model(data.x[2 * i:2 * i + 2], i), data.y[2 * i:2 * i + 2])
                      for i in range(3)]
        assert torch.allclose(task.loss(task.params), sum(per_client) / 3, atol=1e-12)


def test_lora_smoke(smoke_tasks):
    task, s = smoke_tasks["lora"]
    _check_settings(task, s, "lora", "smoke")
    assert task.block_names == ["B", "A"]
    assert all(".lora_B." in n for n in task.blocks["B"]) and all(".lora_A." in n
                                                                  for n in task.blocks["A"])
    assert len(task.blocks["B"]) == len(task.blocks["A"]) == 12 == s["lora_modules"]
    assert task.info["trainable_params"] == task.num_params() == 12 * 2 * 8 * 32
    assert all(torch.count_nonzero(task.params[n]) == 0 for n in task.blocks["B"])
    value = task.check_loss()
    assert math.isfinite(value) and abs(value - math.log(384)) < 1.5
    # B = 0: the gradient w.r.t. A vanishes at the start, the one w.r.t. B does not
    _, g = grad(task.loss, task.params)
    assert float(tree.norm(tree.restrict(g, task.blocks["A"]))) == 0.0
    assert float(tree.norm(tree.restrict(g, task.blocks["B"]))) > 0
    # at a point with B != 0 every Hessian block is exercised
    _hvp_matches_finite_difference(task.loss, _jitter(task.params, task.blocks["B"]))


def test_builds_are_deterministic_and_seeded():
    a, _ = build_task("mlp", "smoke", seed=0)
    b, _ = build_task("mlp", "smoke", seed=0)
    c, _ = build_task("mlp", "smoke", seed=1)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    assert not torch.equal(a.params["layer1.weight"], c.params["layer1.weight"])
    assert float(a.loss(a.params)) == float(b.loss(b.params))
    la, _ = build_task("lora", "smoke", seed=0)
    lb, _ = build_task("lora", "smoke", seed=0)
    assert all(torch.equal(la.params[k], lb.params[k]) for k in la.params)
    assert float(la.loss(la.params)) == float(lb.loss(lb.params))
    # the global RNG is untouched by a build
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_task("fl", "smoke")
    assert torch.equal(torch.rand(3), expected)


def test_lora_model_path_loads_a_local_checkpoint(tmp_path):
    from crosscurv.experiments.tasks.models import t5lora

    size = t5lora.T5Size(**preset_settings("lora", "smoke")["t5"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        base, tok, _ = t5lora.random_t5(size)
    base.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    task, s = build_task("lora", "smoke", model_path=tmp_path)
    ref, _ = build_task("lora", "smoke")
    assert "pretrained T5 weights from" in s["model_source"] and s["model_path"] == str(tmp_path)
    assert "t5" not in task.info
    # same weights (saved from the seed-0 random model) -> same loss
    assert abs(task.check_loss() - ref.check_loss()) < 1e-5
