"""One run's optimizer state: the step count and ``torch.optim``'s buffers per parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .spec import OptimizerError

__all__ = ["OptimizerState"]


@dataclass
class OptimizerState:
    """One run's optimizer state: ``step`` (steps taken) and ``buffers`` (``{"momentum_buffer":
    {param: Tensor}}`` or ``{"exp_avg": ..., "exp_avg_sq": ...}``; a missing entry is torch's
    initial state).
    """

    step: int = 0
    buffers: dict = field(default_factory=dict)

    def clone(self) -> "OptimizerState":
        return OptimizerState(self.step, {n: {k: v.detach().clone() for k, v in d.items()} for n,
                                          d in self.buffers.items()})

    def state_dict(self) -> dict:
        return {"step": self.step, "buffers": {n: dict(d) for n, d in self.buffers.items()}}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> "OptimizerState":
        try:
            return cls(int(state["step"]), {n: dict(d) for n, d in state["buffers"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise OptimizerError(f"optimizer state is not readable: {exc}") from None
