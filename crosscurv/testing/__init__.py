"""Checks of the paper for your own implementation, as a pytest plugin, and Hypothesis strategies.

One decorated test runs every check on your implementation, one test per check::

    from crosscurv.testing import Implementation, parametrize_with_checks

    def step(task, params, pattern, lr): ...          # your block-scheme step

    @parametrize_with_checks(Implementation(step, name="mine"))
    def test_crosscurv(implementation, check):
        check(implementation)

* :class:`Implementation`: what you provide (with torch ``step``, ``cross_curvature``,
  ``protocol``; without torch ``records`` and ``one_step`` on the golden cases, as plain data;
  :mod:`crosscurv.testing.implementation`); :func:`reference_implementation` is crosscurv's own,
  which passes every check;
* :func:`parametrize_with_checks` and :data:`CHECKS` (:mod:`crosscurv.testing.checks`: the step is
  the declared scheme, the one-step and recursion remainders are ``O(eta^3)``, the cumulative error
  is ``O(eta^2)`` at fixed ``eta K``, GS orders agree to ``O(eta^3)``, the records and the one-step
  quantities agree with the golden cases, :mod:`crosscurv.testing.golden`);
* the assertion helpers :func:`assert_step_is`, :func:`assert_observed_order` (defined in
  :mod:`crosscurv.numeric.testing`), :func:`assert_records_match` and
  :func:`assert_one_step_match`, and the verdicts :func:`check_records`, :func:`check_one_step`
  behind them (:mod:`crosscurv.experiments.conformance.golden_check`: the comparison of
  ``validate-records``, with its formula-level diagnoses; no torch);
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
    "assert_records_match": "crosscurv.experiments.conformance.golden_check",
    "assert_one_step_match": "crosscurv.experiments.conformance.golden_check",
    "check_records": "crosscurv.experiments.conformance.golden_check",
    "check_one_step": "crosscurv.experiments.conformance.golden_check",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
