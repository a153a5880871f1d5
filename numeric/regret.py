"""What an advised scheme gives up against the measured best: regret, and whether the advice was
right.

At one budget ``k`` with measured gaps ``gap_S = L_S^k - L_JC^k`` (JC: 0) and their error bounds
``err_S`` (the records' ``gap_err``; JC: 0):

* the measured best ``m = argmin_S gap_S``; the candidates *tied* with it: ``gap_S - gap_m <= err_S
  + err_m`` (the measurement cannot order them);
* the advice ``a`` is *right* when ``a`` is tied with ``m``, or when ``a`` and ``m`` are both among
  the full GS orders the theory could not tell apart at ``k`` (``theory_ties``: Corollary 1 ties
  them at ``O(eta^2)``, and the certificate of :mod:`crosscurv.numeric.certificate` names them as a
  set);
* ``regret = (gap_a - gap_m) / (max_S gap_S - gap_m)``: the loss the advice gives up, relative to
  the spread between the best and the worst candidate; ``0`` when the advice is right, ``NaN`` when
  every candidate is tied (nothing to give up: the iteration is *undecided*).

All inputs are ``{candidate: float}`` mappings; values Python floats.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

__all__ = ["measured_ties", "advice_right", "regret", "summarise"]


def measured_ties(gaps: Mapping[str, float], errs: Mapping[str, float]) -> tuple[str, list]:
    """``(m, tied)``: the measured best (ties: the first) and the candidates the measurement cannot
    order against it (``m`` first). NaN gaps are never best nor tied."""
    names = [n for n in gaps if math.isfinite(gaps[n])]
    if not names:
        return "", []
    m = min(names, key=lambda n: (gaps[n], names.index(n)))
    e = {n: (float(errs[n]) if math.isfinite(errs[n]) else 0.0) for n in names}
    return m, [m] + [n for n in names if n != m and gaps[n] - gaps[m] <= e[n] + e[m]]


def advice_right(
    advised: str,
    gaps: Mapping[str, float],
    errs: Mapping[str, float],
    theory_ties: Sequence[str] = (),
) -> bool:
    """Whether ``advised`` is the measured best up to the measurement's error or the theory's
    GS-order ties."""
    m, tied = measured_ties(gaps, errs)
    return advised in tied or (advised in theory_ties and any(t in theory_ties for t in tied))


def regret(
    advised: str,
    gaps: Mapping[str, float],
    errs: Mapping[str, float],
    theory_ties: Sequence[str] = (),
) -> float:
    """``(gap_a - gap_m) / (max gap - gap_m)`` (module docstring): 0 when right, NaN when
    undecided."""
    m, tied = measured_ties(gaps, errs)
    finite = [gaps[n] for n in gaps if math.isfinite(gaps[n])]
    if not tied or len(tied) == len(gaps) or not math.isfinite(gaps.get(advised, math.nan)):
        return math.nan
    if advice_right(advised, gaps, errs, theory_ties):
        return 0.0
    return (gaps[advised] - gaps[m]) / (max(finite) - gaps[m])


def summarise(rows: Sequence[Mapping]) -> dict:
    """Precision, coverage and regret of an advice over its iterations.

    ``rows``: ``[{"k", "advised", "certified", "right", "regret"}]`` (``regret`` NaN: undecided).

    Returns:
        ``{"decided", "certified", "wrong_k", "precision", "coverage", "regret_mean", "regret_max",
        "regret_certified", "agree"}``: over the decided iterations; ``wrong_k`` the certified
        iterations whose advice was not right; ``precision``, ``coverage`` in percent (NaN when
        nothing to count); ``agree`` ``[right, decided]``.
    """
    dec = [r for r in rows if math.isfinite(r["regret"])]
    cert = [r for r in dec if r["certified"]]
    wrong = [r["k"] for r in cert if not r["right"]]
    regs = [r["regret"] for r in dec]
    cregs = [r["regret"] for r in cert]
    return {
        "decided": len(dec),
        "certified": len(cert),
        "wrong_k": wrong,
        "precision": 100.0 * (len(cert) - len(wrong)) / len(cert) if cert else math.nan,
        "coverage": 100.0 * len(cert) / len(dec) if dec else math.nan,
        "regret_mean": math.fsum(regs) / len(regs) if regs else math.nan,
        "regret_max": max(regs) if regs else math.nan,
        "regret_certified": math.fsum(cregs) / len(cregs) if cregs else math.nan,
        "agree": [sum(1 for r in dec if r["right"]), len(dec)],
    }
