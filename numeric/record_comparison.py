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

from .records import FIELDS as _ALL_FIELDS, RecordsError

__all__ = [
    "TOLERANCES",
    "MEASURED_ROUNDING",
    "SAFETY",
    "EPS",
    "tolerance_from_rounding",
    "stated_rounding",
    "VALUE_COLUMNS",
    "OPTIONAL_COLUMNS",
    "ALL_COLUMNS",
    "default_tolerances",
    "column_scale",
    "compared_columns",
    "reference_tolerances",
    "ColumnResult",
    "RecordsComparison",
    "compare_records",
]


#: Safety factor between the measured rounding of a column and its tolerance.
SAFETY = 10.0

#: Unit roundoff of each dtype: the floor of a measured rounding (a value that
#: came out bit for bit equal in every measured variant is still the result of
#: at least one rounding, and every column is computed from loss-sized numbers).
EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}

#: Measured rounding of each record column, ``(rel, beyond)``, per dtype:
#: ``python -m crosscurv.experiments.conformance.rounding`` (the "Tolerances" table of docs/reproducibility.md; its
#: docstring defines the measurement).  Runs of the same protocol that differ
#: only in the order or precision of their floating-point operations (1 against
#: 2 threads, the other HVP engine, float32 against float64, and the
#: independent NumPy implementation ``examples/numpy_estimator.py``) part by at
#: most ``rel |value| + beyond scale`` (``scale``: :func:`column_scale`).
#: Runs: the built-in tasks (mlp, fl, lora) at the smoke presets over K = 10 and
#: the default presets over K = 3 (float32 and float64), and the golden cases
#: (float64, their K; the optimizer cases with their optimizer).
#: Each value is rounded up to two digits; the comment names the variant and
#: run where it was largest.  Remeasured under the emulated instruction sets of
#: ``make test-portable`` (``MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default``,
#: ``MKL_CBWR=AVX2|AVX ATEN_CPU_CAPABILITY=avx2``, ``OPENBLAS_CORETYPE=Haswell``:
#: ``env ... python -m crosscurv.experiments.conformance.rounding --tasks "" --json`` for the golden cases,
#: ``--tasks mlp,fl,lora --presets smoke:5 --no-golden`` for the tasks), and the
#: float32 rows again with ``make rounding`` (smoke:10 under this CPU, the four
#: emulations and two threads: reports/rounding.md); each entry is the largest
#: over this CPU and the emulations.  Not used: ``gap`` computed as ``loss_s - loss_jc``
#: (variant ``subtraction``), which parts from the recorded segment integral by
#: up to 11% of the gap beyond both ``gap_err`` on the ReLU tasks (mlp, fl, lora smoke,
#: float32 and float64): quadrature error that ``gap_err`` does not bound where
#: the gradient has kinks along the segment, not rounding.
MEASURED_ROUNDING = {
    "float32": {
        "loss_jc": (2.0e-07, 0.0),        # rel: threads, smoke:10 (reports/rounding.md)
        "loss_s": (1.6e-07, 1.8e-23),     # rel: float64, lora smoke
        "gap": (0.0, 2.0e-07),            # beyond both gap_err: float64, lora smoke (the float32 segment integral's
                                          # own rounding, 1.7 ulps of the loss; make rounding)
        "recursive": (5.2e-04, 5.0e-10),  # rel: float64, fl smoke (Delta theta: difference of two float32 vectors);
                                          # beyond: float64, smoke:10 (reports/rounding.md)
        "cumulative": (3.0e-06, 2.0e-12),  # rel: float64, mlp smoke
        "jc_only": (1.9e-06, 3.6e-12),    # rel: float64, mlp smoke
        "bound_bk": (9.7e-06, 2.7e-22),   # rel: float64, lora smoke; beyond: threads, smoke:10 (reports/rounding.md)
        "sharpness": (3.4e-06, 6.0e-07),  # float64, fl smoke, no AVX2 (MKL_CBWR=COMPATIBLE; beyond in units of
                                          # the largest |sharpness|; make rounding)
        "gap_err": (5.0e-02, 1.7e-10),    # rel: threads, mlp default (4.1e-2): an error estimate (a float64
                                          # run's gap_err is another quantity: rounding.NOT_ROUNDING)
    },
    "float64": {
        "loss_jc": (4.8e-16, 0.0),        # rel: numpy, golden quadratic gs
        "loss_s": (4.9e-16, 0.0),         # rel: numpy, golden quadratic gs
        "gap": (1.9e-13, 0.0),            # rel: numpy, golden quadratic partial (its gap: a subtraction)
        "recursive": (3.3e-14, 3.7e-18),  # rel: threads, fl smoke; beyond: engine, golden quartic_momentum gs (no AVX2)
        "cumulative": (2.7e-15, 3.8e-17),  # rel: threads, mlp smoke; beyond: engine, golden quartic_momentum gs (no AVX2)
        "jc_only": (2.7e-15, 4.0e-18),    # rel: engine, golden quartic_momentum gs (MKL AVX2, AVX); beyond: engine, lora_bilinear gs (no AVX2)
        "bound_bk": (2.9e-15, 1.1e-11),   # rel: engine, lora smoke; beyond: engine, golden quadratic_block_lr gs
                                          # under MKL_CBWR=AVX2 and AVX (4.0e-16 on this CPU's own kernels)
        "sharpness": (8.4e-16, 8.7e-17),  # threads, mlp and fl smoke
        "gap_err": (8.6e-14, 7.9e-21),    # rel: threads, fl default
    },
}


def stated_rounding(dtype: str, column: str) -> tuple:
    """``(rel, beyond)`` of :data:`MEASURED_ROUNDING`, each at least the dtype's :data:`EPS`: the rounding the
    tolerances promise.  A part measured as exactly 0 (a difference that is zero in exact arithmetic and came
    out bit for bit equal on the measuring machine) is rounding on another CPU (e.g. 1.8e-32 with another
    OpenBLAS kernel), so no stated rounding is 0."""
    rel, beyond = MEASURED_ROUNDING[dtype][column]
    return (max(rel, EPS[dtype]), max(beyond, EPS[dtype]))


def tolerance_from_rounding(dtype: str, rounding: tuple) -> tuple:
    """``(rtol, atol_rel) = SAFETY * max(rel, eps), SAFETY * max(beyond, eps)`` for a measured ``(rel, beyond)``."""
    eps = EPS[dtype]
    return (SAFETY * max(rounding[0], eps), SAFETY * max(rounding[1], eps))


#: Default tolerances per reference dtype and column: ``(rtol, atol_rel)``; a
#: value agrees when ``|theirs - ref| <= atol_rel * scale + rtol * |ref|`` with
#: ``scale`` the reference's largest ``|loss_jc|``/``|loss_s|`` (for
#: ``sharpness``: its largest ``|sharpness|``; :func:`column_scale`), and for
#: ``gap`` the ``gap_err`` of both records added (:func:`compare_records`).
#: Each is :data:`SAFETY` times the column's :data:`MEASURED_ROUNDING`, at least
#: :data:`EPS` (:func:`tolerance_from_rounding`).  These hold over the measured
#: horizons (K = 10 on the smoke presets, 3 on the default ones); float32
#: trajectories part further with every iteration (fastest past the edge of
#: stability, ``eta * sharpness > 2``), so long float32 runs agree up to some
#: iteration and then not: ``crosscurv report --check`` names it.
#: Earlier versions used ``(1e-4, 1e-5)`` for float32 and ``(1e-9, 1e-12)`` for
#: float64 in every column (neither measured): ``atol`` 8x (float32) and 250-450x
#: (float64) above these, float64's ``rtol`` 550x to 2e5x; but float32's
#: ``rtol = 1e-4`` was *below* the measured relative rounding of ``recursive``
#: (5.2e-4) and ``gap_err`` (5.0e-2), covered only because their values are small
#: against the loss-scaled ``atol``.
TOLERANCES = {dt: {c: tolerance_from_rounding(dt, m) for c, m in cols.items()}
              for dt, cols in MEASURED_ROUNDING.items()}

#: The paper's columns (with ``k``): every records file must have them; always compared.
VALUE_COLUMNS = ("loss_jc", "loss_s", "gap", "recursive", "cumulative")
#: Columns compared when both records have them: ``jc_only``, ``bound_bk`` (crosscurv's additions
#: to the paper's set), ``sharpness`` and ``gap_err``.  ``sharpness`` and ``bound_bk`` depend on
#: the power-iteration start ``p_0`` (``crosscurv.numeric.estimates.init_power_vector``; recorded
#: in a golden ``case.json`` as ``power_iteration.start``): an implementation with another start
#: leaves them out.
OPTIONAL_COLUMNS = tuple(f for f in _ALL_FIELDS if f != "k" and f not in VALUE_COLUMNS
                         and f in MEASURED_ROUNDING["float64"])
#: Every comparable column, in record order.
ALL_COLUMNS = VALUE_COLUMNS + OPTIONAL_COLUMNS


def _dtype_key(dtype) -> str:
    key = str(dtype or "float64").replace("torch.", "")
    return key if key in TOLERANCES else "float64"


def default_tolerances(dtype: str | None) -> dict:
    """``{column: (rtol, atol_rel)}`` for a dtype name (float64's when unknown or ``None``)."""
    return dict(TOLERANCES[_dtype_key(dtype)])


def _finite(values) -> list:
    return [abs(float(v)) for v in values if math.isfinite(float(v))]


def column_scale(reference: Mapping[str, Sequence], column: str) -> float:
    """The scale ``atol_rel`` multiplies for ``column``: the reference's largest ``|loss|``
    (``|sharpness|`` for ``sharpness``); 1 when there is none."""
    src = ("sharpness",) if column == "sharpness" else ("loss_jc", "loss_s")
    s = max([v for c in src if c in reference for v in _finite(reference[c])] + [0.0])
    return s if s > 0 else 1.0


def compared_columns(theirs: Mapping, reference: Mapping, columns: Sequence[str] | None = None) -> list:
    """The columns to compare: ``columns`` if given, else :data:`VALUE_COLUMNS` plus each
    :data:`OPTIONAL_COLUMNS` entry that both records hold (not all NaN)."""
    if columns:
        return list(columns)
    return list(VALUE_COLUMNS) + [c for c in OPTIONAL_COLUMNS
                                  if c in theirs and c in reference and _finite(theirs[c]) and _finite(reference[c])]


def reference_tolerances(reference: Mapping[str, Sequence], dtype: str | None, columns: Sequence[str] | None = None,
                         rtol: float | None = None, atol: float | None = None) -> dict:
    """``{column: (rtol, atol)}`` (``atol`` absolute) for comparisons against ``reference``.

    The defaults of :data:`TOLERANCES` for ``dtype``, with ``atol_rel`` times
    :func:`column_scale`; ``rtol`` / ``atol`` (absolute) replace them for every
    column when given.  (:func:`compare_records` adds each iteration's
    ``gap_err`` to the ``gap`` column's tolerance.)
    """
    tol = default_tolerances(dtype)
    out = {}
    for c in columns or ALL_COLUMNS:
        r, a_rel = tol[c]
        out[c] = (r if rtol is None else rtol, a_rel * column_scale(reference, c) if atol is None else atol)
    return out


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
    def ok(self) -> bool:
        return self.first is None

    @property
    def exit_code(self) -> int:
        """``validate-records``' verdict: 0 agree, 1 disagree."""
        return 0 if self.ok else 1

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
            [c.column, c.compared, c.bad, "" if c.first_bad_k is None else c.first_bad_k, c.max_abs, c.max_rel,
             self.tolerances[c.column][0], self.tolerances[c.column][1]]
            for c in self.columns
        ]
        return tabulate(rows, headers=["column", "compared", "disagree", "first k", "max abs. diff", "max rel. diff",
                                       "rtol", "atol"],
                        tablefmt=fmt, floatfmt=".3e")

    def summary(self) -> str:
        """One line: agreement, or the first disagreement."""
        if self.ok:
            tol = (f"rtol {self.rtol:g}, atol {self.atol:.3g}" if self.rtol is not None and self.atol is not None
                   else "per-column tolerances")
            return f"all {len(self.columns)} columns agree at all {len(self.ks)} common iterations ({tol})"
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
            "tolerances": {c: {"rtol": r, "atol": a} for c, (r, a) in self.tolerances.items()},
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


def _series_close(ts, rs, tol: tuple) -> bool:
    return len(ts) >= 2 and all(_close(t, r, *tol) for t, r in zip(ts, rs))


def compare_records(
    theirs: Mapping[str, Sequence],
    reference: Mapping[str, Sequence],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    tolerances: Mapping[str, tuple] | None = None,
    columns: Sequence[str] | None = None,
    growth: Sequence[float] | None = None,
    slack: Mapping[str, Sequence[float]] | None = None,
    terms: Mapping[str, Sequence] | None = None,
) -> RecordsComparison:
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

        growth: factors ``>= 1`` aligned with ``theirs``: the tolerance at each ``k`` (``rtol`` and ``atol``)
            is multiplied by it.  The trajectory's own sensitivity: how much further than at its first
            iteration a run that differs only at rounding has parted by ``k`` (report --check measures it).
        slack: ``{column: [s_k, ...]}`` aligned with ``theirs``: an absolute amount added to that column's
            allowed difference at each ``k`` after ``growth`` (a column's own measured spread at rounding,
            e.g. :func:`crosscurv.experiments.reports.check.sharpness_spread`).
        terms: the reference's ``terms.csv`` as ``{column: values}`` with ``"k"`` (a golden run
        folder;
            :mod:`crosscurv.experiments.conformance.golden_terms`): enables the formula-level
            diagnoses of :mod:`crosscurv.numeric.formula_variants`.

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
               (tolerances[c][1] if tolerances is not None and atol is None else atol)) for c in cols}
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
        rtol_c, atol_c = tol[c]
        for k in common:
            t, r = float(theirs[c][tpos[k]]), float(reference[c][rpos[k]])
            a = atol_c + (_gap_slack(theirs, tpos[k]) + _gap_slack(reference, rpos[k]) if c == "gap" else 0.0)
            g = max(1.0, float(growth[tpos[k]])) if growth is not None else 1.0
            extra = float(slack[c][tpos[k]]) if slack is not None and c in slack else 0.0
            if not _close(t, r, rtol_c * g, a * g + extra):
                bad += 1
                if first_bad is None:
                    first_bad = k
                if first is None or k < first[0] or (k == first[0] and cols.index(c) < cols.index(first[1])):
                    first = (k, c, t, r, (a + rtol_c * abs(r)) * g + extra if math.isfinite(r) else 0.0)
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


def _gap_slack(records: Mapping, i: int) -> float:
    """The recorded error bound ``gap_err`` of row ``i`` (0 when the records have none)."""
    if "gap_err" not in records:
        return 0.0
    e = float(records["gap_err"][i])
    return e if math.isfinite(e) and e > 0 else 0.0


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


def _allowed(theirs, reference, c: str, tol: tuple) -> tuple[list, list, list]:
    """Their and the reference's values of ``c`` at the common ``k`` (in order) and the allowed
    difference."""
    rpos = {k: i for i, k in enumerate(reference["k"])}
    ts, rs, al = [], [], []
    for i, k in enumerate(theirs["k"]):
        j = rpos.get(k)
        if j is None:
            continue
        t, r = float(theirs[c][i]), float(reference[c][j])
        extra = _gap_slack(theirs, i) + _gap_slack(reference, j) if c == "gap" else 0.0
        ts.append(t)
        rs.append(r)
        al.append(tol[1] + extra + tol[0] * abs(r) if math.isfinite(r) else 0.0)
    return ts, rs, al


def _s_equals_jc(theirs, reference, tol: dict) -> bool:
    """Their S run is the reference's JC run: ``loss_s`` equals the reference ``loss_jc``, which the
    reference ``loss_s`` does not."""
    ts, rs = _aligned(theirs, reference, "loss_s", "loss_jc", 0)
    _, rs_s = _aligned(theirs, reference, "loss_s", "loss_s", 0)
    t_jc = tol.get("loss_jc", tol.get("loss_s"))
    return t_jc is not None and _series_close(ts, rs, t_jc) and not _series_close(rs_s, rs, t_jc)


def _formula_diagnoses(theirs, reference, bad: list, tol: dict, terms) -> tuple[list, set]:
    """Diagnoses of :mod:`crosscurv.numeric.formula_variants` and the columns they explain."""
    from .formula_variants import match_variants

    tpos = {k: i for i, k in enumerate(terms["k"])}
    rpos = {k: i for i, k in enumerate(reference["k"])}
    ks = [k for k in theirs["k"] if k in rpos]
    if not all(k in tpos for k in ks):
        return [], set()
    rows = [{c: float(v[tpos[k]]) for c, v in terms.items()} for k in ks]
    found: dict = {}
    for c in bad:
        ts, rs, al = _allowed(theirs, reference, c, tol[c])
        matches = match_variants(ts, rs, rows, c, al)
        if matches:
            key = tuple(m.name for m in matches)
            found.setdefault(key, (matches, []))[1].append(c)
    out, explained = [], set()
    for matches, cols in found.values():
        explained.update(cols)
        what = ("column " if len(cols) == 1 else "columns ") + ", ".join(cols)
        if len(matches) == 1:
            m = matches[0]
            out.append(
                f"{what}: reproduced by an implementation in which {m.mistake} (paper: {m.formula})"
            )
        else:
            out.append(
                f"{what}: reproduced by each of these mistakes on this run (paper: "
                f"{matches[0].formula}): " + "; ".join(m.mistake for m in matches)
            )
    return out, explained


def _relative_difference(ts: list, rs: list) -> float:
    """Largest ``|t - r| / max(|r|, |t|, 1e-3 max|r|)`` (relative to the column's size near
    zero)."""
    floor = 1e-3 * max([abs(r) for r in rs if math.isfinite(r)] + [0.0])
    worst = 0.0
    for t, r in zip(ts, rs):
        if not (math.isfinite(t) and math.isfinite(r)):
            if not (math.isnan(t) and math.isnan(r)) and t != r:
                return math.inf
            continue
        d = abs(t - r)
        if d:
            worst = max(worst, d / max(abs(r), abs(t), floor))
    return worst


#: Largest relative difference diagnosed as precision rather than as a formula.
PRECISION_LEVEL = 1e-4


def _precision_diagnosis(theirs, reference, cols: list, tol: dict) -> str | None:
    """One sentence for columns that differ at a precision level: how much, and the ``--rtol`` (and
    ``--atol``) that would accept them, checked."""
    rel = {c: _relative_difference(*_allowed(theirs, reference, c, tol[c])[:2]) for c in cols}
    worst = max(rel.values(), default=math.inf)
    if not worst <= PRECISION_LEVEL:
        return None
    rtol = 10.0 ** math.ceil(math.log10(2 * worst))
    atol = None
    if not all(
        _series_close(*_allowed(theirs, reference, c, tol[c])[:2], (rtol, tol[c][1])) for c in cols
    ):
        diff = max(
            abs(t - r)
            for c in cols
            for t, r in zip(*_allowed(theirs, reference, c, tol[c])[:2])
            if math.isfinite(t) and math.isfinite(r)
        )
        atol = float(f"{2 * diff:.0e}")
    flags = f"--rtol {rtol:g}" + ("" if atol is None else f" --atol {atol:g}")
    parts = ", ".join(f"{c} {rel[c]:.1e}" for c in cols)
    return (
        f"a difference at a precision level, not in a formula: largest relative difference {parts} "
        "(a finite-difference Hessian, float32 arithmetic or another order of summation parts "
        f"this far); if that is the precision of your implementation, compare with {flags}"
    )


def diagnose(theirs, reference, bad: Sequence[str], tol: dict, terms=None) -> list:
    """Likely explanations of the disagreeing columns ``bad``, one sentence each.

    In order: their S run equals the reference's JC run ("run validate-step on your step"); with
    ``terms``, the formula variants of :mod:`crosscurv.numeric.formula_variants` that reproduce a
    column; then per remaining column a shift by one iteration, the opposite sign, another
    reference column, a constant factor; the columns left that differ by at most
    :data:`PRECISION_LEVEL` relative are named as a precision difference with the tolerance that
    accepts them; ``sharpness``/``bound_bk`` alone are put down to the power-iteration start.
    """
    out: list = []
    shifted: dict = {}
    explained: set = set()
    if "loss_s" in bad and _s_equals_jc(theirs, reference, tol):
        out.append(
            "your S run equals the JC run: column loss_s equals the reference column loss_jc at "
            "every iteration, so your S step performs JC (a GS sweep that reuses the gradients of "
            "the start of the sweep is JC); run `crosscurv validate-step` on your step (the estimates that "
            "follow from that run are not diagnosed further)"
        )
        return out
    if terms is not None:
        out, explained = _formula_diagnoses(theirs, reference, list(bad), tol, terms)
    rest = []
    for c in bad:
        if c in explained:
            continue
        rtol, atol = tol[c]
        ts, rs = _aligned(theirs, reference, c, c, 0)
        if _relative_difference(ts, rs) <= PRECISION_LEVEL:
            rest.append(c)
            continue
        found = None
        for s in (+1, -1):
            if _series_close(*_aligned(theirs, reference, c, c, s), (rtol, atol)):
                found = s
                break
        if found is not None:
            shifted[c] = found
            continue
        if _series_close(ts, [-r for r in rs], (rtol, atol)):
            out.append(
                f"column {c} has the opposite sign of the reference at every iteration "
                "(sign convention: gap = loss_s - loss_jc, estimates predict the gap)"
            )
            continue
        other = _other_column(theirs, reference, c, tol, (rtol, atol))
        if other:
            c2, s = other
            where = (
                ""
                if s == 0
                else f" shifted by one iteration (their k holds the reference's k{s:+d})"
            )
            out.append(
                f"column {c} equals the reference column {c2}{where}: columns swapped or "
                "mislabelled?"
            )
            continue
        ratios = [
            t / r
            for t, r in zip(ts, rs)
            if r != 0 and math.isfinite(t) and math.isfinite(r) and abs(r) > atol
        ]
        if len(ratios) >= 2:
            f0 = ratios[0]
            if f0 != 0 and all(abs(x - f0) <= max(1e3 * rtol, 1e-6) * abs(f0) for x in ratios):
                out.append(
                    f"column {c} is the reference times a constant factor {f0:.6g} at every "
                    "iteration (a missing or extra scale, e.g. 1/2 or eta?)"
                )
                continue
        if set(bad) - explained <= {"sharpness", "bound_bk"}:
            out.append(
                f"column {c} depends on the power-iteration start p_0 (L is the running maximum of "
                "|p_k.H_JC^k p_k| over the power iteration p_{k+1} = H_JC^k p_k / ||H_JC^k "
                "p_k||): crosscurv "
                "starts from the seeded unit vector of "
                "crosscurv.numeric.estimates.init_power_vector, "
                "written into a golden case.json as power_iteration.start; with another start "
                "leave "
                "sharpness and bound_bk out of your file (they are optional)"
            )
            continue
        ks = [k for k in theirs["k"] if k in set(reference["k"])]
        first = next(
            (
                k
                for k, t, r, a in zip(ks, *_allowed(theirs, reference, c, tol[c]))
                if not _close(t, r, 0.0, a)
            ),
            None,
        )
        if first is not None and first > min(theirs["k"]):
            out.append(f"column {c} agrees up to k={first - 1} and disagrees from k={first} on")
    precision = _precision_diagnosis(theirs, reference, rest, tol)
    if precision:
        out.append(precision)
    if shifted:
        if len(shifted) == len(bad) and len(set(shifted.values())) == 1 and len(bad) > 1:
            s = next(iter(shifted.values()))
            if s == +1:
                out.insert(
                    0,
                    "every disagreeing column is shifted by one iteration: their row k holds the "
                    "reference's k+1 (iterations numbered from 0 instead of 1?)",
                )
            else:
                out.insert(
                    0,
                    "every disagreeing column is shifted by one iteration: their row k holds the "
                    "reference's k-1 (records written one iteration late, or numbered from 2?)",
                )
        else:
            for c, s in shifted.items():
                out.append(
                    f"column {c} is shifted by one iteration: their row k holds the reference's "
                    f"k{s:+d} "
                    "(an off-by-one in k)"
                )
    return out


def _other_column(theirs, reference, c: str, tol: dict, own: tuple):
    """``(c2, shift)`` of another reference column that their ``c`` equals, not one that is zero to
    within
    its tolerance throughout (any small column would match a zero one)."""
    for c2 in ALL_COLUMNS:
        if c2 == c or c2 not in reference:
            continue
        t2 = tol.get(c2, own)
        for s in (0, +1, -1):
            ts2, rs2 = _aligned(theirs, reference, c, c2, s)
            if all(_close(0.0, r, *t2) for r in rs2):
                continue
            if _series_close(ts2, rs2, t2):
                return c2, s
    return None
