"""The experiments layer of crosscurv (imports :mod:`crosscurv.theory`, :mod:`crosscurv.numeric`).

Subpackages: :mod:`.tasks`, :mod:`.problems`, :mod:`.scaling`, :mod:`.studies`, :mod:`.sweep`,
:mod:`.motivation`, :mod:`.reports`, :mod:`.conformance`, :mod:`.cli`. Nothing is re-exported here,
so that ``crosscurv derive`` starts without importing torch.
"""

__all__: list[str] = []
