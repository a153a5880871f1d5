"""Per-block step sizes (``--block-lr NAME=FACTOR,...``) and a run's checked optimizer
(:class:`OptimizerSetup`).

Block ``i`` moves with ``eta_i = lr * f_i``; unnamed blocks have ``f_i = 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .rules import STATE_BUFFERS
from .spec import OptimizerError, OptimizerSpec, parse_optimizer

__all__ = ["parse_block_lr", "block_factors", "param_lrs", "OptimizerSetup", "optimizer_setup"]


def parse_block_lr(text: str | Mapping | None, block_names: Sequence[str]) -> dict:
    """``NAME=FACTOR,...`` as ``{block name: factor}`` (``NAME`` a block name or 1-based index,
    ``FACTOR`` finite ``> 0``; empty text: none). Raises :class:`OptimizerError`.
    """
    names = [str(b) for b in block_names]
    if text is None:
        return {}
    items = text.items() if isinstance(text, Mapping) else None
    if items is None:
        if not isinstance(text, str):
            raise OptimizerError("--block-lr must be text NAME=FACTOR,..., got "
                                 f"{type(text).__name__}")
        if not text.strip():
            return {}
        items = []
        for part in text.split(","):
            key, eq, val = part.partition("=")
            if not eq or not key.strip() or not val.strip():
                raise OptimizerError(
                    f"--block-lr entries must be NAME=FACTOR, got {part.strip()!r}")
            items.append((key.strip(), val.strip()))
    out: dict = {}
    for key, val in items:
        key = str(key)
        if key not in names:
            if key.isdigit() and 1 <= int(key) <= len(names):
                key = names[int(key) - 1]
            else:
                raise OptimizerError(f"--block-lr names unknown block {key!r}; blocks are "
                                     f"{', '.join(names)}")
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise OptimizerError(f"--block-lr factor for block {key!r} must be a number, got "
                                 f"{val!r}") from None
        if not math.isfinite(f) or f <= 0.0:
            raise OptimizerError(f"--block-lr factor for block {key!r} must be finite and > 0, "
                                 f"got {val!r}")
        if key in out:
            raise OptimizerError(f"--block-lr names block {key!r} twice")
        out[key] = f
    return out


def block_factors(task, block_lr: str | Mapping | None = None) -> list[float]:
    """Step-size factor ``f_i`` of every block of ``task`` in block order (unnamed blocks 1)."""
    named = parse_block_lr(block_lr, task.block_names)
    return [named.get(b, 1.0) for b in task.block_names]


def param_lrs(task, lr, factors: Sequence[float] | None = None) -> dict:
    """``{parameter name: lr * f_i}`` (``lr`` itself where ``f_i == 1``, so plain runs keep their
    numbers)."""
    factors = [1.0] * task.n_blocks if factors is None else list(factors)
    if len(factors) != task.n_blocks:
        raise OptimizerError(f"{len(factors)} step-size factors for {task.n_blocks} blocks")
    out = {}
    for b, f in zip(task.block_names, factors):
        for k in task.blocks[b]:
            out[k] = lr if f == 1.0 else lr * f
    return out


@dataclass(frozen=True)
class OptimizerSetup:
    """A run's checked optimizer: ``spec``, ``factors`` (``f_i`` in block order) and ``named``
    (``{block name: f_i}`` for ``f_i != 1``, as run summaries record ``--block-lr``).
    """

    spec: OptimizerSpec
    factors: tuple
    named: dict

    @property
    def plain(self) -> bool:
        """``sgd`` with every factor 1: the paper's setting (the protocol's original path)."""
        return self.spec.name == "sgd" and not self.named

    @property
    def buffers(self) -> tuple:
        """Names of the optimizer's state buffers (:data:`STATE_BUFFERS`)."""
        return STATE_BUFFERS[self.spec.name]

    @property
    def f_max(self) -> float:
        return max(self.factors, default=1.0)

    def settings(self) -> dict:
        """``{"optimizer": spec dict, "block_lr": named factors}`` for a run's settings."""
        return {"optimizer": self.spec.to_dict(), "block_lr": dict(self.named)}

    def describe(self) -> str:
        """``"momentum:0.9, block-lr B=4.0"``-style text."""
        text = self.spec.describe()
        if self.named:
            text += ", block-lr " + ",".join(f"{b}={f!r}" for b, f in self.named.items())
        return text


def optimizer_setup(task, optimizer: str | OptimizerSpec | None = None,
                    block_lr: str | Mapping | None = None) -> OptimizerSetup:
    """Check ``--optimizer`` and ``--block-lr`` against ``task``'s blocks (factors of 1 are
    dropped).

    Raises:
        OptimizerError: one line naming the bad spec.
    """
    spec = parse_optimizer(optimizer)
    named = parse_block_lr(block_lr, task.block_names)
    factors = tuple(named.get(b, 1.0) for b in task.block_names)
    return OptimizerSetup(spec, factors, {b: f for b, f in zip(task.block_names, factors) if f
                                          != 1.0})
