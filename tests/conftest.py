"""Test-suite configuration: the repository root on ``sys.path`` and the Hypothesis profiles.

Profiles (``tests/properties`` draws problem instances with Hypothesis):

* ``ci``: the default (``make test``, ``.ci/run``): derandomised (the same examples on every run, no
  example database), no deadline (the examples run whole optimisation trajectories), a modest number
  of examples so that the property tests take a few minutes on a 2-core CPU.  ``make test`` is the
  theory checker people run to validate their work: it must not fail on an instance nobody drew
  before.
* ``dev``: ``HYPOTHESIS_PROFILE=dev``: random examples (exploration; failures found are kept in
  ``.hypothesis/`` and replayed), the same modest count.
* ``thorough``: ``HYPOTHESIS_PROFILE=thorough`` (``make test-thorough``): many more random examples;
  expect tens of minutes.  What exploration has found is in README "Optimizers" (instances where an
  order cannot be observed on the test's grid).

``HYPOTHESIS_PROFILE`` overrides the choice in every case. Each property test sets its own
``max_examples`` relative to the profile through :func:`tests.properties.strategies.examples`.

Threads: a pytest-xdist worker (``make test`` runs one per core) computes its in-process tests on
one intra-op thread, as the command line does by default; torch's default of one thread per core
would put two threads of each worker on every core. ``OMP_NUM_THREADS`` in the environment is kept
(``make test-portable`` runs the tests under two threads that way); commands the tests start in a
subprocess pick their own count as a user's would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("OMP_NUM_THREADS"):
    import torch

    torch.set_num_threads(1)

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    settings = None

if settings is not None:
    _common = dict(
        deadline=None,
        # problem instances are built from drawn seeds; building one (a curvature
        # scale by power iteration) is slow compared with Hypothesis' expectations
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    settings.register_profile("ci", max_examples=10, derandomize=True, database=None, **_common)
    settings.register_profile("dev", max_examples=10, **_common)
    settings.register_profile("thorough", max_examples=100, **_common)
    _profile = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
    settings.load_profile(_profile)


#: The longest test files (about 30 s or more of a ``make test`` run on 2 cores, measured per file
#: with ``--junitxml``), longest first. pytest-xdist (``--dist loadfile``) hands files to the
#: workers in collection order (:func:`pytest_configure` keeps it from re-sorting them by their
#: number of tests), so these start first and the short files fill in behind them: the run does not
#: end on one long file while the other worker idles.
LONGEST_FILES = (
    "tests/experiments/reports/test_report_check.py",
    "tests/experiments/cli/test_cli_extend.py",
    "tests/properties/test_optimizers.py",
    "tests/experiments/cli/test_validate_real_code.py",
    "tests/experiments/cli/test_advise_cli.py",
    "tests/experiments/test_sweep_ray.py",
    "tests/experiments/cli/test_smoke_presets.py",
    "tests/properties/test_recursion.py",
    "tests/experiments/cli/test_cli_threads.py",
    "tests/experiments/tasks/test_presets_regime.py",
    "tests/experiments/tasks/test_portable_inputs.py",
    "tests/properties/test_cumulative.py",
    "tests/experiments/test_scaling.py",
    # 17.4 s alone (test_scaling 19.2, test_cumulative 16.8)
    "tests/crosscurv/test_testing_plugin.py",
    "tests/test_docs.py",
)


def pytest_configure(config):
    """pytest-xdist's scheduler keeps the collection order of the files (:data:`LONGEST_FILES`
    first): its default re-sorts them by their number of tests, which would start the long files
    with few tests (the property tests) last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """The files of :data:`LONGEST_FILES` first, in that order; the others after them, in their own
    order."""
    missing = [f for f in LONGEST_FILES if not os.path.isfile(os.path.join(_ROOT, f))]
    if missing:
        raise pytest.UsageError("tests/conftest.py LONGEST_FILES names files that do not exist: "
                                f"{missing}")
    rank = {f: i for i, f in enumerate(LONGEST_FILES)}
    # stable: the rest keep order
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
