"""Settings of the three panels at the ``smoke``, ``default`` and ``paper`` presets.

``paper`` keeps the appendix's sizes and hyper-parameters (full MNIST, 40 epochs; CIFAR-10 50,000
images, 20 clients, 10 sampled, 60 rounds; T5-base LoRA on 2,000 SST-2 examples) and is meant for a
GPU with ``--data`` / ``--model``. ``default`` is the CPU job of ``make report`` (all three panels,
three seeds, about four minutes on two cores): the bundled data (5,000-example MNIST subset, 20
CIFAR-10 images, a sentiment corpus that is not SST-2), fewer steps and, where the paper's step size
would not move the loss in that many steps, a larger one (stated in the report). ``smoke`` is for
the tests.
"""

from __future__ import annotations

import copy

from crosscurv.theory.errors import InputError

__all__ = ["PRESETS", "panel_settings", "DEFAULT_SEEDS"]

DEFAULT_SEEDS = {"smoke": (0,), "default": (0, 1, 2), "paper": (0,)}

_PAPER_WIDTHS = (784, 512, 384, 256, 192, 128, 64, 32, 10)

PRESETS = {
    "mlp": {
        "smoke": {
            "widths": (784, 32, 24, 16, 16, 16, 16, 16, 10), "examples": 256,
            "examples_full": 256, "eval_examples": 128, "batch": 32, "steps": 6, "eval_every": 2,
            "probe_every": 4, "optimizer": {"name": "sgd", "lr": 0.05, "clip": 5.0},
        },
        "default": {
            "widths": _PAPER_WIDTHS, "examples": 5000, "examples_full": 54210,
            "eval_examples": 1000, "batch": 128, "steps": 150, "eval_every": 10,
            "probe_every": 15, "optimizer": {"name": "sgd", "lr": 0.05, "clip": 5.0},
        },
        "paper": {
            "widths": _PAPER_WIDTHS, "examples": 5000, "examples_full": 54210,
            "eval_examples": 10000, "batch": 128, "steps": None, "epochs": 40,
            "eval_every": None, "probe_every": None,
            "optimizer": {"name": "sgd", "lr": 1e-3, "clip": 5.0},
        },
    },
    "fl": {
        "smoke": {
            "width": 2, "examples": 20, "examples_full": 40, "clients": 3, "sampled": 2,
            "alpha": 0.5, "batch": 4, "rounds": 2, "eval_every": 1, "eval_per_client": 64,
            "probe_every": 2,
            "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 1e-4},
        },
        "default": {
            "width": 8, "examples": 20, "examples_full": 5000, "clients": 4, "sampled": 2,
            "alpha": 0.5, "batch": 4, "rounds": 60, "eval_every": 1, "eval_per_client": 64,
            "probe_every": 6,
            "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 1e-4},
        },
        "paper": {
            "width": 64, "examples": 20, "examples_full": 50000, "needs_data": True,
            "clients": 20, "sampled": 10, "alpha": 0.5, "batch": 64, "rounds": 60,
            "eval_every": 1, "eval_per_client": 512, "probe_every": 6,
            "optimizer": {"name": "sgd", "lr": 1e-3, "momentum": 0.9, "weight_decay": 1e-4},
        },
    },
    "lora": {
        "smoke": {
            "t5": {"d_model": 32, "d_kv": 8, "num_heads": 4, "d_ff": 64, "num_layers": 2},
            "rank": 8, "alpha": 16, "dropout": 0.1, "examples": 16, "examples_full": 16,
            "seq_len": 32, "batch": 4, "steps": 6, "eval_every": 2, "probe_every": 3,
            "optimizer": {"name": "adam", "lr": 1e-3},
        },
        "default": {
            "t5": {"d_model": 64, "d_kv": 16, "num_heads": 4, "d_ff": 256, "num_layers": 2},
            "rank": 8, "alpha": 16, "dropout": 0.1, "examples": 32, "examples_full": 32,
            "seq_len": 48, "batch": 8, "steps": 120, "eval_every": 4, "probe_every": 12,
            "optimizer": {"name": "adam", "lr": 3e-3},
        },
        "paper": {
            "t5": {"d_model": 768, "d_kv": 64, "num_heads": 12, "d_ff": 3072, "num_layers": 12},
            "rank": 8, "alpha": 16, "dropout": 0.1, "examples": 2000, "examples_full": 2000,
            "seq_len": 128, "batch": 16, "steps": 375, "eval_every": 25, "probe_every": 25,
            "optimizer": {"name": "adam", "lr": 1e-3},
        },
    },
}


def panel_settings(panel: str, preset: str) -> dict:
    """A deep copy of the settings of ``panel`` at ``preset``."""
    if panel not in PRESETS:
        raise InputError(f"unknown panel {panel!r} (panels: {', '.join(PRESETS)})")
    if preset not in PRESETS[panel]:
        raise InputError(f"unknown preset {preset!r} (presets: smoke, default, paper)")
    s = copy.deepcopy(PRESETS[panel][preset])
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()}
