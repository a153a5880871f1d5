"""Record comparison: do a user's per-iteration records agree with a reference run?

A user's records (the columns of :data:`numeric.records.FIELDS`, read with
:func:`numeric.records.read_columns`) against a reference run, per column and
iteration, with tolerances suited to the reference's dtype
(:data:`TOLERANCES`); names the first disagreement and, where the pattern of
the disagreement is recognisable, a likely diagnosis (rows shifted by one
iteration, a sign flip, a constant factor, a column equal to another
reference column).  This is what ``crosscurv validate-records`` runs.
Malformed input raises :class:`numeric.records.RecordsError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .records import LEGACY_FIELDS as FIELDS, RecordsError  # the columns every records file has (sharpness, gap_err: not compared)

__all__ = [
    "TOLERANCES",
    "VALUE_COLUMNS",
    "default_tolerances",
    "ColumnResult",
    "RecordsComparison",
    "compare_records",
]


#: Default tolerances per reference dtype: ``(rtol, atol_rel)``; a value
#: agrees when ``|theirs - ref| <= atol_rel * scale + rtol * |ref|`` with
#: ``scale = max_k max(|loss_jc|, |loss_s|)`` of the reference.  The absolute
#: part is relative to the *loss* because ``gap`` and the estimates are
#: differences of loss-sized quantities: their round-off is a fraction of
#: the loss, not of themselves.  float64: trajectories of two correct
#: implementations agree to ~1e-13 relative over tens of iterations; float32
#: (eps 1.2e-7): to ~1e-5.
TOLERANCES = {"float64": (1e-9, 1e-12), "float32": (1e-4, 1e-5)}

#: Columns compared by default (every record field except ``k``).
VALUE_COLUMNS = tuple(f for f in FIELDS if f != "k")


def default_tolerances(dtype: str | None) -> tuple[float, float]:
    """``(rtol, atol_rel)`` for a dtype name (``"float64"`` when unknown or ``None``)."""
    key = str(dtype or "float64").replace("torch.", "")
    return TOLERANCES.get(key, TOLERANCES["float64"])


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
class RecordsComparison:
    """Outcome of :func:`compare_records`.

    Attributes:
        columns: :class:`ColumnResult` per compared column.
        ks: the common iterations.
        first: ``(k, column, theirs, ref, allowed)`` of the first disagreement, or ``None``.
        rtol, atol: the tolerances used (``atol`` absolute).
        diagnoses: likely explanations, one sentence each.
        notes: facts about coverage (iterations only in one file...).
    """

    columns: list
    ks: list
    first: tuple | None
    rtol: float
    atol: float
    diagnoses: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first is None

    def table(self, fmt: str = "github") -> str:
        from tabulate import tabulate

        rows = [
            [c.column, c.compared, c.bad, "" if c.first_bad_k is None else c.first_bad_k, c.max_abs, c.max_rel]
            for c in self.columns
        ]
        return tabulate(rows, headers=["column", "compared", "disagree", "first k", "max abs. diff", "max rel. diff"],
                        tablefmt=fmt, floatfmt=".3e")

    def summary(self) -> str:
        """One line: agreement, or the first disagreement."""
        if self.ok:
            return f"all {len(self.columns)} columns agree at all {len(self.ks)} common iterations (rtol {self.rtol:g}, atol {self.atol:.3g})"
        k, col, t, r, allowed = self.first
        return (f"first disagreement at k={k}, column {col}: theirs {t!r}, reference {r!r} "
                f"(|diff| {abs(t - r):.3e} > allowed {allowed:.3e})")

    def text(self) -> str:
        lines = [self.table(), ""]
        lines += ["note: " + n for n in self.notes]
        lines += ["diagnosis: " + d for d in self.diagnoses]
        lines.append(("OK: " if self.ok else "DISAGREE: ") + self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "iterations": self.ks,
            "first_disagreement": None if self.first is None else dict(zip(("k", "column", "theirs", "reference", "allowed"), self.first)),
            "columns": [c.__dict__ for c in self.columns],
            "diagnoses": list(self.diagnoses),
            "notes": list(self.notes),
            "summary": self.summary(),
        }


def _close(t: float, r: float, rtol: float, atol: float) -> bool:
    if math.isnan(t) or math.isnan(r):
        return math.isnan(t) and math.isnan(r)
    if math.isinf(t) or math.isinf(r):
        return t == r
    return abs(t - r) <= atol + rtol * abs(r)


def _series_close(ts, rs, rtol, atol) -> bool:
    return len(ts) >= 2 and all(_close(t, r, rtol, atol) for t, r in zip(ts, rs))


def compare_records(
    theirs: Mapping[str, Sequence],
    reference: Mapping[str, Sequence],
    *,
    rtol: float,
    atol: float,
    columns: Sequence[str] | None = None,
) -> RecordsComparison:
    """Compare records column by column at the iterations ``k`` both hold.

    Args:
        theirs, reference: ``{column: values}`` with a ``"k"`` column
            (e.g. from :func:`numeric.records.read_columns` and
            :func:`numeric.records.records_columns`).
        rtol, atol: ``|theirs - ref| <= atol + rtol * |ref|`` (``nan``
            agrees only with ``nan``, ``inf`` only with the same ``inf``).
        columns: columns to compare (default :data:`VALUE_COLUMNS`).

    Returns:
        a :class:`RecordsComparison` with the first disagreement (smallest
        ``k``; at that ``k`` the first column in record order) and
        diagnoses: a column shifted by one iteration, of the opposite sign,
        off by a constant factor, or equal to another reference column.

    Raises:
        RecordsError: the two share no iteration.
    """
    cols = list(columns or VALUE_COLUMNS)
    tk = list(theirs["k"])
    rk = list(reference["k"])
    tpos = {k: i for i, k in enumerate(tk)}
    rpos = {k: i for i, k in enumerate(rk)}
    common = sorted(set(tk) & set(rk))
    if not common:
        raise RecordsError(
            f"the records share no iteration: theirs k={min(tk)}..{max(tk)}, reference k={min(rk)}..{max(rk)}"
        )
    notes = []
    only_t = sorted(set(tk) - set(rk))
    only_r = sorted(set(rk) - set(tk))
    if only_t:
        notes.append(f"iterations only in theirs (not compared): k={_ranges(only_t)}")
    if only_r:
        notes.append(f"iterations only in the reference (not compared): k={_ranges(only_r)}")

    results, first = [], None
    for c in cols:
        bad, first_bad, mabs, mrel = 0, None, 0.0, 0.0
        for k in common:
            t, r = float(theirs[c][tpos[k]]), float(reference[c][rpos[k]])
            if not _close(t, r, rtol, atol):
                bad += 1
                if first_bad is None:
                    first_bad = k
                if first is None or k < first[0] or (k == first[0] and cols.index(c) < cols.index(first[1])):
                    first = (k, c, t, r, atol + rtol * abs(r) if math.isfinite(r) else 0.0)
            if math.isfinite(t) and math.isfinite(r):
                d = abs(t - r)
                mabs = max(mabs, d)
                mrel = max(mrel, d / abs(r) if r != 0 else (0.0 if d == 0 else math.inf))
        results.append(ColumnResult(c, len(common), bad, first_bad, mabs, mrel))
    comp = RecordsComparison(results, common, first, rtol, atol, notes=notes)
    if first is not None:
        comp.diagnoses = _diagnose(theirs, reference, cols, [r for r in results if r.bad], rtol, atol)
    return comp


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


def _aligned(theirs, reference, c_t: str, c_r: str, shift: int) -> tuple[list, list]:
    """Values of their ``c_t`` at ``k`` and the reference's ``c_r`` at ``k + shift``."""
    rpos = {k: i for i, k in enumerate(reference["k"])}
    ts, rs = [], []
    for i, k in enumerate(theirs["k"]):
        j = rpos.get(k + shift)
        if j is not None:
            ts.append(float(theirs[c_t][i]))
            rs.append(float(reference[c_r][j]))
    return ts, rs


def _diagnose(theirs, reference, cols, bad: list, rtol, atol) -> list:
    out = []
    shifted = {}
    for cr in bad:
        c = cr.column
        found = None
        for s in (+1, -1):
            ts, rs = _aligned(theirs, reference, c, c, s)
            if _series_close(ts, rs, rtol, atol):
                found = s
                break
        if found is not None:
            shifted[c] = found
            continue
        ts, rs = _aligned(theirs, reference, c, c, 0)
        if _series_close(ts, [-r for r in rs], rtol, atol):
            out.append(f"column {c} has the opposite sign of the reference at every iteration "
                       "(sign convention: gap = loss_s - loss_jc, estimates predict the gap)")
            continue
        other = None
        for c2 in VALUE_COLUMNS:
            if c2 == c or c2 not in reference:
                continue
            for s in (0, +1, -1):
                ts2, rs2 = _aligned(theirs, reference, c, c2, s)
                if _series_close(ts2, rs2, rtol, atol):
                    other = (c2, s)
                    break
            if other:
                break
        if other:
            c2, s = other
            where = "" if s == 0 else f" shifted by one iteration (their k holds the reference's k{s:+d})"
            out.append(f"column {c} equals the reference column {c2}{where}: columns swapped or mislabelled?")
            continue
        ratios = [t / r for t, r in zip(ts, rs) if r != 0 and math.isfinite(t) and math.isfinite(r) and abs(r) > atol]
        if len(ratios) >= 2:
            f0 = ratios[0]
            if f0 != 0 and all(abs(x - f0) <= max(1e3 * rtol, 1e-6) * abs(f0) for x in ratios) and abs(f0 - 1) > 10 * rtol:
                out.append(f"column {c} is the reference times a constant factor {f0:.6g} at every iteration (a missing or extra scale, e.g. 1/2 or eta?)")
                continue
        ks_bad = cr.first_bad_k
        if ks_bad is not None and ks_bad > min(theirs["k"]):
            out.append(f"column {c} agrees up to k={ks_bad - 1} and disagrees from k={ks_bad} on")
    if shifted:
        if len(shifted) == len(bad) and len(set(shifted.values())) == 1 and len(bad) > 1:
            s = next(iter(shifted.values()))
            if s == +1:
                out.insert(0, "every disagreeing column is shifted by one iteration: their row k holds the reference's k+1 "
                              "(iterations numbered from 0 instead of 1?)")
            else:
                out.insert(0, "every disagreeing column is shifted by one iteration: their row k holds the reference's k-1 "
                              "(records written one iteration late, or numbered from 2?)")
        else:
            for c, s in shifted.items():
                out.append(f"column {c} is shifted by one iteration: their row k holds the reference's k{s:+d} "
                           "(an off-by-one in k)")
    return out
