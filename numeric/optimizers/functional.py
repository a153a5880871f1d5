"""The optimizers as pure maps on dicts of tensors: ``(params, grads, state) -> (new params, new
state)``.

:class:`FunctionalOptimizer` moves the parameters named in ``grads`` with ``torch.optim``'s
arithmetic after per-tensor clipping ``Pi_tau(g) = g min(1, tau / ||g||_F)`` and L2 weight decay:
the step is ``theta - lr phi(g', s)``, ``g' = Pi_tau(g) + wd theta``; each parameter keeps its own
state and step count.  :meth:`FunctionalOptimizer.direction` is ``d(g) = phi(g', s)``, a function
``torch.func.jvp`` differentiates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch

from .spec import ADAM_DEFAULTS, OptimizerError, OptimizerSpec
from .state import OptimizerState

__all__ = ["clip_tensor", "FunctionalOptimizer", "functional_optimizer"]


def clip_tensor(g: torch.Tensor, tau: float | None) -> torch.Tensor:
    """``Pi_tau(g) = g * min(1, tau / ||g||_F)`` (``Pi_tau(0) = 0``); ``g`` itself when ``tau`` is
    ``None``.

    Same shape and dtype as ``g``; differentiable in ``g``.
    """
    if tau is None or not math.isfinite(tau):
        return g
    n = torch.linalg.vector_norm(g)
    factor = torch.where(n > tau, tau / torch.clamp(n, min=torch.finfo(g.dtype).tiny),
                         torch.ones_like(n))
    return g * factor


@dataclass(frozen=True)
class FunctionalOptimizer:
    """An optimizer with step size ``lr``, weight decay ``wd`` and per-tensor clipping ``tau``.

    Attributes:
        spec: the update rule (``sgd``, ``momentum:BETA``, ``adam:B1,B2,EPS``). lr: the step size
        ``eta``. weight_decay: ``wd >= 0`` (``g' = Pi_tau(g) + wd theta``). clip: ``tau > 0``, or
        ``None`` for no clipping.

    The state is ``{"step": {name: t}, "buffers": {buffer: {name: Tensor}}}`` (``torch.optim``'s
    buffer names; a missing entry is ``torch.optim``'s initial state).
    """

    spec: OptimizerSpec
    lr: float
    weight_decay: float = 0.0
    clip: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def describe(self) -> str:
        """``"SGD lr 0.01, momentum 0.9, weight decay 0.0001"``-style text."""
        if self.spec.name == "adam":
            b1, b2 = self.spec.betas
            parts = [f"Adam lr {self.lr:g}, betas {b1:g}/{b2:g}, eps {self.spec.eps:g}"]
        else:
            parts = [f"SGD lr {self.lr:g}"]
            if self.spec.name == "momentum":
                parts.append(f"momentum {self.spec.beta:g}")
        if self.weight_decay:
            parts.append(f"weight decay {self.weight_decay:g}")
        if self.clip is not None:
            parts.append(f"per-tensor clipping at {self.clip:g}")
        return ", ".join(parts)

    def init_state(self, params: Mapping | None = None) -> dict:
        """The initial state (no step taken, no buffer)."""
        return {"step": {}, "buffers": {}}

    def _gradient(self, params: Mapping, grads: Mapping) -> dict:
        """``g' = Pi_tau(g) + wd theta`` (``torch.optim``'s ``g.add(theta, alpha=wd)``) for the
        names in ``grads``."""
        out = {}
        for k, g in grads.items():
            g = clip_tensor(g, self.clip)
            out[k] = g.add(params[k], alpha=self.weight_decay) if self.weight_decay else g
        return out

    def _key_state(self, state: Mapping, k: str) -> OptimizerState:
        bufs = {n: {k: d[k]} for n, d in state["buffers"].items() if k in d}
        return OptimizerState(state["step"].get(k, 0), bufs)

    def direction(self, params: Mapping, grads: Mapping, state: Mapping) -> dict:
        """``d = phi(g', s)`` for the names in ``grads``: the step would be ``theta - lr d``."""
        out = {}
        for k, g in self._gradient(params, grads).items():
            out.update(self.spec.rule.direction(self.spec, self._key_state(state, k), {k: g}))
        return out

    def update(self, params: Mapping, grads: Mapping, state: Mapping) -> tuple[dict, dict]:
        """New values of the names in ``grads`` (the others unchanged) and the new state."""
        new = dict(params)
        steps = dict(state["step"])
        buffers = {n: dict(d) for n, d in state["buffers"].items()}
        for k, g in self._gradient(params, grads).items():
            old = self._key_state(state, k)
            nxt = OptimizerState(old.step + 1, {})
            new.update(self.spec.rule.update(self.spec, [k], params, {k: g}, old, nxt, {
                k: self.lr}))
            steps[k] = nxt.step
            for n, d in nxt.buffers.items():
                buffers.setdefault(n, {})[k] = d[k]
        return new, {"step": steps, "buffers": buffers}


def functional_optimizer(name: str, lr: float, *, momentum: float = 0.0, weight_decay: float = 0.0,
                         clip: float | None = None, betas=ADAM_DEFAULTS[:2],
                         eps: float = ADAM_DEFAULTS[2]) -> FunctionalOptimizer:
    """A :class:`FunctionalOptimizer` from ``torch.optim``-style settings.

    ``name`` is ``"sgd"`` (``momentum > 0`` gives the ``momentum:BETA`` rule) or ``"adam"``.

    Raises:
        OptimizerError: an unknown name or a setting out of range.
    """
    if name == "sgd":
        if not 0.0 <= momentum < 1.0:
            raise OptimizerError(f"momentum must satisfy 0 <= momentum < 1, got {momentum!r}")
        spec = OptimizerSpec("momentum", beta=float(momentum)) if momentum else OptimizerSpec()
    elif name == "adam":
        spec = OptimizerSpec("adam", betas=tuple(float(b) for b in betas), eps=float(eps))
    else:
        raise OptimizerError(f"unknown optimizer {name!r}: use sgd or adam")
    if not (math.isfinite(lr) and lr > 0):
        raise OptimizerError(f"lr must be finite and > 0, got {lr!r}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise OptimizerError(f"weight_decay must be finite and >= 0, got {weight_decay!r}")
    if clip is not None and not clip > 0:
        raise OptimizerError(f"clip must be > 0 or None, got {clip!r}")
    return FunctionalOptimizer(spec, float(lr), float(weight_decay), clip)
