"""The install's bytecode step (:mod:`crosscurv.experiments.bytecode`) reaches what crosscurv imports."""

from __future__ import annotations

import ast
import importlib.util
import os

from crosscurv.experiments import bytecode

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_third_party_module_listed_exists():
    missing = [name for name in bytecode.THIRD_PARTY if importlib.util.find_spec(name) is None]
    assert not missing


def test_every_module_of_the_repository_is_walked():
    walked = set(bytecode._own_modules())
    files = []
    for folder in ("theory", "numeric", "experiments"):
        for root, dirs, names in os.walk(os.path.join(REPO, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(root, name), REPO)[:-3].replace(os.sep, ".")
                    files.append("crosscurv." + rel.removesuffix(".__init__"))
    assert files and not [f for f in files if f not in walked]


def test_the_lazy_third_party_imports_of_the_package_are_listed():
    """A dependency imported inside a function of the package (so that importing its modules does not reach
    it) is in THIRD_PARTY, or its bytecode would be compiled anew by every process that needs it."""
    listed = set(bytecode.THIRD_PARTY)
    own = ("crosscurv", "numeric", "theory", "experiments", "tests", "benchmarks")
    missing = set()
    for folder in ("theory", "numeric", "experiments"):
        for root, dirs, names in os.walk(os.path.join(REPO, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in (n for n in names if n.endswith(".py")):
                tree = ast.parse(open(os.path.join(root, name), encoding="utf-8").read())
                for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                    for node in ast.walk(fn):
                        mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                        for mod in mods:
                            top = mod.split(".")[0]
                            spec = importlib.util.find_spec(top)
                            if top in own or spec is None or spec.origin in (None, "built-in", "frozen"):
                                continue
                            if "site-packages" in (spec.origin or "") and not any(
                                    mod == m or mod.startswith(m + ".") or m.startswith(mod + ".") for m in listed):
                                missing.add(mod)
    assert not missing, sorted(missing)



def test_the_second_process_imports_a_share_of_the_listed_modules():
    """The child's share is part of THIRD_PARTY (what it imports is also what the install promises)."""
    assert set(bytecode.WITHOUT_TORCH) <= set(bytecode.THIRD_PARTY)
    assert "torch" not in bytecode.WITHOUT_TORCH and "transformers" not in bytecode.WITHOUT_TORCH
