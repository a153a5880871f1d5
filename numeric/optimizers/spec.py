"""What ``--optimizer`` asks for: :class:`OptimizerSpec`, its parser and the error of a bad spec."""

from __future__ import annotations

from dataclasses import dataclass

from crosscurv.theory.errors import OptimizerError

from .rules import RULES

__all__ = ["OptimizerError", "OptimizerSpec", "ADAM_DEFAULTS", "parse_optimizer"]


#: ``torch.optim.Adam``'s ``(beta1, beta2, eps)``.
ADAM_DEFAULTS = (0.9, 0.999, 1e-8)


@dataclass(frozen=True)
class OptimizerSpec:
    """What ``--optimizer`` asks for: ``name`` (a key of :data:`RULES`), ``beta`` (heavy ball),
    ``betas`` and ``eps`` (Adam).
    """

    name: str = "sgd"
    beta: float = 0.0
    betas: tuple = ADAM_DEFAULTS[:2]
    eps: float = ADAM_DEFAULTS[2]

    @property
    def rule(self):
        """The module of this optimizer's update rule (:data:`crosscurv.numeric.optimizers.RULES`).
        """
        return RULES[self.name]

    @property
    def stateful(self) -> bool:
        return bool(self.rule.BUFFERS)

    def describe(self) -> str:
        """Canonical spec text (parses back to the same spec)."""
        return self.rule.describe(self)

    def to_dict(self) -> dict:
        return {"name": self.name, "spec": self.describe(), **self.rule.settings(self)}


def parse_optimizer(text: str | OptimizerSpec | None) -> OptimizerSpec:
    """Parse ``NAME[:ARGS]``: ``sgd``, ``momentum:BETA`` (``0 <= BETA < 1``) or
    ``adam[:B1,B2,EPS]``.

    Raises:
        OptimizerError: one line naming what is wrong.
    """
    if isinstance(text, OptimizerSpec):
        return text
    if text is None:
        return OptimizerSpec()
    if not isinstance(text, str):
        raise OptimizerError(f"optimizer must be text, got {type(text).__name__}")
    spec = text.strip()
    name, sep, args = spec.partition(":")
    name = name.strip().lower()
    if name not in RULES:
        usages = [r.USAGE for r in RULES.values()]
        raise OptimizerError(f"unknown optimizer {spec!r}: use {', '.join(usages[:-1])} or "
                             f"{usages[-1]}")
    return OptimizerSpec(name, **RULES[name].parse(spec, sep, args))
