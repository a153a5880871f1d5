"""Bytecode for the modules crosscurv, its command line and its tests import.

``make install`` runs ``python -m crosscurv.experiments.bytecode`` with bytecode writing on: each module it
imports is compiled once and its ``.pyc`` written, so a later process (every ``crosscurv`` command, every test
and its subprocesses) reads it instead of compiling the module again; without it an interpreter that writes no
bytecode (``PYTHONDONTWRITEBYTECODE``) compiles torch anew at each start, several seconds.  Compiling every
file of every installed package instead (``compileall``) takes several times longer: most of them (the
thousands of model files of transformers, the libraries of ray) nothing here imports.  A module missed here is
compiled where it is first imported, as without this step.

The imports run in two processes at once, one per core of a two-core machine: a child imports the
dependencies that do not need torch (:data:`WITHOUT_TORCH`) while this process imports torch, the modules
built on it and crosscurv's own.  Two processes that compile the same module write the same bytecode
(each write is atomic).
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

__all__ = ["THIRD_PARTY", "WITHOUT_TORCH", "OWN_PACKAGES", "main"]

#: Modules of the dependencies that crosscurv imports inside functions (so importing its own modules does not
#: reach them), and those of the test runner.
THIRD_PARTY = (
    "torch", "torch.func", "torch.fx.experimental.symbolic_shapes", "numpy", "scipy.linalg", "scipy.sparse.linalg",
    "sympy", "mpmath", "matplotlib.pyplot", "matplotlib.ticker", "matplotlib.colors", "matplotlib.image",
    "PIL.Image", "tabulate", "tqdm", "threadpoolctl", "transformers", "transformers.models.t5.modeling_t5",
    "peft", "peft.tuners.lora", "ray", "hypothesis", "pytest", "xdist",
)
#: The modules of :data:`THIRD_PARTY` that import no torch: the child process's share.
WITHOUT_TORCH = (
    "numpy", "scipy.linalg", "scipy.sparse.linalg", "sympy", "mpmath", "matplotlib.pyplot", "matplotlib.ticker",
    "matplotlib.colors", "matplotlib.image", "PIL.Image", "tabulate", "tqdm", "threadpoolctl", "ray", "hypothesis",
    "pytest", "xdist",
)
#: The repository's own packages (each module of each is imported).
OWN_PACKAGES = ("crosscurv", "crosscurv.theory", "crosscurv.numeric", "crosscurv.experiments")


def _own_modules():
    for name in OWN_PACKAGES:
        package = importlib.import_module(name)
        yield name
        for info in pkgutil.walk_packages(package.__path__, prefix=name + "."):
            yield info.name


def _import_all(names) -> tuple[int, int]:
    """Import each module of ``names`` (one that fails to import is skipped: its bytecode is left to its first
    use); returns how many were imported and how many skipped."""
    done = failed = 0
    for name in names:
        if name.endswith("__main__"):
            continue
        try:
            importlib.import_module(name)
            done += 1
        except Exception:  # an optional dependency missing, a module that needs a device: compiled at first use
            failed += 1
    return done, failed


def main(argv=None) -> int:
    """Import every module above, :data:`WITHOUT_TORCH` in a child process (``--without-torch``: be that
    child); prints how many were imported."""
    argv = sys.argv[1:] if argv is None else argv
    sys.dont_write_bytecode = False
    if argv == ["--without-torch"]:
        _import_all(WITHOUT_TORCH)
        return 0
    child = subprocess.Popen([sys.executable, "-m", "crosscurv.experiments.bytecode", "--without-torch"])
    done, failed = _import_all([n for n in THIRD_PARTY if n not in WITHOUT_TORCH])
    own_done, own_failed = _import_all(_own_modules())
    child.wait()
    print(f"bytecode: {done + own_done} modules imported here and {len(WITHOUT_TORCH)} in a second process "
          f"({len(sys.modules)} in all here), {failed + own_failed} skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
