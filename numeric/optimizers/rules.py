"""The optimizers, by name: each is one module of this package (:mod:`.sgd`, :mod:`.momentum`,
:mod:`.adam`).

A new optimizer is a new module with the same names (see :mod:`.sgd`) and one line here.
"""

from __future__ import annotations

from . import adam, momentum, sgd

#: ``{name: rule module}`` in the order the usage text lists them.
RULES = {"sgd": sgd, "momentum": momentum, "adam": adam}
#: The optimizers' names (:data:`RULES`).
OPTIMIZERS = tuple(RULES)
#: The state buffers of each optimizer (``torch.optim``'s names), in a fixed order.
STATE_BUFFERS = {name: rule.BUFFERS for name, rule in RULES.items()}
