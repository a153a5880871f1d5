"""The pytest plugin of crosscurv (entry point ``pytest11``: ``crosscurv.testing.plugin``).

Loaded by pytest in every environment where crosscurv is installed; it imports nothing heavy. It
adds

* the option ``--crosscurv-golden DIR``: the golden folder (``crosscurv golden --out DIR``) the
  checks ``golden_records`` and ``golden_one_step`` compare with, instead of the shipped cases;
* the fixture ``crosscurv_golden``: the path of that folder, for tests of your own;
* a line in the report header when a test uses :func:`crosscurv.testing.parametrize_with_checks`.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("crosscurv", "crosscurv checks (crosscurv.testing)")
    group.addoption(
        "--crosscurv-golden",
        metavar="DIR",
        default=None,
        help="golden folder written by `crosscurv golden --out DIR` for the golden checks "
             "(default: the cases shipped with crosscurv)",
    )


def pytest_configure(config):
    path = config.getoption("crosscurv_golden", None)
    if path is not None:
        if not os.path.isfile(os.path.join(path, "index.json")):
            raise pytest.UsageError(
                f"--crosscurv-golden {path}: no index.json there; write the folder with "
                f"`crosscurv golden --out {path}`"
            )
        from .golden import set_golden_dir

        set_golden_dir(path)


def pytest_report_collectionfinish(config, start_path, items):
    n = sum(1 for item in items if _is_check(item))
    if n:
        from .checks import CHECKS

        return (
            f"crosscurv.testing: {n} check test(s) of {len(CHECKS)} checks "
            "(docs/testing.md says what each asserts)"
        )
    return None


def _is_check(item) -> bool:
    spec = getattr(item, "callspec", None)
    if spec is None:
        return False
    check = spec.params.get("check")
    return type(check).__name__ == "Check" and type(check).__module__ == "crosscurv.testing.checks"


@pytest.fixture(scope="session")
def crosscurv_golden():
    """The golden folder of the golden checks (``--crosscurv-golden``, else the shipped one)."""
    from .golden import golden_dir

    return golden_dir()
