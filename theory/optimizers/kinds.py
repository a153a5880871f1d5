"""The polynomial optimizer kinds, by name: each is one module of this package.

A new kind is a new module with the names of :mod:`.sgd` and one entry here.
"""

from __future__ import annotations

from . import generic, momentum, preconditioner, sgd

#: ``{kind: module}``.
KINDS = {"sgd": sgd, "preconditioner": preconditioner, "momentum": momentum, "generic": generic}
#: optimizer kinds with a polynomial direction map (ring arithmetic)
OPTIMIZER_KINDS = tuple(KINDS)
