"""pytest helpers for projects that implement block schemes or the paper's estimates.

Plain functions raising :class:`AssertionError` with the evidence in the message; their public home
is :mod:`crosscurv.testing`::

    from crosscurv.testing import assert_observed_order, assert_step_is

    def test_my_alternating_lora_step():
        assert_step_is(my_step, my_task, "gs:B,A")      # exact GS, B then A

    def test_my_gap_estimate_is_third_order():
        etas = [0.1 * 2.0**-k for k in range(5)]
        errors = [abs(my_gap(e) - my_estimate(e)) for e in etas]
        assert_observed_order(errors, etas, 3, floor=1e-14)
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from crosscurv.theory.patterns import DelayPattern

from .orders import OrderStudy, observe_order

__all__ = ["assert_observed_order", "assert_step_is"]


def assert_observed_order(
    errors: Sequence[float],
    etas: Sequence[float],
    order: float,
    *,
    tol: float = 0.2,
    floor: float = 0.0,
    min_points: int = 3,
    at_least: bool = False,
    what: str = "error",
) -> OrderStudy:
    """Assert that ``errors`` behave like ``C eta^order``.

    Points with ``|error| <= floor`` (round-off) are dropped and listed.  With
    the kept points (at least ``min_points``), the least-squares slope of
    ``log|error|`` on ``log eta`` must lie in ``[order - tol, order + tol]``
    and every pairwise rate must be at least ``order - tol``; with
    ``at_least=True`` only the lower bounds apply (a higher order passes).

    Args:
        errors: remainders ``r(eta_k)`` (signed values allowed).
        etas: step sizes, decreasing (e.g. ``eta0 * 2^-k``).
        order: the expected order ``p``.
        tol: allowed deviation of the observed order.
        floor: round-off floor; points at or below it are dropped.
        min_points: kept points needed (fewer fails: no order is observable).
        at_least: accept any observed order ``>= order - tol``.
        what: name of the quantity in the message.

    Returns:
        the :class:`crosscurv.numeric.orders.OrderStudy` (for further checks).

    Raises:
        AssertionError: with the error table (eta, error, rate, error/eta^p).
    """
    if len(errors) != len(etas):
        raise AssertionError(f"{len(errors)} errors for {len(etas)} step sizes")
    study = observe_order(etas, errors, floor=floor, expected=order)
    kept = len(study.etas)
    head = f"{what}: expected order {order:g} (tolerance {tol:g}{', at least' if at_least else ''})"
    if kept < min_points:
        raise AssertionError(
            f"{head}: only {kept} of {len(etas)} points lie above the floor {floor:.3g}; "
            f"no order can be observed (lower the floor or use larger step sizes)\n{study.table()}"
        )
    problems = []
    slope = study.slope
    if not math.isfinite(slope) or slope < order - tol or (not at_least and slope > order + tol):
        problems.append(f"least-squares order {slope:.4f}")
    low = [r for r in study.rates if not (math.isfinite(r) and r >= order - tol)]
    if low:
        problems.append(f"pairwise rates below {order - tol:g}: " + ", ".join(f"{r:.3f}"
                                                                              for r in low))
    if problems:
        raise AssertionError(f"{head}; observed " + "; ".join(problems) + "\n" + study.table())
    return study


def assert_step_is(
    step: Callable,
    task,
    pattern: str | DelayPattern,
    *,
    seeds: Sequence[int] = (0, 1),
    eta0: float | None = None,
    n_etas: int = 4,
    rtol: float = 1e-9,
    perturb: float = 0.5,
    max_all_orders: int = 4,
):
    """Assert that ``step(params, lr)`` performs exactly the scheme of ``pattern`` on ``task``.

    Runs :func:`crosscurv.numeric.validation.identify_step` with ``pattern`` declared: the step must
    agree with the exact step of ``pattern`` to round-off (``||U - R|| <= rtol ||R - theta|| + 64
    eps ||theta||``) at every seeded state and every ``eta = eta0 * 2^-k``, and must be a function
    of its input. The failure message is the full report: each candidate (JC, GS orders, the
    declared pattern, the inferred one) with its error and the observed order of the difference, and
    the verdict (e.g. "matches jc; it does NOT perform the declared pattern gs:B,A").

    Args:
        step: ``step(params, lr) -> new params`` (dict of tensors).
        task: a float64 :class:`crosscurv.numeric.Task`.
        pattern: CLI spec (``"gs"``, ``"gs:B,A"``, ``"2<-1"``...) or a
            :class:`DelayPattern`.
        seeds, eta0, n_etas, rtol, perturb, max_all_orders: see
            :func:`crosscurv.numeric.validation.identify_step`.

    Returns:
        the :class:`crosscurv.numeric.validation.StepReport`.
    """
    from .validation import as_user_step, identify_step

    user = as_user_step((task, step, pattern), name=getattr(step, "__name__", "step"))
    report = identify_step(user, seeds=seeds, eta0=eta0, n_etas=max(3, n_etas), rtol=rtol,
                           perturb=perturb, max_all_orders=max_all_orders, fit=True)
    if not report.ok:
        raise AssertionError(f"step does not perform {report.declared_label}: "
                             f"{report.verdict()}\n\n{report.text()}")
    return report
