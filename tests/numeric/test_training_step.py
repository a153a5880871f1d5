"""crosscurv.numeric.training_step: ordinary nn.Module / torch.optim training code gets the right
verdict.

Every factory of examples/peft_lora_t5.py, federated.py and layerwise_sgd.py is identified here (the
CLI runs a few in tests/experiments/test_validate_real_code.py).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from crosscurv.numeric import step_from_training_code
from crosscurv.numeric.validation import ValidationInputError, as_user_step, identify_step

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = dict(seeds=(0, 1), n_etas=4)


def _example(name):
    spec = importlib.util.spec_from_file_location("crosscurv_example_" + name, os.path.join(ROOT,
        "examples", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def lora():
    return _example("peft_lora_t5")


@pytest.fixture(scope="module")
def fed():
    return _example("federated")


@pytest.fixture(scope="module")
def layerwise():
    return _example("layerwise_sgd")


def _identify(user, **kw):
    return identify_step(as_user_step(user), **{**FAST, **kw})


# -- peft LoRA on a random T5 (sdpa attention: curvature by differences of gradients) ------------
def test_peft_lora_simultaneous_is_jc(lora):
    r = _identify(lora.simultaneous(), seeds=(0,), n_etas=3)
    assert r.ok and r.matches == ["jc"], r.text()
    assert r.route.name == "central-differences"


def test_peft_lora_alternating_is_gs_b_then_a(lora):
    r = _identify(lora.alternating(), seeds=(0,), n_etas=3)
    assert r.ok and r.matches == ["gs:B,A"], r.text()
    assert r.fit.coef[1][0] == pytest.approx(1.0, abs=0.01) and r.fit.coef[0][1] == pytest.approx(
        0.0, abs=0.01)


def test_peft_lora_stale_gradient_is_jc_not_gs(lora):
    r = _identify(lora.stale_alternating(), seeds=(0,), n_etas=3)
    assert r.matches == ["jc"] and not r.ok and r.diagnosis == "jc-instead"


def test_peft_model_restored_between_calls(lora):
    """requires_grad flags, frozen weights and gradients are restored; results are copies."""
    user = lora.alternating()
    model_params = {k: v.clone() for k, v in user.task.params.items()}
    a = user.step(model_params, 0.01)
    b = user.step(model_params, 0.01)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(not torch.equal(a[k], model_params[k]) for k in a)


# -- federated: per-block step factors -----------------------------------------------------------
def test_fedsim_is_jc_with_personal_factor_two(fed):
    r = _identify(fed.fedsim())
    assert r.ok and r.matches == ["jc"] and r.factors.factors == [2.0,
        1.0] and r.factors.source == "inferred"
    assert r.verdict().startswith("matches jc with step factors personal=2, shared=1")


def test_fedalt_is_gs_personal_then_shared(fed):
    r = _identify(fed.fedalt())
    assert r.ok and r.matches == ["gs:personal,shared"], r.text()
    assert "gs:personal,shared with step factors personal=2, shared=1" in r.verdict()


@pytest.mark.parametrize("clients", [2, 3])
def test_fedavg_over_c_clients_has_personal_factor_c(fed, clients):
    r = _identify(fed.fedavg(clients))
    assert r.ok and r.matches == ["jc"] and r.factors.factors == [float(clients), 1.0], r.text()


def test_block_lr_given_is_used_and_a_wrong_one_fails(fed):
    r = _identify(fed.fedsim(), block_lr="personal=2")
    assert r.ok and r.factors.source == "--block-lr"
    r = _identify(fed.fedsim(), block_lr="personal=1")
    assert not r.ok and r.diagnosis == "first-order"
    r = _identify(fed.fedsim(), infer_factors=False)
    assert not r.ok and r.factors is None


def test_factors_are_in_the_freshness_fit(fed):
    r = _identify(fed.fedalt())
    assert r.fit.is_pattern_form and r.fit.coef[1][0] == pytest.approx(1.0, abs=1e-3)


# -- layer-wise SGD with param groups ----------------------------------------------------------
def test_layerwise_param_groups(layerwise):
    r = _identify(layerwise.recomputed())
    assert r.ok and r.matches == ["gs:layer3,layer2,layer1"] and r.task.block_names == ["layer3",
        "layer2", "layer1"]
    r = _identify(layerwise.one_backward())
    assert r.matches == ["jc"] and r.diagnosis == "jc-instead"


def test_lr_factors_scale_the_groups():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    x, y = torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)

    def loss(m):
        return ((m(x) - y) ** 2).mean()

    def train_step(m, opt):
        opt.zero_grad()
        loss(m).backward()
        opt.step()

    user = step_from_training_code(model, train_step, loss, {"out": "2.*", "hidden": "re:^0\\."},
                                   optimizers=lambda m: torch.optim.SGD([{"params": m[
                                   0].parameters()},
                                                                         {"params": m[
                                                                         2].parameters()}], lr=1.0),
                                   lr_factors={"out": 4})
    assert model[0].weight.dtype == torch.float64  # converted in place
    r = _identify(user)
    assert r.ok and r.matches == ["jc"] and r.factors.factors == [4.0, 1.0]
    one_group = step_from_training_code(model, train_step, loss, {"out": "2.*", "hidden": "0.*"},
                                        optimizers=lambda m: torch.optim.SGD(m.parameters(),
                                                                             lr=1.0),
                                        lr_factors={"out": 4})
    with pytest.raises(ValidationInputError,
                       match="spans blocks hidden, out with different lr_factors"):
        _identify(one_group)


def test_bad_blocks_are_one_line():
    model = torch.nn.Linear(2, 1).double()

    def kw(**extra):
        return dict(optimizers=lambda m: torch.optim.SGD(m.parameters(), lr=1.0), **extra)

    def noop(m, o):
        pass

    with pytest.raises(ValidationInputError, match="match no parameter: x \\(nothing\\*\\)"):
        step_from_training_code(model, noop, lambda m: m.weight.sum(), {"w": "weight",
                                                                        "x": "nothing*"}, **kw())
    with pytest.raises(ValidationInputError, match="unknown block 'z'"):
        step_from_training_code(model, noop, lambda m: m.weight.sum(), {"w": "weight"}, **kw(
            lr_factors={"z": 2}))
    with pytest.raises(ValidationInputError, match="'param_groups'"):
        step_from_training_code(model, noop, lambda m: m.weight.sum(), "groups", **kw())
    with pytest.raises(ValidationInputError, match="must return a torch.optim.Optimizer"):
        step_from_training_code(model, noop, lambda m: m.weight.sum(), "param_groups",
                                optimizers=lambda m: 3)
