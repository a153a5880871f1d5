"""Test-suite configuration: the repository root on ``sys.path`` and the Hypothesis profiles.

Profiles (``tests/properties`` draws problem instances with Hypothesis):

* ``ci``: loaded when the environment variable ``CI`` is set (``.ci/run``
  sets it): derandomised (the same examples on every run), no deadline (the
  examples run whole optimisation trajectories), a modest number of examples
  so that the property tests take a few minutes on a 2-core CPU.
* ``dev``: the default for local runs: random examples, no deadline, the same
  modest count.
* ``thorough``: ``HYPOTHESIS_PROFILE=thorough`` (``make test-thorough``): many
  more examples; expect tens of minutes.

``HYPOTHESIS_PROFILE`` overrides the choice in every case.  Each property test
sets its own ``max_examples`` relative to the profile through
:func:`tests.properties.strategies.examples`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

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
    settings.register_profile("ci", max_examples=10, derandomize=True, **_common)
    settings.register_profile("dev", max_examples=10, **_common)
    settings.register_profile("thorough", max_examples=100, **_common)
    _profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    settings.load_profile(_profile)
