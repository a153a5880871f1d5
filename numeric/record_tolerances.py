"""The tolerances records are compared with: the measured rounding of each column, per dtype.

A value agrees with the reference's when ``|theirs - ref| <= atol + rtol |ref|`` (:func:`close`),
with ``(rtol, atol)`` per column from :data:`TOLERANCES` (:func:`reference_tolerances`), and for
``gap`` the recorded error bounds ``gap_err`` added (:func:`gap_slack`). Torch-free.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from .records import FIELDS as _ALL_FIELDS

__all__ = ["TOLERANCES", "MEASURED_ROUNDING", "SAFETY", "EPS", "tolerance_from_rounding",
           "stated_rounding", "VALUE_COLUMNS", "OPTIONAL_COLUMNS", "ALL_COLUMNS",
           "default_tolerances", "column_scale", "compared_columns", "reference_tolerances",
           "close", "series_close", "gap_slack"]


#: Safety factor between the measured rounding of a column and its tolerance.
SAFETY = 10.0

#: Unit roundoff of each dtype: the floor of a measured rounding (a value that
#: came out bit for bit equal in every measured variant is still the result of
#: at least one rounding, and every column is computed from loss-sized numbers).
EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}

#: Measured rounding of each record column, ``(rel, beyond)``, per dtype: runs that differ only in
#: the order or precision of their floating-point operations (threads, HVP engine, float32 against
#: float64, the NumPy implementation, the emulated instruction sets of ``make test-portable``) part
#: by at most ``rel |value| + beyond scale`` (:func:`column_scale`), rounded up to two digits; the
#: comment names the variant and run where it was largest.  Measured by
#: ``python -m crosscurv.experiments.conformance.rounding`` and ``make rounding``
#: (docs/reproducibility.md, reports/rounding.md).
MEASURED_ROUNDING = {
    "float32": {
        # rel: threads, smoke:10 (reports/rounding.md)
        "loss_jc": (2.0e-07, 0.0),
        # rel: float64, lora smoke
        "loss_s": (1.6e-07, 1.8e-23),
        # beyond both gap_err: float64, lora smoke (the float32 segment integral's own rounding,
        # 1.7 ulps of the loss; make rounding)
        "gap": (0.0, 2.0e-07),
        # rel: float64, fl smoke (Delta theta: difference of two float32 vectors); beyond: float64,
        # smoke:10 (reports/rounding.md)
        "recursive": (5.2e-04, 5.0e-10),
        # rel: float64, mlp smoke
        "cumulative": (3.0e-06, 2.0e-12),
        # rel: float64, mlp smoke
        "jc_only": (1.9e-06, 3.6e-12),
        # rel: float64, lora smoke; beyond: threads, smoke:10 (reports/rounding.md)
        "bound_bk": (9.7e-06, 2.7e-22),
        # float64, fl smoke, no AVX2 (MKL_CBWR=COMPATIBLE; beyond in units of the largest
        # |sharpness|; make rounding)
        "sharpness": (3.4e-06, 6.0e-07),
        # rel: threads, mlp default (4.1e-2): an error estimate (a float64 run's gap_err is another
        # quantity: rounding.NOT_ROUNDING)
        "gap_err": (5.0e-02, 1.7e-10),
    },
    "float64": {
        # rel: numpy, golden quadratic gs
        "loss_jc": (4.8e-16, 0.0),
        # rel: numpy, golden quadratic gs
        "loss_s": (4.9e-16, 0.0),
        # rel: numpy, golden quadratic partial (its gap: a subtraction)
        "gap": (1.9e-13, 0.0),
        # rel: threads, fl smoke; beyond: engine, golden quartic_momentum gs (no AVX2)
        "recursive": (3.3e-14, 3.7e-18),
        # rel: threads, mlp smoke; beyond: engine, golden quartic_momentum gs (no AVX2)
        "cumulative": (2.7e-15, 3.8e-17),
        # rel: engine, golden quartic_momentum gs (MKL AVX2, AVX); beyond: engine, lora_bilinear gs
        # (no AVX2)
        "jc_only": (2.7e-15, 4.0e-18),
        # rel: engine, lora smoke; beyond: engine, golden quadratic_block_lr gs under MKL_CBWR=AVX2
        # and AVX (4.0e-16 on this CPU's own kernels)
        "bound_bk": (2.9e-15, 1.1e-11),
        # threads, mlp and fl smoke
        "sharpness": (8.4e-16, 8.7e-17),
        # rel: threads, fl default
        "gap_err": (8.6e-14, 7.9e-21),
    },
}


def stated_rounding(dtype: str, column: str) -> tuple:
    """``(rel, beyond)`` of :data:`MEASURED_ROUNDING`, each at least the dtype's :data:`EPS`: the
    rounding the tolerances promise. A part measured as exactly 0 (a difference that is zero in
    exact arithmetic and came out bit for bit equal on the measuring machine) is rounding on another
    CPU (e.g. 1.8e-32 with another OpenBLAS kernel), so no stated rounding is 0."""
    rel, beyond = MEASURED_ROUNDING[dtype][column]
    return (max(rel, EPS[dtype]), max(beyond, EPS[dtype]))


def tolerance_from_rounding(dtype: str, rounding: tuple) -> tuple:
    """``(rtol, atol_rel) = SAFETY * max(rel, eps), SAFETY * max(beyond, eps)`` for a measured
    ``(rel, beyond)``."""
    eps = EPS[dtype]
    return (SAFETY * max(rounding[0], eps), SAFETY * max(rounding[1], eps))


#: Default tolerances per reference dtype and column: ``(rtol, atol_rel)``; a value agrees when
#: ``|theirs - ref| <= atol_rel * scale + rtol * |ref|`` (:func:`column_scale`), for ``gap`` with
#: the ``gap_err`` of both records added.  Each is :data:`SAFETY` times the column's
#: :data:`MEASURED_ROUNDING`, at least :data:`EPS`; they hold over the measured horizons (K = 10 on
#: the smoke presets, 3 on the default ones).
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


def compared_columns(theirs: Mapping, reference: Mapping,
                     columns: Sequence[str] | None = None) -> list:
    """The columns to compare: ``columns`` if given, else :data:`VALUE_COLUMNS` plus each
    :data:`OPTIONAL_COLUMNS` entry that both records hold (not all NaN)."""
    if columns:
        return list(columns)
    return list(VALUE_COLUMNS) + [c for c in OPTIONAL_COLUMNS
                                  if c in theirs and c in reference and _finite(theirs[c])
                                  and _finite(reference[c])]


def reference_tolerances(reference: Mapping[str, Sequence], dtype: str | None,
                         columns: Sequence[str] | None = None, rtol: float | None = None,
                         atol: float | None = None) -> dict:
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
        out[c] = (r if rtol is None else rtol,
                  a_rel * column_scale(reference, c) if atol is None else atol)
    return out


def close(t: float, r: float, rtol: float, atol: float) -> bool:
    if math.isnan(t) or math.isnan(r):
        return math.isnan(t) and math.isnan(r)
    if math.isinf(t) or math.isinf(r):
        return t == r
    return abs(t - r) <= atol + rtol * abs(r)


def series_close(ts, rs, tol: tuple) -> bool:
    return len(ts) >= 2 and all(close(t, r, *tol) for t, r in zip(ts, rs))


def gap_slack(records: Mapping, i: int) -> float:
    """The recorded error bound ``gap_err`` of row ``i`` (0 when the records have none)."""
    if "gap_err" not in records:
        return 0.0
    e = float(records["gap_err"][i])
    return e if math.isfinite(e) and e > 0 else 0.0
