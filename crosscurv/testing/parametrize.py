"""``parametrize_with_checks``: one pytest test per implementation and check (as scikit-learn)."""

from __future__ import annotations

from typing import Iterable, Mapping

from .checks import CHECKS
from .implementation import as_implementation

__all__ = ["parametrize_with_checks"]


def parametrize_with_checks(
    implementations,
    *,
    checks: Iterable[str] | None = None,
    expected_failures: Mapping[str, str] | None = None,
):
    """A ``pytest.mark.parametrize`` over every ``(implementation, check)`` pair.

    Decorate one test that calls the check on the implementation::

        from crosscurv.testing import parametrize_with_checks

        @parametrize_with_checks(mine)
        def test_crosscurv(implementation, check):
            check(implementation)

    pytest then runs one test per check, named ``test_crosscurv[<name>-<check>]``; each fails with
    its evidence (:mod:`crosscurv.testing.checks`) or is skipped when the implementation lacks a
    function the check needs.

    Args:
        implementations: one implementation or a list of them:
            :class:`~crosscurv.testing.Implementation` or any object or module with some of
            ``step``, ``cross_curvature``, ``protocol``, ``records``, ``one_step`` (and optionally
            ``name``).
        checks: the names of the checks to run (default all of
            :data:`crosscurv.testing.checks.CHECKS`).
        expected_failures: ``{check name: reason}``: those checks are marked
            ``xfail(strict=True)`` (a known deviation stays visible, and passing again is
            reported).

    Raises:
        ValueError: an unknown check name, or two implementations with the same name.
    """
    import pytest

    if isinstance(implementations, (list, tuple)):
        impls = [as_implementation(i) for i in implementations]
    else:
        impls = [as_implementation(implementations)]
    names = [i.name for i in impls]
    if len(set(names)) != len(names):
        raise ValueError(f"implementations need distinct names for the test ids, got {names}")
    known = {c.name: c for c in CHECKS}
    wanted = list(checks) if checks is not None else list(known)
    expected = dict(expected_failures or {})
    unknown = [c for c in wanted + list(expected) if c not in known]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)} (checks: {', '.join(known)})")
    params = []
    for impl in impls:
        for name in wanted:
            marks = (
                [pytest.mark.xfail(reason=expected[name], strict=True)] if name in expected else []
            )
            params.append(pytest.param(impl, known[name], id=f"{impl.name}-{name}", marks=marks))
    return pytest.mark.parametrize("implementation, check", params)
