"""Checks of the paper for your own implementation, as a pytest plugin, and Hypothesis strategies.

One decorated test runs every check on your implementation, one test per check::

    from crosscurv.testing import Implementation, parametrize_with_checks

    def step(task, params, pattern, lr): ...          # your block-scheme step

    @parametrize_with_checks(Implementation(step, name="mine"))
    def test_crosscurv(implementation, check):
        check(implementation)

* :class:`Implementation`: what you provide (``step``, optionally ``cross_curvature`` and
  ``protocol``; :mod:`crosscurv.testing.implementation`); :func:`reference_implementation` is
  crosscurv's own, which passes every check;
* :func:`parametrize_with_checks` and :data:`CHECKS` (:mod:`crosscurv.testing.checks`: the step is
  the declared scheme, the one-step and recursion remainders are ``O(eta^3)``, the cumulative error
  is ``O(eta^2)`` at fixed ``eta K``, GS orders agree to ``O(eta^3)``, the records agree with the
  golden cases);
* the assertion helpers :func:`assert_step_is`, :func:`assert_observed_order`,
  :func:`assert_records_match` (defined in :mod:`crosscurv.numeric.testing`);
* :mod:`crosscurv.testing.strategies`: Hypothesis strategies for delay patterns and block problems.

The pytest plugin (:mod:`crosscurv.testing.plugin`) is registered by crosscurv's ``pytest11`` entry
point. Names are imported on first use, so loading the plugin imports no torch.
"""

from __future__ import annotations

from crosscurv.lazy import lazy_exports

_EXPORTS = {
    "Implementation": "crosscurv.testing.implementation",
    "as_implementation": "crosscurv.testing.implementation",
    "reference_implementation": "crosscurv.testing.implementation",
    "Check": "crosscurv.testing.checks",
    "CHECKS": "crosscurv.testing.checks",
    "parametrize_with_checks": "crosscurv.testing.parametrize",
    "assert_step_is": "crosscurv.numeric.testing",
    "assert_observed_order": "crosscurv.numeric.testing",
    "assert_records_match": "crosscurv.numeric.testing",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
