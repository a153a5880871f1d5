"""Functional optimisers on dicts of tensors: SGD (momentum, weight decay, clipping) and Adam.

Each optimiser is a pure map ``(params, grads, state) -> (new params, new
state)`` on the parameter names it is given, so a block-sequential scheme can
update one block, recompute a gradient at the mixed state, and update the
next block with the same formulas as a simultaneous one.  The formulas are
those of ``torch.optim.SGD`` and ``torch.optim.Adam`` (no dampening, no
Nesterov, no amsgrad):

* SGD: ``d = clip(g) + wd * theta``; with momentum ``mu``:
  ``b <- d`` on the first step, else ``b <- mu * b + d``; ``theta <- theta - lr * b``.
  ``clip`` is the paper's per-tensor clipping
  ``Pi_tau(g) = g * min(1, tau / ||g||_F)`` (``Pi_tau(0) = 0``), or none.
* Adam: ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``,
  ``theta <- theta - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``.

:meth:`Optimizer.direction` is the update direction ``d`` as a function of the
gradient at the current state (``theta <- theta - lr * d(g)``); the
optimizer-aware criterion (:mod:`.criterion`) differentiates it in ``g``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch

from ...numeric.optimizers import ADAM_DEFAULTS

__all__ = ["clip_tensor", "SGD", "Adam", "make_optimizer"]


def _sqrt0(v: torch.Tensor) -> torch.Tensor:
    """``sqrt(v)`` with derivative 0 (not ``inf``) where ``v = 0``: Adam's ``v`` is 0 where every gradient was 0."""
    pos = v > 0
    return torch.where(pos, torch.sqrt(torch.where(pos, v, torch.ones_like(v))), torch.zeros_like(v))


def clip_tensor(g: torch.Tensor, tau: float | None) -> torch.Tensor:
    """``Pi_tau(g) = g * min(1, tau / ||g||_F)`` (``Pi_tau(0) = 0``); ``g`` unchanged when ``tau`` is ``None``."""
    if tau is None or not math.isfinite(tau):
        return g
    n = torch.linalg.vector_norm(g)
    factor = torch.where(n > tau, tau / torch.clamp(n, min=torch.finfo(g.dtype).tiny), torch.ones_like(n))
    return g * factor


@dataclass(frozen=True)
class SGD:
    """SGD with momentum ``mu``, weight decay ``wd`` and per-tensor clipping ``clip`` (``torch.optim.SGD``)."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    clip: float | None = None
    name: str = "sgd"

    def describe(self) -> str:
        parts = [f"SGD lr {self.lr:g}"]
        if self.momentum:
            parts.append(f"momentum {self.momentum:g}")
        if self.weight_decay:
            parts.append(f"weight decay {self.weight_decay:g}")
        if self.clip is not None:
            parts.append(f"per-tensor clipping at {self.clip:g}")
        return ", ".join(parts)

    def init_state(self, params: Mapping) -> dict:
        return {"t": 0, "buf": {}}

    def direction(self, params: Mapping, grads: Mapping, state: Mapping) -> dict:
        """``d(g)`` for the names in ``grads``: the step is ``theta - lr * d``."""
        out = {}
        for k, g in grads.items():
            d = clip_tensor(g, self.clip)
            if self.weight_decay:
                d = d + self.weight_decay * params[k]
            if self.momentum and k in state["buf"]:
                d = self.momentum * state["buf"][k] + d
            out[k] = d
        return out

    def update(self, params: Mapping, grads: Mapping, state: Mapping) -> tuple[dict, dict]:
        """New values of the names in ``grads`` (others untouched) and the new state."""
        d = self.direction(params, grads, state)
        new = dict(params)
        buf = dict(state["buf"])
        for k, dk in d.items():
            new[k] = params[k] - self.lr * dk
            if self.momentum:
                buf[k] = dk
        return new, {"t": state["t"] + 1, "buf": buf}


@dataclass(frozen=True)
class Adam:
    """Adam (``torch.optim.Adam``: no weight decay, no amsgrad)."""

    lr: float
    betas: tuple = ADAM_DEFAULTS[:2]
    eps: float = ADAM_DEFAULTS[2]
    name: str = "adam"

    def describe(self) -> str:
        return f"Adam lr {self.lr:g}, betas {self.betas[0]:g}/{self.betas[1]:g}, eps {self.eps:g}"

    def init_state(self, params: Mapping) -> dict:
        return {"t": {}, "m": {}, "v": {}}

    def _moments(self, grads, state):
        b1, b2 = self.betas
        out = {}
        for k, g in grads.items():
            t = state["t"].get(k, 0) + 1
            m = (1 - b1) * g if k not in state["m"] else b1 * state["m"][k] + (1 - b1) * g
            v = (1 - b2) * g * g if k not in state["v"] else b2 * state["v"][k] + (1 - b2) * g * g
            out[k] = (t, m, v)
        return out

    def direction(self, params: Mapping, grads: Mapping, state: Mapping) -> dict:
        b1, b2 = self.betas
        out = {}
        for k, (t, m, v) in self._moments(grads, state).items():
            out[k] = (m / (1 - b1**t)) / (_sqrt0(v / (1 - b2**t)) + self.eps)
        return out

    def update(self, params: Mapping, grads: Mapping, state: Mapping) -> tuple[dict, dict]:
        b1, b2 = self.betas
        new = dict(params)
        st = {"t": dict(state["t"]), "m": dict(state["m"]), "v": dict(state["v"])}
        for k, (t, m, v) in self._moments(grads, state).items():
            new[k] = params[k] - self.lr * (m / (1 - b1**t)) / (_sqrt0(v / (1 - b2**t)) + self.eps)
            st["t"][k], st["m"][k], st["v"][k] = t, m, v
        return new, st


def make_optimizer(spec: Mapping):
    """An optimiser from a preset's ``optimizer`` dict (``{"name": "sgd"|"adam", ...}``)."""
    spec = dict(spec)
    name = spec.pop("name")
    if name == "sgd":
        return SGD(**spec)
    if name == "adam":
        if "betas" in spec:
            spec["betas"] = tuple(spec["betas"])
        return Adam(**spec)
    raise ValueError(f"unknown optimizer {name!r}")
