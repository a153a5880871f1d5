"""The protocol's update rules, one module each: the paper's plain steps and a block-separable
optimizer.

:mod:`.base` states the interface (the hooks the iteration body calls); :func:`update_rule` picks
the rule of a run from its optimizer setup (:func:`crosscurv.numeric.optimizers.optimizer_setup`).
"""

from __future__ import annotations

from .base import UpdateRule
from .optimizer import OptimizerRule
from .plain import PlainRule

__all__ = ["UpdateRule", "PlainRule", "OptimizerRule", "update_rule"]


def update_rule(task, setup) -> UpdateRule:
    """:class:`PlainRule` for plain ``sgd`` with every block factor 1 (the paper's protocol, bit for
    bit), else :class:`OptimizerRule` (``setup``: an
    :class:`crosscurv.numeric.optimizers.OptimizerSetup`)."""
    return PlainRule() if setup.plain else OptimizerRule(task, setup)
