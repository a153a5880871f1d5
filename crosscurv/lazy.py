"""Public names of a package imported on first use (PEP 562), so that importing the package imports
none of the modules that define them: ``import crosscurv`` and the modules that need no torch
(reading a run's files) stay free of it.

A package declares ``name -> module`` and assigns what :func:`lazy_exports` returns::

    __getattr__, __dir__ = lazy_exports(__name__, {"Task": "crosscurv.numeric.task", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], submodules: bool = False):
    """``(__getattr__, __dir__)`` for the package ``package``.

    Args:
        package: the package's ``__name__``. exports: public name -> the module (full dotted name)
            that defines it; the first look-up imports the module and stores the value in the
            package, so later look-ups skip ``__getattr__``.
        submodules: an unknown name that is a submodule of the package resolves to it
            (``crosscurv.numeric.tree``), as it would after an eager import of the package's
            modules.

    Raises (from ``__getattr__``):
        AttributeError: a name that is neither exported nor (with ``submodules``) a submodule.
    """

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            if submodules and not name.startswith("__"):
                try:
                    return importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as exc:
                    if exc.name != f"{package}.{name}":
                        raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
