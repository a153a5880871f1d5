"""Checking an implementation against a golden case, without torch: the Python API of
``validate-records``.

:func:`check_records` (per-iteration records against a run folder, with formula-level diagnoses
where it holds ``terms.csv``) and :func:`check_one_step` (one-step quantities against a golden
``one_step.json``) return a verdict with ``ok``, ``exit_code``, ``diagnoses`` and ``text()``;
:func:`assert_records_match` and :func:`assert_one_step_match` raise :class:`AssertionError` with
it. ``reference`` is a folder or ``golden:<case>[/<label>]``; bad input raises
:class:`crosscurv.theory.errors.InputError`::

    verdict = check_records("mine.csv", "golden:quadratic/gs")
    assert verdict.ok, verdict.text()
"""

from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

from crosscurv.numeric.records import RecordsError

from .golden_data import resolve_reference

__all__ = [
    "Reference",
    "read_reference",
    "as_columns",
    "check_records",
    "check_one_step",
    "assert_records_match",
    "assert_one_step_match",
    "TERMS_FILE",
    "ONE_STEP_FILE",
]

TERMS_FILE = "terms.csv"
ONE_STEP_FILE = "one_step.json"


class Reference:
    """A reference run folder read without torch.

    Attributes:
        columns: ``{column: values}`` of its ``records.csv``; dtype: from ``summary.json`` (or
        ``None``);
        where: how to name it; terms: ``{column: values}`` of ``terms.csv``, or ``None``.
    """

    def __init__(self, columns: dict, dtype: str | None, where: str, terms: dict | None):
        self.columns, self.dtype, self.where, self.terms = columns, dtype, where, terms


def read_reference(ref: str) -> Reference:
    """Read a run folder (or ``golden:<case>/<label>``): records, dtype, and ``terms.csv`` if
    present.

    Raises:
        RecordsError: no such folder, no records, an unreadable summary.
    """
    from crosscurv.numeric.records import (RECORDS_FILE, SUMMARY_FILE, read_columns, read_records,
                                           read_summary, records_columns)

    path = resolve_reference(ref)
    if not os.path.isdir(path):
        raise RecordsError(f"reference run directory {ref} does not exist")
    rec = os.path.join(path, RECORDS_FILE)
    if not os.path.exists(rec):
        hint = (
            f" (it is a golden case folder: give one of its runs, {ref.rstrip('/')}/gs, or check "
            f"one-step results against its {ONE_STEP_FILE})"
            if os.path.exists(os.path.join(path, ONE_STEP_FILE))
            else ""
        )
        raise RecordsError(f"reference run directory {ref} has no {RECORDS_FILE}{hint}")
    records = read_records(rec)
    if not records:
        raise RecordsError(f"reference {rec} holds no records")
    dtype = None
    summ = os.path.join(path, SUMMARY_FILE)
    if os.path.exists(summ):
        summary = read_summary(summ)
        settings = summary.get("settings")
        dtype = (settings if isinstance(settings, dict) else {}).get("dtype") or summary.get(
            "dtype"
        )
        if dtype is not None and not isinstance(dtype, str):
            raise RecordsError(f"reference summary {summ}: dtype {dtype!r} is not a dtype name")
    terms_path = os.path.join(path, TERMS_FILE)
    terms = None
    if os.path.exists(terms_path):
        from crosscurv.numeric.formula_variants import TERM_COLUMNS

        terms = read_columns(terms_path, ("k",) + TERM_COLUMNS)
    return Reference(records_columns(records), dtype, f"run directory {ref}", terms)


def as_columns(theirs, columns: Sequence[str] | None = None) -> dict:
    """Their records as ``{column: values}``: from a CSV path, a mapping of columns, or a list of
    row dicts.

    Without ``columns`` the paper's columns (``k``,
    :data:`~crosscurv.numeric.record_comparison.VALUE_COLUMNS`)
    are required and the optional ones read where present.
    """
    from crosscurv.numeric.record_comparison import OPTIONAL_COLUMNS, VALUE_COLUMNS
    from crosscurv.numeric.records import read_columns

    need = ["k"] + list(columns or VALUE_COLUMNS)
    if isinstance(theirs, (str, os.PathLike)):
        return (
            read_columns(os.fspath(theirs), need)
            if columns
            else read_columns(os.fspath(theirs), need, optional=OPTIONAL_COLUMNS)
        )
    if isinstance(theirs, Mapping):
        cols = {c: list(v) for c, v in theirs.items()}
    else:
        rows = list(theirs)
        if not rows:
            raise RecordsError("their records hold no rows")
        cols = {c: [r[c] for r in rows] for c in rows[0]}
    missing = [c for c in need if c not in cols]
    if missing:
        raise RecordsError(f"their records: missing column(s) {', '.join(missing)}")
    keep = need + ([] if columns else [c for c in OPTIONAL_COLUMNS if c in cols])
    out = {c: [float(v) for v in cols[c]] for c in keep}
    out["k"] = [int(k) for k in out["k"]]
    return out


def check_records(
    theirs,
    reference: str,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    columns: Sequence[str] | None = None,
):
    """Compare their records with a reference run folder, as ``crosscurv validate-records`` does.

    Args:
        theirs: a CSV path, ``{column: values}`` or a list of row dicts; the columns ``k,
            loss_jc, loss_s, gap, recursive, cumulative`` are required, ``jc_only, bound_bk,
            sharpness, gap_err`` compared when both have them.
        reference: a run folder or ``golden:<case>/<label>``.
        rtol, atol: replace the per-column tolerances of the reference's dtype for every column.
        columns: compare only these.

    Returns:
        a :class:`crosscurv.numeric.record_comparison.RecordsComparison` (``ok``, ``exit_code``,
        ``first``, ``diagnoses``, ``text()``).

    Raises:
        RecordsError: bad input (exit 2 on the command line).
    """
    from crosscurv.numeric.record_comparison import (OPTIONAL_COLUMNS, compare_records,
                                                     compared_columns, reference_tolerances)

    t = as_columns(theirs, columns)
    ref = read_reference(reference)
    cols = compared_columns(t, ref.columns, columns)
    tol = reference_tolerances(ref.columns, ref.dtype, cols, rtol=rtol, atol=atol)
    comp = compare_records(t, ref.columns, tolerances=tol, columns=cols, terms=ref.terms)
    left_out = [c for c in OPTIONAL_COLUMNS if c not in cols]
    if left_out and not columns:
        comp.notes.append(f"column(s) {', '.join(left_out)} not compared: not in both records")
    return comp


def check_one_step(theirs, reference: str, *, rtol: float | None = None):
    """Compare their one-step quantities with a golden case's ``one_step.json``.

    Args:
        theirs: a JSON path or a dict laid out like ``one_step.json`` (any subset of its quantities:
            ``c``, ``C_cross``, ``gHg``, ``grad_norm2``, ``loss_0``, ``grad_0``, ``loss_jc_1``,
            ``theta_jc_1`` and per pattern label ``C_S``, ``eta2_estimate``, ``c3``,
            ``eta3_estimate``,
            ``loss_s_1``, ``gap_1``, ``theta_s_1``).
        reference: a golden case folder (holding ``one_step.json``) or ``golden:<case>``.
        rtol: replaces every quantity's relative tolerance.

    Returns:
        a :class:`crosscurv.numeric.one_step_comparison.OneStepComparison`.

    Raises:
        RecordsError: bad input.
    """
    from crosscurv.numeric.one_step_comparison import compare_one_step
    from crosscurv.numeric.records import read_text

    path = resolve_reference(reference)
    exp_path = os.path.join(path, ONE_STEP_FILE)
    if not os.path.exists(exp_path):
        raise RecordsError(
            f"reference {reference} has no {ONE_STEP_FILE} (give a golden case folder)"
        )
    expected = _json(read_text(exp_path, "golden one-step file"), exp_path)
    if isinstance(theirs, (str, os.PathLike)):
        theirs = _json(read_text(os.fspath(theirs), "one-step results"), os.fspath(theirs))
    comp = compare_one_step(theirs, expected, rtol=rtol)
    comp.where = f"{ONE_STEP_FILE} of {reference}"
    return comp


def _asserted(verdict):
    """``verdict`` when it agrees; else AssertionError with its summary and diagnoses, then the
    table."""
    __tracebackhide__ = True
    if verdict.ok:
        return verdict
    if not hasattr(verdict, "table"):  # a one-step comparison: its text is its table
        raise AssertionError("DISAGREE: " + verdict.summary() + "\n\n" + verdict.text())
    lines = ["DISAGREE: " + verdict.summary()]
    lines += ["diagnosis: " + d for d in verdict.diagnoses]
    lines += ["note: " + n for n in verdict.notes]
    raise AssertionError("\n".join(lines + ["", verdict.table()]))


def assert_records_match(
    theirs,
    reference: str,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    columns: Sequence[str] | None = None,
):
    """Assert that their records agree with a reference run folder (:func:`check_records`).

    Args:
        theirs, reference, rtol, atol, columns: as :func:`check_records` (``reference``: a run
            folder or ``golden:<case>/<label>``).

    Returns:
        the :class:`crosscurv.numeric.record_comparison.RecordsComparison` (when they agree).

    Raises:
        AssertionError: the verdict (first disagreement, diagnoses, the table of columns).
        RecordsError: bad input.
    """
    __tracebackhide__ = True
    return _asserted(check_records(theirs, reference, rtol=rtol, atol=atol, columns=columns))


def assert_one_step_match(theirs, reference: str, *, rtol: float | None = None):
    """Assert that their one-step quantities agree with a golden case (:func:`check_one_step`).

    Raises:
        AssertionError: the verdict (first disagreement, diagnoses, the table of quantities).
        RecordsError: bad input.
    """
    __tracebackhide__ = True
    return _asserted(check_one_step(theirs, reference, rtol=rtol))


def _json(text: str, where: str) -> dict:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RecordsError(f"{where} is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise RecordsError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj
