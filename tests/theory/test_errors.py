"""One error hierarchy (``crosscurv.theory.errors``): a base and the kinds a caller tells apart, in
one module."""

from __future__ import annotations

import ast
import importlib

import pytest

from crosscurv.theory import errors
from tests.test_import_graph import modules

KINDS = ("InputError", "RecordsError", "ResumeError", "SettingsChangedError")


def test_the_hierarchy_is_a_base_and_three_kinds():
    assert issubclass(errors.InputError, ValueError)
    assert errors.RecordsError.__bases__ == (errors.InputError,)
    assert errors.ResumeError.__bases__ == (errors.InputError,)
    assert errors.SettingsChangedError.__bases__ == (errors.ResumeError,)
    classes = {
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)
    }
    named = {n for n in classes if vars(errors)[n].__name__ == n}
    assert named == set(KINDS)
    assert all(vars(errors)[n] is errors.InputError for n in classes - named)


@pytest.mark.parametrize(
    "module, name",
    [
        ("crosscurv", "InputError"),
        ("crosscurv", "PatternError"),
        ("crosscurv", "TaskError"),
        ("crosscurv", "RecordsError"),
        ("crosscurv", "ProtocolError"),
        ("crosscurv.theory", "ModelError"),
        ("crosscurv.theory", "CoefficientInputError"),
        ("crosscurv.numeric", "TaskError"),
        ("crosscurv.numeric.optimizers", "OptimizerError"),
        ("crosscurv.numeric.protocol", "ResumeError"),
        ("crosscurv.numeric.protocol", "SettingsChangedError"),
        ("crosscurv.experiments.tasks.errors", "DataError"),
    ],
)
def test_every_exported_name_still_resolves_to_one_of_them(module, name):
    value = getattr(importlib.import_module(module), name)
    assert value is getattr(errors, name) and issubclass(value, errors.InputError)


def test_no_other_module_defines_an_error_class():
    """A class deriving from any name of the hierarchy is defined in ``crosscurv.theory.errors``
    only."""
    names = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)}
    found = []
    for name, path, _ in modules():
        if name == "crosscurv.theory.errors":
            continue
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {
                    b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                    for b in node.bases
                }
                if bases & (names | {"ValueError"}):
                    found.append(f"{name}.{node.name}")
    assert not found, found
