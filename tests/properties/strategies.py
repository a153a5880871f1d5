"""The strategies of the property tests (:mod:`crosscurv.testing.strategies`) and their example
counts.

The grid of every property is ``eta0 * 2^-k``, ``k = 0..GRID_POINTS-1``, with ``eta0`` derived from
the instance's curvature scale (:mod:`crosscurv.experiments.scaling`).
"""

from __future__ import annotations

import math

from hypothesis import settings

from crosscurv.testing.strategies import (  # noqa: F401 - re-exported for the property tests
                                          ProblemSpec,
                                          acyclic_patterns,
                                          bilinear_specs,
                                          block_orders,
                                          cyclic_pair_sets,
                                          problem_specs,
                                          quartic_specs,
                                          seeds,
                                          tanh_mlp_specs,
                                          )

#: Points of every step-size grid ``eta0 * 2^-k``, ``k = 0..GRID_POINTS-1``.
GRID_POINTS = 6


def examples(fraction: float = 1.0) -> settings:
    """``settings`` with ``fraction`` of the active profile's ``max_examples`` (at least 2)."""
    return settings(max_examples=max(2, int(math.ceil(settings.default.max_examples * fraction))))
