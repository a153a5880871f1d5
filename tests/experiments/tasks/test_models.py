"""The three studies' models: sizes, parameter names, partitions, initialisation."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from crosscurv.experiments.tasks.models.mlp import MLP, PAPER_WIDTHS, mlp_blocks
from crosscurv.experiments.tasks.models.resnet import FederatedResNet18, PersonalNet, SharedNet


# -- MLP -------------------------------------------------------------------------
def test_mlp_paper_sizes_names_and_blocks():
    torch.manual_seed(0)
    m = MLP(PAPER_WIDTHS)
    assert m.n_layers == 8
    names = [n for n, _ in m.named_parameters()]
    assert names == [f"layer{l}.{w}" for l in range(1, 9) for w in ("weight", "bias")]
    expected = sum(a * b + b for a, b in zip(PAPER_WIDTHS[:-1], PAPER_WIDTHS[1:]))
    assert sum(p.numel() for p in m.parameters()) == expected == 782186
    assert m.layer1.weight.shape == (512, 784) and m.layer8.weight.shape == (10, 32)
    blocks = mlp_blocks(8)
    assert list(blocks) == [f"layer{l}" for l in range(1, 9)]
    assert sorted(n for v in blocks.values() for n in v) == sorted(names)


def test_mlp_init_xavier_normal_zero_bias_and_forward():
    torch.manual_seed(0)
    m = MLP(PAPER_WIDTHS)
    for l in range(1, 9):
        lin = getattr(m, f"layer{l}")
        assert torch.count_nonzero(lin.bias) == 0
        fan_out, fan_in = lin.weight.shape
        std = (2.0 / (fan_in + fan_out)) ** 0.5
        if lin.weight.numel() > 5000:  # sample std within a few standard errors
            assert abs(lin.weight.std().item() / std - 1) < 0.05
    x = torch.rand(5, 784)
    out = m(x)
    assert out.shape == (5, 10)
    # forward = the paper's recursion z_l = W h + b, h = relu(z), logits = z_N
    h = x
    for l in range(1, 9):
        lin = getattr(m, f"layer{l}")
        h = h @ lin.weight.T + lin.bias
        if l < 8:
            h = torch.relu(h)
    assert torch.allclose(out, h, atol=1e-6)


# -- ResNet-18 -------------------------------------------------------------------
def test_resnet18_parameter_count_matches_resnet18():
    # CIFAR ResNet-18 (3x3 stem, 10 classes): 11,173,962 parameters in all
    torch.manual_seed(0)
    p, s = PersonalNet(64), SharedNet(64)
    n_p = sum(t.numel() for t in p.parameters())
    n_s = sum(t.numel() for t in s.parameters())
    assert n_p + n_s == 11_173_962
    assert n_p == 675_392  # stem + stages 1-2
    # shapes along the network: (n,3,32,32) -> (n,128,16,16) -> (n,10)
    with torch.no_grad():
        h = p.eval()(torch.randn(2, 3, 32, 32))
        assert h.shape == (2, 128, 16, 16)
        assert s.eval()(h).shape == (2, 10)


def test_federated_resnet_names_copies_and_eval_batchnorm():
    torch.manual_seed(0)
    m = FederatedResNet18(3, 4)
    names = [n for n, _ in m.named_parameters()]
    prefixes = {n.split(".")[0] for n in names}
    assert prefixes == {"client0", "client1", "client2", "shared"}
    assert {n.split(".")[1] for n in names if n.startswith("client")} == {"stem", "layer1",
                                                                          "layer2"}
    assert {n.split(".")[1] for n in names if n.startswith("shared")} == {"layer3", "layer4", "fc"}
    # clients start from the same personal weights, but as separate tensors
    for (n0, a), (n1, b) in zip(m.client0.named_parameters(), m.client1.named_parameters()):
        assert n0 == n1 and torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    assert not m.training and all(not mod.training for mod in m.modules())
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
    assert bns and all(torch.count_nonzero(bn.running_mean) == 0 and torch.all(bn.running_var == 1)
                       for bn in bns)
    # eval-mode BN is the fixed affine map: outputs do not depend on the batch
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        full = m(x, client=1)
        single = torch.cat([m(x[i:i + 1], client=1) for i in range(4)])
        assert torch.allclose(full, single, atol=1e-5)
        before = [bn.running_mean.clone() for bn in bns]
        m(x, client=0)
        assert all(torch.equal(a, bn.running_mean) for a, bn in zip(before, bns))
    assert not any(isinstance(mod, torch.nn.Dropout) for mod in m.modules())
    assert not any(isinstance(mod, torch.nn.MaxPool2d) for mod in m.modules())


def test_federated_resnet_client_routing():
    torch.manual_seed(0)
    m = FederatedResNet18(2, 4)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(m(x, 0), m(x, 1))  # identical copies
        m.client1.stem.conv.weight.add_(0.1)
        assert not torch.allclose(m(x, 0), m(x, 1))
        assert torch.allclose(m(x, 0), m.shared(m.client0(x)))


# -- T5 + LoRA -------------------------------------------------------------------
SMALL = dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2)


@pytest.fixture(scope="module")
def lora_t5():
    from crosscurv.experiments.tasks.models import t5lora

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        base, tok, source = t5lora.random_t5(t5lora.T5Size(**SMALL))
        model = t5lora.add_lora(base, generator=torch.Generator().manual_seed(0))
    return model, tok, source


def test_lora_targets_exactly_q_and_v_of_the_three_attentions(lora_t5):
    from peft.tuners.lora import LoraLayer

    model, _, _ = lora_t5
    wrapped = sorted(n.replace("base_model.model.", "") for n, m in model.named_modules()
                     if isinstance(m, LoraLayer))
    families = set()
    for n in wrapped:
        fam = re.sub(r"block\.\d+", "block.*", n)
        families.add(fam)
    assert families == {
        "encoder.block.*.layer.0.SelfAttention.q",
        "encoder.block.*.layer.0.SelfAttention.v",
        "decoder.block.*.layer.0.SelfAttention.q",
        "decoder.block.*.layer.0.SelfAttention.v",
        "decoder.block.*.layer.1.EncDecAttention.q",
        "decoder.block.*.layer.1.EncDecAttention.v",
    }
    assert len(wrapped) == 6 * SMALL["num_layers"] == 12
    # nothing else (k, o, FFN, lm_head) carries an adapter
    assert not any(re.search(r"\.(k|o|wi|wo|lm_head)$", n) for n in wrapped)


def test_lora_trainables_are_the_factors_with_paper_init(lora_t5):
    from crosscurv.experiments.tasks.models.t5lora import lora_blocks

    model, _, _ = lora_t5
    train = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert len(train) == 2 * 12
    assert all(re.search(r"\.lora_[AB]\.default\.weight$", n) for n in train)
    d = SMALL["d_model"]
    inner = SMALL["num_heads"] * SMALL["d_kv"]
    a_all, b_all = [], []
    for n, p in train.items():
        if ".lora_B." in n:
            assert p.shape == (inner, 8) and torch.count_nonzero(p) == 0
            b_all.append(p)
        else:
            # q/v map d_model -> heads*d_kv; A is r x d_in
            assert p.shape == (8, d)
            a_all.append(p.flatten())
    a = torch.cat(a_all)
    assert abs(a.std().item() / (2.0 / d) ** 0.5 - 1) < 0.1 and abs(a.mean().item()) < 0.05
    # scaling alpha / r = 2, no dropout, no bias
    layer = model.base_model.model.encoder.block[0].layer[0].SelfAttention.q
    assert layer.scaling["default"] == 2.0 and layer.r["default"] == 8
    assert isinstance(layer.lora_dropout["default"], torch.nn.Identity)
    blocks = lora_blocks(list(train))
    assert list(blocks) == ["B", "A"] and len(blocks["B"]) == len(blocks["A"]) == 12
    assert set(blocks["B"]) | set(blocks["A"]) == set(train)


def test_lora_model_uses_eager_attention_and_byte_tokenizer(lora_t5):
    model, tok, source = lora_t5
    assert model.base_model.model.config._attn_implementation == "eager"
    assert tok("ab").input_ids == [ord("a") + 3, ord("b") + 3, 1]
    assert "random" in source and "ByT5" in source


def test_encode_examples_prefix_targets_and_masks(lora_t5):
    from crosscurv.experiments.tasks.models.t5lora import PROMPT_PREFIX, encode_examples

    _, tok, _ = lora_t5
    b = encode_examples(tok, ["great film", "x" * 100], [1, 0], seq_len=40)
    assert b["input_ids"].shape == (2, 40) and b["attention_mask"].shape == (2, 40)
    text0 = bytes(i - 3 for i in b["input_ids"][0].tolist() if i > 2).decode()
    assert text0 == PROMPT_PREFIX + "great film"
    assert int(b["attention_mask"][0].sum()) == len(PROMPT_PREFIX) + len("great film") + 1  # + eos
    assert int(b["attention_mask"][1].sum()) == 40  # truncated
    assert b["target_len"] == 9  # 8 bytes + eos for both words
    assert bytes(i - 3 for i in b["labels"][0].tolist()[:-1]).decode() == "positive"
    assert bytes(i - 3 for i in b["labels"][1].tolist()[:-1]).decode() == "negative"
    assert torch.equal(b["decoder_input_ids"][:, 1:], b["labels"][:, :-1])
    assert torch.all(b["decoder_input_ids"][:, 0] == 0)


def test_encode_examples_pads_short_targets_with_ignore_index(lora_t5):
    from crosscurv.experiments.tasks.models.t5lora import encode_examples

    _, tok, _ = lora_t5
    b = encode_examples(tok, ["a", "b"], [0, 1], seq_len=16, label_words=("no", "yes"))
    assert b["target_len"] == 4
    assert b["labels"][0].tolist()[-1] == -100 and b["labels"][1].tolist()[-1] == 1
    assert b["decoder_input_ids"].min() >= 0


def test_missing_model_path_is_a_data_error(tmp_path):
    from crosscurv.experiments.tasks.errors import DataError
    from crosscurv.experiments.tasks.models.t5lora import pretrained_t5

    with pytest.raises(DataError, match="does not exist"):
        pretrained_t5(tmp_path / "t5-base")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="cannot load a T5 model") as e:
        pretrained_t5(tmp_path / "empty")
    assert "\n" not in str(e.value)


_CHANNELS_LAST_SCRIPT = r"""
import torch
from torch.nn import functional as F
from crosscurv.experiments.tasks.models.resnet import FederatedResNet18
from crosscurv.numeric.point import PointCurvature
torch.manual_seed(0)
model = FederatedResNet18(2, 4)
x = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
y = torch.tensor([1, 7])
params = {n: p.detach().clone() for n, p in model.named_parameters()}
for p in model.parameters():
    p.requires_grad_(False)
def loss(p):
    return F.cross_entropy(torch.func.functional_call(model, p, (x, 1)), y)
point = PointCurvature(loss, params)
hv = point.hvp({k: torch.ones_like(v) for k, v in params.items()})
assert all(bool(torch.isfinite(t).all()) for t in hv.values())
print("ok")
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_federated_resnet_survives_a_channels_last_float32_batch(threads):
    # A channels-last float32 batch (what an HWC image array becomes after a transpose)
    # made the backward of the strided 1x1 shortcut convolution corrupt the heap
    # (OMP_NUM_THREADS=1) or spin for minutes (2 threads) in PyTorch 2.13's CPU kernel.
    # The model normalises its input layout; run in a subprocess so a crash fails the test.
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    env = dict(os.environ, OMP_NUM_THREADS=threads, PYTHONPATH=root + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-c", _CHANNELS_LAST_SCRIPT], env=env,
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("gradient and product on a channels-last batch did not finish in 120 s "
                    "(kernel spin)")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[
        -1500:])
