"""Diagnoses of disagreeing records: which likely mistake makes a column differ.

Their S run equal to the reference's JC run; with the reference's ``terms.csv``, the formula
variants of :mod:`crosscurv.numeric.formula_variants`; a column shifted by one iteration, of the
opposite sign, equal to another reference column or off by a constant factor; a difference at a
precision level. Torch-free.
"""

from __future__ import annotations

import math
from typing import Sequence

from .record_tolerances import ALL_COLUMNS, close, gap_slack, series_close

__all__ = ["PRECISION_LEVEL", "diagnose"]


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
        extra = gap_slack(theirs, i) + gap_slack(reference, j) if c == "gap" else 0.0
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
    return t_jc is not None and series_close(ts, rs, t_jc) and not series_close(rs_s, rs, t_jc)


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
        series_close(*_allowed(theirs, reference, c, tol[c])[:2], (rtol, tol[c][1])) for c in cols
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
    if "loss_s" in bad and _s_equals_jc(theirs, reference, tol):
        return [
            "your S run equals the JC run: column loss_s equals the reference column loss_jc at "
            "every iteration, so your S step performs JC (a GS sweep that reuses the gradients of "
            "the start of the sweep is JC); run `crosscurv validate-step` on your step (the "
            "estimates that follow from that run are not diagnosed further)"
        ]
    out: list = []
    explained: set = set()
    if terms is not None:
        out, explained = _formula_diagnoses(theirs, reference, list(bad), tol, terms)
    rest, shifted = [], {}
    for c in bad:
        if c in explained:
            continue
        ts, rs = _aligned(theirs, reference, c, c, 0)
        if _relative_difference(ts, rs) <= PRECISION_LEVEL:
            rest.append(c)
            continue
        found = None
        for s in (+1, -1):
            if series_close(*_aligned(theirs, reference, c, c, s), tol[c]):
                found = s
                break
        if found is not None:
            shifted[c] = found
            continue
        sentence = _column_diagnosis(theirs, reference, c, tol, set(bad) - explained, ts, rs)
        if sentence:
            out.append(sentence)
    precision = _precision_diagnosis(theirs, reference, rest, tol)
    if precision:
        out.append(precision)
    return _shift_diagnoses(out, shifted, bad)


def _column_diagnosis(theirs, reference, c: str, tol: dict, unexplained: set, ts: list,
                      rs: list) -> str | None:
    """One sentence for column ``c`` (not shifted): the opposite sign, another reference column, a
    constant factor, the power-iteration start (``sharpness``/``bound_bk`` alone in
    ``unexplained``), or the first iteration it disagrees at; ``None`` when none applies. ``ts``,
    ``rs``: their and the reference's values of ``c`` at the common ``k``."""
    rtol, atol = tol[c]
    if series_close(ts, [-r for r in rs], (rtol, atol)):
        return (
            f"column {c} has the opposite sign of the reference at every iteration "
            "(sign convention: gap = loss_s - loss_jc, estimates predict the gap)"
        )
    other = _other_column(theirs, reference, c, tol, (rtol, atol))
    if other:
        c2, s = other
        where = (
            "" if s == 0 else f" shifted by one iteration (their k holds the reference's k{s:+d})"
        )
        return (
            f"column {c} equals the reference column {c2}{where}: columns swapped or mislabelled?"
        )
    ratios = [
        t / r
        for t, r in zip(ts, rs)
        if r != 0 and math.isfinite(t) and math.isfinite(r) and abs(r) > atol
    ]
    if len(ratios) >= 2:
        f0 = ratios[0]
        if f0 != 0 and all(abs(x - f0) <= max(1e3 * rtol, 1e-6) * abs(f0) for x in ratios):
            return (
                f"column {c} is the reference times a constant factor {f0:.6g} at every "
                "iteration (a missing or extra scale, e.g. 1/2 or eta?)"
            )
    if unexplained <= {"sharpness", "bound_bk"}:
        return (
            f"column {c} depends on the power-iteration start p_0 (L is the running maximum of "
            "|p_k.H_JC^k p_k| over the power iteration p_{k+1} = H_JC^k p_k / ||H_JC^k "
            "p_k||): crosscurv starts from the seeded unit vector of "
            "crosscurv.numeric.estimates.init_power_vector, written into a golden case.json as "
            "power_iteration.start; with another start leave sharpness and bound_bk out of your "
            "file (they are optional)"
        )
    ks = [k for k in theirs["k"] if k in set(reference["k"])]
    first = next(
        (k for k, t, r, a in zip(ks, *_allowed(theirs, reference, c, tol[c]))
         if not close(t, r, 0.0, a)),
        None,
    )
    if first is not None and first > min(theirs["k"]):
        return f"column {c} agrees up to k={first - 1} and disagrees from k={first} on"
    return None


def _shift_diagnoses(out: list, shifted: dict, bad: Sequence[str]) -> list:
    """``out`` with the shifted columns ``{column: +1 or -1}`` named: one sentence first when every
    disagreeing column (more than one) is shifted the same way, else one per column."""
    if not shifted:
        return out
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
                f"k{s:+d} (an off-by-one in k)"
            )
    return out


def _other_column(theirs, reference, c: str, tol: dict, own: tuple):
    """``(c2, shift)`` of another reference column that their ``c`` equals, not one that is zero to
    within its tolerance throughout (any small column would match a zero one)."""
    for c2 in ALL_COLUMNS:
        if c2 == c or c2 not in reference:
            continue
        t2 = tol.get(c2, own)
        for s in (0, +1, -1):
            ts2, rs2 = _aligned(theirs, reference, c, c2, s)
            if all(close(0.0, r, *t2) for r in rs2):
                continue
            if series_close(ts2, rs2, t2):
                return c2, s
    return None
