"""A loss that is a chain of per-block stages, and the scheme step's block gradients along it.

A task may declare that its loss is a composition in block order,

    L(theta) = head(h_N),    h_l = f_l(theta_l, h_{l-1}),    h_0 = the input,

stage ``f_l`` reading block ``l`` only. A scheme step's block gradients are taken at points that
differ from ``theta^k`` only in the blocks already updated, so the forward pass starts at the first
stage that changed; the numbers are the same bit for bit. :class:`Chain` is the declaration
(:attr:`crosscurv.numeric.task.Task.chain`); :class:`PrefixCache` serves the block gradients of one
scheme step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from .hvp import block_grad

__all__ = ["Chain", "PrefixCache"]

Stage = Callable[[Mapping, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Chain:
    """``L(theta) = head(f_N(theta, ... f_1(theta, input)))``, stage ``l`` reading block ``l``'s
    parameters only.

    Args:
        stages: ``f_1, ..., f_N``, one per block in the task's block order; ``f_l(params, h)``
            takes the full parameter dict (it reads block ``l``'s entries) and ``h_{l-1}`` (a
            tensor), and returns ``h_l``.
        input: ``h_0`` (a tensor; it never requires grad). head: ``h_N -> L``, a 0-dim tensor.

    ``loss(params)`` must equal the task's loss function:
    :meth:`crosscurv.numeric.task.Task.check_loss` compares the two at ``theta^0``.
    """

    stages: Sequence[Stage]
    input: torch.Tensor
    head: Callable[[torch.Tensor], torch.Tensor]

    def loss(self, params: Mapping) -> torch.Tensor:
        """``L(params)`` through the whole chain."""
        h = self.input
        for stage in self.stages:
            h = stage(params, h)
        return self.head(h)


class PrefixCache:
    """The stage outputs of the last point evaluated, for the block gradients of one scheme step.

    Args:
        chain: the task's :class:`Chain`.
        keys: parameter names of each block (``block_keys(task)``), in stage order.

    :meth:`block_grad` takes the points of the step in any order; it recomputes
    from the first stage whose parameters are not the very tensors (``is``) of
    the previous point, or from the first differentiated block if that comes
    earlier.  Keep one cache per step: it holds ``N`` activations.
    """

    def __init__(self, chain: Chain, keys: Sequence[Sequence[str]]):
        if len(chain.stages) != len(keys):
            raise ValueError(f"the chain has {len(chain.stages)} stages for {len(keys)} blocks")
        self.chain = chain
        self.keys = [list(k) for k in keys]
        self._stage_of = {k: l for l, ks in enumerate(self.keys) for k in ks}
        # _h[l] = h_l (detached) of the cached point
        self._h: list[torch.Tensor] = [chain.input.detach()]
        self._seen: list[tuple] = []  # the parameter tensors of stage l at the cached point

    def _first_changed(self, params: Mapping) -> int:
        for l, seen in enumerate(self._seen):
            if any(params[k] is not t for k, t in zip(self.keys[l], seen)):
                return l
        return len(self._seen)

    def block_grad(self, params: Mapping, wrt: Sequence[str]) -> dict:
        """``grad_wrt L(params)``: :func:`crosscurv.numeric.hvp.block_grad` of the loss run forward
        from the cached prefix."""
        wrt = list(wrt)
        unknown = [k for k in wrt if k not in self._stage_of]
        if unknown:
            raise ValueError(f"block_grad: unknown parameter names {unknown}")
        start = min(self._first_changed(params), min(self._stage_of[k] for k in wrt))
        del self._h[start + 1:], self._seen[start:]

        def from_prefix(p: Mapping) -> torch.Tensor:
            h = self._h[start]
            for l in range(start, len(self.keys)):
                h = self.chain.stages[l](p, h)
                self._h.append(h.detach())
                self._seen.append(tuple(params[k] for k in self.keys[l]))
            return self.chain.head(h)

        return block_grad(from_prefix, params, wrt)
