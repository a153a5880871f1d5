"""crosscurv.lazy: a package's names imported on first use (PEP 562)."""

from __future__ import annotations

import sys

import pytest

from crosscurv.lazy import lazy_exports


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """A package ``lazypkg`` exporting ``VALUE`` from ``lazypkg.impl`` lazily; ``lazypkg.broken``
    imports a module that does not exist."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        "from crosscurv.lazy import lazy_exports\n__all__ = ['VALUE']\n__getattr__, __dir__ = "
        "lazy_exports(__name__, {'VALUE': 'lazypkg.impl'}, submodules=True)\n")
    (root / "impl.py").write_text("IMPORTS = []\nIMPORTS.append(1)\nVALUE = 42\n")
    (root / "other.py").write_text("X = 1\n")
    (root / "broken.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        del sys.modules[name]


def test_a_name_is_imported_on_first_use_and_kept(package):
    import lazypkg

    assert "lazypkg.impl" not in sys.modules
    assert "VALUE" in dir(lazypkg)
    assert lazypkg.VALUE == 42 and "lazypkg.impl" in sys.modules
    assert vars(lazypkg)["VALUE"] == 42  # stored: the next look-up does not reach __getattr__
    assert sys.modules["lazypkg.impl"].IMPORTS == [1]


def test_submodules_resolve_and_unknown_names_are_attribute_errors(package):
    import lazypkg

    assert lazypkg.other.X == 1
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        lazypkg.nothing
    # a real import error is not hidden
    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        lazypkg.broken


def test_without_submodules_only_the_exports_resolve():
    getattr_, dir_ = lazy_exports("crosscurv", {"parse_pattern": "crosscurv.theory"})
    assert getattr_("parse_pattern") is sys.modules["crosscurv.theory"].parse_pattern
    with pytest.raises(AttributeError):
        getattr_("theory_not_exported")
