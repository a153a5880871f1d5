"""The built-in tasks and their presets: the registry :data:`TASKS`, :func:`build_task`,
:func:`preset_settings` (described in :mod:`crosscurv.experiments.tasks`)."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.nn import functional as F

from crosscurv.numeric.portable_random import INIT
from crosscurv.numeric.task import Task

from .names import PRESETS, UnknownTaskError

__all__ = ["TASKS", "PRESETS", "TaskSpec", "UnknownTaskError", "build_task", "preset_settings"]

@dataclass(frozen=True)
class TaskSpec:
    """A built-in task: its builder and the settings of each preset.

    ``build(settings, device=, dtype=, seed=, data_path=, model_path=) -> Task``.
    """

    name: str
    summary: str
    build: Callable[..., Task]
    presets: dict = field(default_factory=dict)
    takes_model_path: bool = False


def frozen_digest(model, params) -> str:
    """SHA-256 of ``model``'s parameters that are not in ``params`` (the frozen weights), in name
    order."""
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        if name not in params:
            h.update(name.encode())
            h.update(str(tuple(p.shape)).encode())
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@contextlib.contextmanager
def _seeded(seed: int):
    """Fork the CPU RNG and seed it; the global RNG is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# -- mlp ---------------------------------------------------------------------
def _build_mlp(s: dict, *, device, dtype, seed, data_path, model_path) -> Task:
    from crosscurv.experiments.tasks.data import load_mnist
    from crosscurv.experiments.tasks.models.mlp import MLP, mlp_blocks, mlp_stages
    from crosscurv.numeric.chain import Chain

    data = load_mnist(s["examples"], path=data_path, dtype=dtype, device=device, seed=seed)
    with _seeded(seed):
        model = MLP(s["widths"])
    model = model.to(device=device, dtype=dtype).eval()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)
    x, y = data.x, data.y

    def loss(p: dict) -> torch.Tensor:
        """Mean softmax cross-entropy of the MLP over the fixed examples (paper, eq. E.2)."""
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    info = {
        "data_source": data.source,
        "model": f"MLP {'-'.join(map(str, s['widths']))}, ReLU, softmax cross-entropy, "
                 "Xavier-normal weights, zero biases",
        "init": INIT,
        "examples": len(data),
        "widths": list(s["widths"]),
    }
    # the same loss as one stage per layer: GS steps reuse the layers before the first updated one
    chain = Chain(mlp_stages(model.n_layers), x, lambda logits: F.cross_entropy(logits, y))
    return Task(params, loss, mlp_blocks(model.n_layers), "mlp", info, "gs", chain)


# -- fl ----------------------------------------------------------------------
def _split_even(n: int, m: int) -> list[int]:
    """Sizes of ``m`` contiguous chunks of ``n`` items, as even as possible (larger first)."""
    return [n // m + (1 if i < n % m else 0) for i in range(m)]


def _build_fl(s: dict, *, device, dtype, seed, data_path, model_path) -> Task:
    from crosscurv.experiments.tasks.data import load_cifar10
    from crosscurv.experiments.tasks.errors import DataError
    from crosscurv.experiments.tasks.models.resnet import FederatedResNet18

    m = s["clients"]
    want = m * s["examples_per_client"]
    if data_path is None:
        from crosscurv.experiments.tasks.data.cifar import bundled_cifar10_files

        n = min(want, len(bundled_cifar10_files()))
    else:
        n = want
    if n < m:
        raise DataError(f"fl needs at least one example per client ({m}), got {n}")
    data = load_cifar10(n, path=data_path, dtype=dtype, device=device, seed=seed)
    sizes = _split_even(len(data), m)
    bounds = [sum(sizes[:i]) for i in range(m + 1)]
    shards = [(data.x[bounds[i]:bounds[i + 1]], data.y[bounds[i]:bounds[i + 1]]) for i in range(m)]

    with _seeded(seed):
        model = FederatedResNet18(m, s["width"])
    model = model.to(device=device, dtype=dtype).eval()
    params = {n_: p.detach().clone() for n_, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)

    def client(p: dict, i: int) -> torch.Tensor:
        """``F_i(u, v_i)``: client ``i``'s mean cross-entropy."""
        xi, yi = shards[i]
        return F.cross_entropy(torch.func.functional_call(model, p, (xi,), {"client": i}), yi)

    def loss(p: dict) -> torch.Tensor:
        """Mean client objective ``(1/M) sum_i F_i(u, v_i)``, ``F_i`` = client i's mean
        cross-entropy.
        """
        total = None
        for i in range(m):
            fi = client(p, i)
            total = fi if total is None else total + fi
        return total / m

    # the same objective one client at a time, F_i / M: the protocol's default engine holds one
    # client's graph
    terms = [functools.partial(lambda p, i: client(p, i) / m, i=i) for i in range(m)]

    personal = [k for k in params if k.startswith("client")]
    shared = [k for k in params if k.startswith("shared.")]
    info = {
        "data_source": data.source,
        "model": f"CIFAR ResNet-18 (width {s['width']}, 3x3 stride-1 stem, no max-pool), "
                 "BatchNorm eval mode with default running statistics (mean 0, var 1), no dropout",
        "clients": m,
        "examples_per_client": sizes,
        "client_split": f"{len(data)} examples split in order into {m} contiguous shards of sizes "
        + "/".join(map(str, sizes))
        + ("" if len(data) == want else f" (asked for {want}; the bundled source has {len(data)})"),
        "objective": "uniform mean over clients of each client's mean cross-entropy",
        "personal_init": "all clients start from the same personal weights",
        "init": INIT,
        "width": s["width"],
    }
    return Task(params, loss, {"personal": personal, "shared": shared}, "fl", info, "gs",
                loss_terms=terms)


# -- lora --------------------------------------------------------------------
def _build_lora(s: dict, *, device, dtype, seed, data_path, model_path) -> Task:
    from crosscurv.experiments.tasks.data import LABEL_WORDS, load_sst2
    from crosscurv.experiments.tasks.models import t5lora

    data = load_sst2(s["examples"], path=data_path, seed=seed)
    with _seeded(seed):
        if model_path is None:
            base, tokenizer, model_source = t5lora.random_t5(t5lora.T5Size(**s["t5"]))
        else:
            base, tokenizer, model_source = t5lora.pretrained_t5(model_path)
    gen = torch.Generator().manual_seed(seed)
    model = t5lora.add_lora(base, r=s["rank"], alpha=s["alpha"], generator=gen)
    model = model.to(device=device, dtype=dtype).eval()
    batch = t5lora.encode_examples(tokenizer, data.sentences, data.labels, seq_len=s["seq_len"],
                                   label_words=LABEL_WORDS)
    target_len = batch.pop("target_len")
    batch = {k: v.to(device) for k, v in batch.items()}
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = {n: model.get_parameter(n).detach().clone() for n in names}
    for p in model.parameters():
        p.requires_grad_(False)

    def loss(p: dict) -> torch.Tensor:
        """Mean target-token cross-entropy of T5 + LoRA(p) on the fixed text-to-text examples."""
        return t5lora.seq2seq_loss(model, p, batch)

    n_modules = len(names) // 2
    info = {
        "data_source": data.source,
        "model_source": model_source,
        "model": f"T5 + LoRA (r={s['rank']}, alpha={s['alpha']}, dropout 0, bias none) on q/v of "
                 f"encoder self-, decoder self- and decoder cross-attention ({n_modules} modules); "
                 f"A ~ N(0, 2/d_in), B = 0",
        "examples": len(data),
        "seq_len": s["seq_len"],
        "target_len": int(target_len),
        "lora_modules": n_modules,
        "trainable_params": sum(v.numel() for v in params.values()),
        "init": INIT,
        "frozen_sha256": frozen_digest(model, params),
    }
    if model_path is None:
        info["t5"] = dict(s["t5"])
    return Task(params, loss, t5lora.lora_blocks(names), "lora", info, "gs")


# -- registry and presets ------------------------------------------------------
# Cost of the protocol per iteration: 2 gradient steps (JC: 1 gradient, GS: N block gradients) + ~(N
# + 4)
# HVPs; K = 500 on one thread costs minutes (mlp) to about half an hour (fl) per run on the shared
# 2-core CPU (reports/studies.md, "What the runs cost"). Learning rates. ``default``: the rule of
# crosscurv.experiments.studies.regime.regime_learning_rate, the largest rate of LR_GRID (0.05,
# 0.03, 0.02, 0.015, 0.01, 0.007, 0.005, 0.003, 0.002) whose largest eta * lambda_max over K = 500,
# predicted from a reference run's converged lambda_max at the same gradient-flow time eta * k, and
# only from the part of the reference below its own edge, is at most 1 (a factor 2 below the edge of
# stability). References: the edge run (reports/sweeps/edge-seed0), for lora also its run at 0.01
# (reports/sweeps/reference-lora), whose sharpness passes 160 where the edge run's stays near 78:
# mlp 0.007 (prediction 0.45; 0.01 -> 1.80) fl 0.007 (0.10; 0.01 not covered: the edge run crosses
# at t = 4) lora 0.003 (0.56; 0.005 not covered: the run at 0.01 reaches eta * lambda_max = 2.17 at
# k = 220, t = 2.2) LoRA's observed winner does not change below the edge: at 0.01 it first changes
# at k = 225, after the crossing, so a rate below it, which follows the same flow to t = 500 eta <
# 2.25, is not expected to see a change in K = 500. tests/experiments/tasks/test_presets_regime.py
# checks the rule and eta * lambda_max(theta^0) <= 1; the K = 500 runs over seeds
# (reports/studies.md) are the confirmation. ``edge``: the rates first probed for a GS-JC winner
# that changes early (mlp 0.01, fl 0.05, lora 0.03); they drive FL and LoRA past eta * lambda_max =
# 2 within k = 10-80 and FL seed 0 diverges at k = 431 (reports/sweeps/edge-*): the
# edge-of-stability study. Paper presets reuse the edge learning rates; they were not probed at the
# paper's sizes.
_MLP_PRESETS = {
    "smoke": {"widths": (784, 32, 24, 16, 16, 16, 16, 16, 10), "examples": 32, "lr": 0.05,
              "iters": 5},
    "default": {"widths": (784, 512, 384, 256, 192, 128, 64, 32, 10), "examples": 256, "lr": 0.007,
                "iters": 500},
    "edge": {"widths": (784, 512, 384, 256, 192, 128, 64, 32, 10), "examples": 256, "lr": 0.01,
             "iters": 500},
    "paper": {"widths": (784, 512, 384, 256, 192, 128, 64, 32, 10), "examples": 256, "lr": 0.01,
              "iters": 500},
}
_FL_PRESETS = {
    "smoke": {"clients": 3, "width": 4, "examples_per_client": 2, "lr": 0.05, "iters": 5},
    # 8 per client asked; the 20 bundled images give 7/7/6 (recorded in info)
    "default": {"clients": 3, "width": 16, "examples_per_client": 8, "lr": 0.007, "iters": 500},
    "edge": {"clients": 3, "width": 16, "examples_per_client": 8, "lr": 0.05, "iters": 500},
    "paper": {"clients": 3, "width": 64, "examples_per_client": 8, "lr": 0.05, "iters": 500},
}
_LORA_PRESETS = {
    "smoke": {
        "t5": {"d_model": 32, "d_kv": 8, "num_heads": 4, "d_ff": 64, "num_layers": 2},
        "rank": 8, "alpha": 16, "examples": 4, "seq_len": 40, "lr": 0.03, "iters": 5,
    },
    "default": {
        "t5": {"d_model": 128, "d_kv": 32, "num_heads": 4, "d_ff": 512, "num_layers": 4},
        "rank": 8, "alpha": 16, "examples": 8, "seq_len": 96, "lr": 0.003, "iters": 500,
    },
    "edge": {
        "t5": {"d_model": 128, "d_kv": 32, "num_heads": 4, "d_ff": 512, "num_layers": 4},
        "rank": 8, "alpha": 16, "examples": 8, "seq_len": 96, "lr": 0.03, "iters": 500,
    },
    "paper": {
        "t5": {"d_model": 768, "d_kv": 64, "num_heads": 12, "d_ff": 3072, "num_layers": 12},
        "rank": 8, "alpha": 16, "examples": 8, "seq_len": 128, "lr": 0.03, "iters": 500,
    },
}

TASKS: dict[str, TaskSpec] = {
    "mlp": TaskSpec("mlp", "8-layer ReLU MLP on MNIST, one block per layer, GS input to output",
                    _build_mlp, _MLP_PRESETS),
    "fl": TaskSpec("fl", "federated ResNet-18 on CIFAR-10, 3 clients, blocks personal then shared",
                   _build_fl, _FL_PRESETS),
    "lora": TaskSpec("lora", "T5 + LoRA on q/v for text-to-text sentiment, blocks B then A",
                     _build_lora, _LORA_PRESETS, takes_model_path=True),
}


def _spec(name: str) -> TaskSpec:
    if name not in TASKS:
        raise UnknownTaskError(f"unknown task {name!r} (built-in tasks: {', '.join(TASKS)})")
    return TASKS[name]


def preset_settings(name: str, preset: str = "default") -> dict:
    """A copy of the preset's settings (``lr``, ``iters``, sizes) for task ``name``."""
    spec = _spec(name)
    if preset not in PRESETS:
        raise UnknownTaskError(f"unknown preset {preset!r} (presets: {', '.join(PRESETS)})")
    s = spec.presets[preset]
    return {k: (dict(v) if isinstance(v, dict) else (list(v) if isinstance(v, tuple) else v))
            for k, v in s.items()}


def build_task(name: str, preset: str = "default", *, device="cpu", dtype=torch.float32,
               seed: int = 0, data_path=None, model_path=None) -> tuple[Task, dict]:
    """Build a built-in task at a preset.

    Args:
        name: ``"mlp"``, ``"fl"`` or ``"lora"``.
        preset: ``"smoke"``, ``"default"`` or ``"paper"``.
        device, dtype: where and in which precision data and parameters live.
        seed: initialisation and data-subset seed (``0``: the evenly spaced selection).
        data_path: optional local data (MNIST IDX folder, cifar-10-batches-py
            folder, GLUE SST-2 folder); ``None`` = bundled package data.
        model_path: ``lora`` only: local T5 weights (folder or offline
            Hugging Face cache name); ``None`` = random weights.

    Returns:
        ``(task, settings)`` with ``settings`` holding ``task``, ``preset``,
        ``lr``, ``iters``, ``pattern`` (the spec string), ``dtype``,
        ``device``, ``seed``, every size of the preset, and the data/model
        sources.

    Raises:
        UnknownTaskError: unknown name or preset, or ``model_path`` for a task
            without one.
        crosscurv.experiments.tasks.errors.DataError: missing or malformed local data/weights.
    """
    spec = _spec(name)
    settings = preset_settings(name, preset)
    if model_path is not None and not spec.takes_model_path:
        raise UnknownTaskError(f"task {name!r} takes no model path (only: "
                               f"{', '.join(t for t, s in TASKS.items() if s.takes_model_path)})")
    device = torch.device(device)
    task = spec.build(settings, device=device, dtype=dtype, seed=seed, data_path=data_path,
                      model_path=model_path)
    settings.update(
        task=name,
        preset=preset,
        pattern=task.default_pattern,
        dtype=str(dtype).replace("torch.", ""),
        device=str(device),
        seed=seed,
        data_path=None if data_path is None else str(data_path),
        model_path=None if model_path is None else str(model_path),
        data_source=task.info.get("data_source"),
        n_params=task.num_params(),
        block_sizes=dict(zip(task.block_names, task.block_sizes())),
    )
    if "model_source" in task.info:
        settings["model_source"] = task.info["model_source"]
    for key in ("examples_per_client", "target_len", "lora_modules"):
        if key in task.info:
            settings[key if key != "examples_per_client" else "client_examples"] = task.info[key]
    return task, settings
