"""Record comparison: do a user's per-iteration records agree with a reference run?

A user's records (the columns of :data:`crosscurv.numeric.records.FIELDS`, read with
:func:`crosscurv.numeric.records.read_columns`) against a reference run, per column and
iteration, with tolerances suited to the reference's dtype
(:data:`TOLERANCES`); names the first disagreement and, where the pattern of
the disagreement is recognisable, a likely diagnosis (rows shifted by one
iteration, a sign flip, a constant factor, a column equal to another
reference column).  This is what ``crosscurv validate-records`` runs.
Malformed input raises :class:`crosscurv.numeric.records.RecordsError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .comparison_verdict import ComparisonVerdict
from .record_diagnoses import diagnose
from .record_tolerances import (ALL_COLUMNS, EPS, MEASURED_ROUNDING, OPTIONAL_COLUMNS, SAFETY,
                                TOLERANCES, VALUE_COLUMNS, close, column_scale, compared_columns,
                                default_tolerances, gap_slack, reference_tolerances,
                                stated_rounding, tolerance_from_rounding)
from .records import RecordsError

__all__ = ["TOLERANCES", "MEASURED_ROUNDING", "SAFETY", "EPS", "tolerance_from_rounding",
           "stated_rounding", "VALUE_COLUMNS", "OPTIONAL_COLUMNS", "ALL_COLUMNS",
           "default_tolerances", "column_scale", "compared_columns", "reference_tolerances",
           "ColumnResult", "RecordsComparison", "compare_records"]


@dataclass
class ColumnResult:
    """One column compared over the common iterations.

    Attributes:
        column: the name; compared: number of iterations compared; bad: how many disagree;
        first_bad_k: the first disagreeing ``k`` (``None`` if none);
        max_abs: largest ``|theirs - ref|``; max_rel: largest ``|theirs - ref| / |ref|``.
    """

    column: str
    compared: int
    bad: int
    first_bad_k: int | None
    max_abs: float
    max_rel: float


@dataclass
class RecordsComparison(ComparisonVerdict):
    """Outcome of :func:`compare_records`.

    Attributes:
        columns: :class:`ColumnResult` per compared column.
        ks: the common iterations.
        first: ``(k, column, theirs, ref, allowed)`` of the first disagreement, or ``None``.
        tolerances: ``{column: (rtol, atol)}`` used (``atol`` absolute).
        diagnoses: likely explanations, one sentence each.
        notes: facts about coverage (iterations only in one file...).
    """

    columns: list
    ks: list
    first: tuple | None
    tolerances: dict
    diagnoses: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def rtol(self) -> float | None:
        """The ``rtol`` of every column when they share one, else ``None``."""
        vals = {t[0] for t in self.tolerances.values()}
        return vals.pop() if len(vals) == 1 else None

    @property
    def atol(self) -> float | None:
        """The absolute ``atol`` of every column when they share one, else ``None``."""
        vals = {t[1] for t in self.tolerances.values()}
        return vals.pop() if len(vals) == 1 else None

    def table(self, fmt: str = "github") -> str:
        from tabulate import tabulate

        rows = [
            [c.column, c.compared, c.bad, "" if c.first_bad_k is None else c.first_bad_k, c.max_abs,
             c.max_rel, self.tolerances[c.column][0], self.tolerances[c.column][1]]
            for c in self.columns
        ]
        return tabulate(rows, headers=["column", "compared", "disagree", "first k", "max abs. diff",
                                       "max rel. diff", "rtol", "atol"],
                        tablefmt=fmt, floatfmt=".3e")

    def summary(self) -> str:
        """One line: agreement, or the first disagreement."""
        if self.ok:
            tol = (f"rtol {self.rtol:g}, atol {self.atol:.3g}"
                   if self.rtol is not None and self.atol is not None else "per-column tolerances")
            return (f"all {len(self.columns)} columns agree at all {len(self.ks)} common "
                    f"iterations ({tol})")
        k, col, t, r, allowed = self.first
        return (f"first disagreement at k={k}, column {col}: theirs {t!r}, reference {r!r} "
                f"(|diff| {abs(t - r):.3e} > allowed {allowed:.3e})")

    def text(self) -> str:
        return "\n".join([self.table(), ""] + self.verdict_lines())

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "tolerances": {c: {"rtol": r, "atol": a} for c, (r, a) in self.tolerances.items()},
            "iterations": self.ks,
            "first_disagreement": None if self.first is None else dict(
                zip(("k", "column", "theirs", "reference", "allowed"), self.first)),
            "columns": [c.__dict__ for c in self.columns],
            "diagnoses": list(self.diagnoses),
            "notes": list(self.notes),
            "summary": self.summary(),
        }


def compare_records(theirs: Mapping[str, Sequence], reference: Mapping[str, Sequence], *,
                    rtol: float | None = None, atol: float | None = None,
                    tolerances: Mapping[str, tuple] | None = None,
                    columns: Sequence[str] | None = None, growth: Sequence[float] | None = None,
                    slack: Mapping[str, Sequence[float]] | None = None,
                    terms: Mapping[str, Sequence] | None = None) -> RecordsComparison:
    """Compare records column by column at the iterations ``k`` both hold.

    Args:
        theirs, reference: ``{column: values}`` with a ``"k"`` column
            (e.g. from :func:`crosscurv.numeric.records.read_columns` and
            :func:`crosscurv.numeric.records.records_columns`).
        rtol, atol: ``|theirs - ref| <= atol + rtol * |ref|`` for every
            column (``nan`` agrees only with ``nan``, ``inf`` only with the
            same ``inf``); for ``gap`` the finite ``gap_err`` of both records
            at that ``k`` is added to ``atol`` (each measured gap is only
            known to within its error bound); or
        tolerances: ``{column: (rtol, atol)}`` per column (e.g. from
            :func:`reference_tolerances`); ``rtol``/``atol`` given as well
            replace its values.
        columns: columns to compare (default :func:`compared_columns`:
            :data:`VALUE_COLUMNS` and the optional ones both hold).

        growth: factors ``>= 1`` aligned with ``theirs``: the tolerance at each ``k`` (``rtol``
            and ``atol``) is multiplied by it.  The trajectory's own sensitivity: how much further
            than at its first iteration a run that differs only at rounding has parted by ``k``
            (report --check measures it).
        slack: ``{column: [s_k, ...]}`` aligned with ``theirs``: an absolute amount added to that
            column's allowed difference at each ``k`` after ``growth`` (a column's own measured
            spread at rounding).
        terms: the reference's ``terms.csv`` as ``{column: values}`` with ``"k"`` (a golden run
            folder; :mod:`crosscurv.experiments.conformance.golden_terms`): enables the
            formula-level diagnoses of :mod:`crosscurv.numeric.formula_variants`.

    Returns:
        a :class:`RecordsComparison` with the first disagreement (smallest
        ``k``; at that ``k`` the first column in record order) and
        diagnoses (:func:`diagnose`): the S run equal to the JC run, a formula variant of an
        estimate
        (with ``terms``), a column shifted by one iteration, of the opposite sign, off by a constant
        factor or equal to another reference column, or a difference at a precision level (with the
        tolerance that would accept it).

    Raises:
        RecordsError: the two share no iteration.
    """
    cols = compared_columns(theirs, reference, columns)
    if tolerances is None and (rtol is None or atol is None):
        raise TypeError("compare_records needs rtol and atol, or tolerances")
    tol = {c: ((tolerances[c][0] if tolerances is not None and rtol is None else rtol),
               (tolerances[c][1] if tolerances is not None and atol is None else atol))
           for c in cols}
    tk = list(theirs["k"])
    rk = list(reference["k"])
    tpos = {k: i for i, k in enumerate(tk)}
    rpos = {k: i for i, k in enumerate(rk)}
    common = sorted(set(tk) & set(rk))
    if not common:
        raise RecordsError(
            f"the records share no iteration: theirs k={min(tk)}..{max(tk)}, reference "
            f"k={min(rk)}..{max(rk)}"
        )
    notes = _coverage_notes(tk, rk)
    results, first = [], None
    for c in cols:
        bad, first_bad, mabs, mrel = 0, None, 0.0, 0.0
        rtol_c, atol_c = tol[c]
        for k in common:
            t, r = float(theirs[c][tpos[k]]), float(reference[c][rpos[k]])
            a = atol_c + (gap_slack(theirs, tpos[k]) + gap_slack(reference, rpos[k])
                          if c == "gap" else 0.0)
            g = max(1.0, float(growth[tpos[k]])) if growth is not None else 1.0
            extra = float(slack[c][tpos[k]]) if slack is not None and c in slack else 0.0
            if not close(t, r, rtol_c * g, a * g + extra):
                bad += 1
                if first_bad is None:
                    first_bad = k
                if first is None or k < first[0] or (
                        k == first[0] and cols.index(c) < cols.index(first[1])):
                    allowed = (a + rtol_c * abs(r)) * g + extra if math.isfinite(r) else 0.0
                    first = (k, c, t, r, allowed)
            if math.isfinite(t) and math.isfinite(r):
                d = abs(t - r)
                mabs = max(mabs, d)
                mrel = max(mrel, d / abs(r) if r != 0 else (0.0 if d == 0 else math.inf))
        results.append(ColumnResult(c, len(common), bad, first_bad, mabs, mrel))
    comp = RecordsComparison(results, common, first, tol, notes=notes)
    if first is not None:
        bad_columns = [r.column for r in results if r.bad]
        comp.diagnoses = diagnose(theirs, reference, bad_columns, tol, terms)
    return comp


def _coverage_notes(tk: Sequence[int], rk: Sequence[int]) -> list:
    """Notes on the iterations only one of the records holds (their ``k`` and the reference's)."""
    notes = []
    only_t = sorted(set(tk) - set(rk))
    only_r = sorted(set(rk) - set(tk))
    if only_t:
        notes.append(f"iterations only in theirs (not compared): k={_ranges(only_t)}")
    if only_r:
        notes.append(f"iterations only in the reference (not compared): k={_ranges(only_r)}")
    return notes


def _ranges(ks: Sequence[int]) -> str:
    ks = sorted(ks)
    parts, start, prev = [], ks[0], ks[0]
    for k in ks[1:] + [None]:
        if k is not None and k == prev + 1:
            prev = k
            continue
        parts.append(str(start) if start == prev else f"{start}..{prev}")
        if k is not None:
            start = prev = k
    return ",".join(parts)
