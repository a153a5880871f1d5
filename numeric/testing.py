"""pytest helpers for projects that implement block schemes or the paper's estimates.

Plain functions raising :class:`AssertionError` with the evidence in the
message (pytest shows it), so they work in any test runner::

    from crosscurv.numeric.testing import assert_observed_order, assert_step_is, assert_records_match

    def test_my_alternating_lora_step():
        assert_step_is(my_step, my_task, "gs:B,A")      # exact GS, B then A

    def test_my_gap_estimate_is_third_order():
        etas = [0.1 * 2.0**-k for k in range(5)]
        errors = [abs(my_gap(e) - my_estimate(e)) for e in etas]
        assert_observed_order(errors, etas, 3, floor=1e-14)

    def test_my_records():
        assert_records_match("out/records.csv", "golden/quadratic/gs")

* :func:`assert_observed_order` -- errors on a step-size grid shrink at the
  stated order (pyadjoint's Taylor test: pairwise rates, least-squares
  slope, points below a round-off floor *dropped*, not tolerated).
* :func:`assert_step_is` -- a step function performs exactly the scheme of a
  delay pattern (agreement to round-off at every state and step size; a
  step that agrees only to ``O(eta^2)`` fails, and the message shows the
  error table against every candidate scheme).
* :func:`assert_records_match` -- records agree with a reference run.

:mod:`crosscurv.testing` re-exports them beside the checks of the paper (its pytest plugin).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from crosscurv.theory.patterns import DelayPattern

from .orders import OrderStudy, observe_order

__all__ = ["assert_observed_order", "assert_step_is", "assert_records_match"]


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
        problems.append(f"pairwise rates below {order - tol:g}: " + ", ".join(f"{r:.3f}" for r in low))
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

    Runs :func:`crosscurv.numeric.step_identification.identify_step` with ``pattern`` declared:
    the step must agree with the exact step of ``pattern`` to round-off
    (``||U - R|| <= rtol ||R - theta|| + 64 eps ||theta||``) at every seeded
    state and every ``eta = eta0 * 2^-k``, and must be a function of its
    input.  The failure message is the full report: each candidate (JC, GS
    orders, the declared pattern, the inferred one) with its error and the
    observed order of the difference, and the verdict (e.g. "matches jc; it
    does NOT perform the declared pattern gs:B,A").

    Args:
        step: ``step(params, lr) -> new params`` (dict of tensors).
        task: a float64 :class:`crosscurv.numeric.Task`.
        pattern: CLI spec (``"gs"``, ``"gs:B,A"``, ``"2<-1"``...) or a
            :class:`DelayPattern`.
        seeds, eta0, n_etas, rtol, perturb, max_all_orders: see
            :func:`crosscurv.numeric.step_identification.identify_step`.

    Returns:
        the :class:`crosscurv.numeric.step_identification.StepReport`.
    """
    from .step_identification import as_user_step, identify_step

    user = as_user_step((task, step, pattern), name=getattr(step, "__name__", "step"))
    report = identify_step(user, seeds=seeds, eta0=eta0, n_etas=max(3, n_etas), rtol=rtol, perturb=perturb,
                           max_all_orders=max_all_orders, fit=True)
    if not report.ok:
        raise AssertionError(f"step does not perform {report.declared_label}: {report.verdict()}\n\n{report.text()}")
    return report


def assert_records_match(
    theirs: str | Mapping[str, Sequence],
    reference: str | Mapping[str, Sequence],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    dtype: str | None = None,
    columns: Sequence[str] | None = None,
):
    """Assert that records agree with a reference (what ``crosscurv validate-records`` checks).

    Args:
        theirs: a records CSV path or ``{column: values}`` with ``k``.
        reference: a run directory (``records.csv`` + ``summary.json``), a
            records CSV path, or ``{column: values}``.
        rtol, atol: tolerances (default: by ``dtype``, see
            :data:`crosscurv.numeric.record_comparison.TOLERANCES`; ``atol`` is scaled by the
            reference's largest loss).
        dtype: ``"float64"``/``"float32"``; default: the reference summary's,
            else float64.
        columns: columns to compare (default all but ``k``).

    Returns:
        the :class:`crosscurv.numeric.record_comparison.RecordsComparison`.
    """
    import os

    from .records import FIELDS, CORE_FIELDS, read_columns, read_summary
    from .record_comparison import OPTIONAL_COLUMNS, compare_records, compared_columns, reference_tolerances

    if isinstance(theirs, str):
        t = (read_columns(theirs, ["k"] + list(columns)) if columns
             else read_columns(theirs, list(CORE_FIELDS), optional=OPTIONAL_COLUMNS))
    else:
        t = theirs
    if isinstance(reference, str):
        if os.path.isdir(reference):
            summ = os.path.join(reference, "summary.json")
            if dtype is None and os.path.exists(summ):
                dtype = (read_summary(summ).get("settings") or {}).get("dtype")
            reference = os.path.join(reference, "records.csv")
        r = read_columns(reference, list(CORE_FIELDS), optional=[f for f in FIELDS if f not in CORE_FIELDS])
    else:
        r = reference
    cols = compared_columns(t, r, columns)
    tol = reference_tolerances(r, dtype, cols, rtol=rtol, atol=atol)
    comp = compare_records(t, r, tolerances=tol, columns=cols)
    if not comp.ok:
        raise AssertionError(comp.summary() + "\n" + comp.text())
    return comp
