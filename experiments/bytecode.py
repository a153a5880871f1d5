"""Bytecode for the modules crosscurv, its command line and its tests import.

``make install`` runs ``python -m crosscurv.experiments.bytecode`` with bytecode writing on: each module it
imports is compiled once and its ``.pyc`` written, so a later process (every ``crosscurv`` command, every test
and its subprocesses) reads it instead of compiling the module again; without it an interpreter that writes no
bytecode (``PYTHONDONTWRITEBYTECODE``) compiles torch anew at each start, several seconds.  Compiling every
file of every installed package instead (``compileall``) takes several times longer: most of them (the
thousands of model files of transformers, the libraries of ray) nothing here imports.  A module missed here is
compiled where it is first imported, as without this step.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

__all__ = ["THIRD_PARTY", "OWN_PACKAGES", "main"]

#: Modules of the dependencies that crosscurv imports inside functions (so importing its own modules does not
#: reach them), and those of the test runner.
THIRD_PARTY = (
    "torch", "torch.func", "torch.fx.experimental.symbolic_shapes", "numpy", "scipy.linalg", "scipy.sparse.linalg",
    "sympy", "mpmath", "matplotlib.pyplot", "matplotlib.ticker", "matplotlib.colors", "matplotlib.image",
    "PIL.Image", "tabulate", "tqdm", "threadpoolctl", "transformers", "transformers.models.t5.modeling_t5",
    "peft", "peft.tuners.lora", "ray", "hypothesis", "pytest", "xdist",
)
#: The repository's own packages (each module of each is imported).
OWN_PACKAGES = ("crosscurv", "crosscurv.theory", "crosscurv.numeric", "crosscurv.experiments")


def _own_modules():
    for name in OWN_PACKAGES:
        package = importlib.import_module(name)
        yield name
        for info in pkgutil.walk_packages(package.__path__, prefix=name + "."):
            yield info.name


def main() -> int:
    """Import every module above (one that fails to import is skipped: its bytecode is left to its first use);
    prints how many were imported."""
    sys.dont_write_bytecode = False
    done = failed = 0
    for name in (*THIRD_PARTY, *_own_modules()):
        if name.endswith("__main__"):
            continue
        try:
            importlib.import_module(name)
            done += 1
        except Exception:  # an optional dependency missing, a module that needs a device: compiled at first use
            failed += 1
    print(f"bytecode: {done} modules imported ({len(sys.modules)} in all), {failed} skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
