"""The paper's evaluation metrics (Section 5.1, "Metrics and baselines").

With measured gaps ``Delta L^k = L(theta_GS^k) - L(theta_JC^k)``, estimates ``hat Delta L^k`` (``k =
1..K``) and the winner ``w(x) = JC`` for ``x > 0``, ``GS`` for ``x < 0``:

* ``Correct_K = 100% / K * sum_k 1{w(hat Delta L^k) = w(Delta L^k)}``;
* ``h_m/n_m`` for ``m in {JC, GS}`` ("JC hits", "GS hits"): ``n_m = sum_k 1{w(Delta L^k) = m}``,
  ``h_m = sum_k 1{w(Delta L^k) = m} 1{w(hat Delta L^k) = m}``;
* ``MAE_K = (1/K) sum_k e_k``, ``Max. AE_K = max_k e_k``, ``e_k = |hat Delta L^k - Delta L^k|``.

Ties: ``w(0) = "tie"``, in neither ``n_JC`` nor ``n_GS``; a zero estimate agrees only with a zero
gap. A NaN estimate never agrees and makes ``MAE``, ``Max. AE`` NaN. Undecided (beyond the paper):
``gap_err_k > 0`` and ``|Delta L^k| <= gap_err_k``; in neither ``n_m`` and left out of ``Correct_K``
(denominator ``K - undecided``), still in ``MAE``. Certified winners (:func:`certified_metrics`):
``Coverage`` and ``Precision`` over the decided iterations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["JC", "GS", "TIE", "UNDEFINED", "UNDECIDED", "undecided", "winner", "Metrics",
           "evaluate", "winner_metrics", "evaluate_columns", "bound_coverage", "run_metrics",
           "certified_metrics", "certified_columns", "calibration"]

JC, GS, TIE, UNDEFINED, UNDECIDED = "JC", "GS", "tie", "undefined", "undecided"


def winner(x: float) -> str:
    """``w(x)``: ``"JC"`` if ``x > 0``, ``"GS"`` if ``x < 0``, ``"tie"`` at 0, ``"undefined"`` for
    NaN.
    """
    x = float(x)
    if x > 0:
        return JC
    if x < 0:
        return GS
    if x == 0:
        return TIE
    return UNDEFINED


@dataclass(frozen=True)
class Metrics:
    """The paper's metrics of one estimate against the measured gaps.

    Attributes:
        K: number of iterations compared.
        correct: ``Correct_K`` in percent.
        jc_hits: ``(h_JC, n_JC)``.
        s_hits: ``(h_GS, n_GS)``: the sequential scheme ``S``'s wins (the
            paper's "GS hits").
        mae: ``MAE_K``.
        max_ae: ``Max. AE_K``.
        ties: number of measured gaps exactly ``0`` (among the decided ones).
        undecided: iterations whose ``|gap|`` is within its error bound.
    """

    K: int
    correct: float
    jc_hits: tuple
    s_hits: tuple
    mae: float
    max_ae: float
    ties: int = 0
    undecided: int = 0

    def as_dict(self) -> dict:
        return {
            "K": self.K,
            "correct": self.correct,
            "jc_hits": self.jc_hits,
            "s_hits": self.s_hits,
            "mae": self.mae,
            "max_ae": self.max_ae,
            "ties": self.ties,
            "undecided": self.undecided,
        }

    def row(self) -> list[str]:
        """Table-1 style cells: Correct, JC hits, GS hits, MAE, Max. AE."""
        return [
            f"{self.correct:.1f}%",
            f"{self.jc_hits[0]}/{self.jc_hits[1]}",
            f"{self.s_hits[0]}/{self.s_hits[1]}",
            f"{self.mae:.3g}",
            f"{self.max_ae:.3g}",
        ]


def undecided(gap: float, err: float) -> bool:
    """``gap_err > 0`` and ``|gap| <= gap_err``: the measured winner is within the gap's error
    bound.
    """
    return err > 0 and abs(gap) <= err


def evaluate(gaps: Sequence[float], estimates: Sequence[float], gap_errs: Sequence[float]
             | None = None) -> Metrics:
    """Metrics of ``estimates`` against the measured ``gaps`` (same length ``K >= 1``).

    ``gap_errs``: per-iteration error bounds of the gaps (module docstring); ``None`` (or NaN
    entries) means no iteration is undecided.

    Raises:
        ValueError: different lengths or ``K = 0``.
    """
    est = [float(x) for x in estimates]
    gap = [float(x) for x in gaps]
    if len(est) != len(gap):
        raise ValueError(f"{len(est)} estimates against {len(gap)} gaps")
    errs = [0.0] * len(gap) if gap_errs is None else [float(x) for x in gap_errs]
    if len(errs) != len(gap):
        raise ValueError(f"{len(errs)} gap error bounds against {len(gap)} gaps")
    K = len(gap)
    if K == 0:
        raise ValueError("no iterations to evaluate")
    w_est = [winner(x) for x in est]
    w_gap = [UNDECIDED if undecided(g, e) else winner(g) for g, e in zip(gap, errs)]
    n_undecided = sum(1 for b in w_gap if b == UNDECIDED)
    agree = sum(1 for a, b in zip(w_est, w_gap) if a == b and a != UNDEFINED)
    n = {m: sum(1 for b in w_gap if b == m) for m in (JC, GS)}
    h = {m: sum(1 for a, b in zip(w_est, w_gap) if a == b == m) for m in (JC, GS)}
    errors = [abs(a - b) for a, b in zip(est, gap)]
    if any(math.isnan(e) for e in errors):
        mae = max_ae = math.nan
    else:
        mae = math.fsum(errors) / K
        max_ae = max(errors)
    decided = K - n_undecided
    return Metrics(
        K=K,
        correct=100.0 * agree / decided if decided else math.nan,
        jc_hits=(h[JC], n[JC]),
        s_hits=(h[GS], n[GS]),
        mae=mae,
        max_ae=max_ae,
        ties=sum(1 for b in w_gap if b == TIE),
        undecided=n_undecided,
    )


def winner_metrics(gaps: Sequence[float], estimates: Sequence[float], gap_errs: Sequence[float]
                   | None = None) -> dict:
    """:func:`evaluate` as a dict: ``K, correct, jc_hits, s_hits, mae, max_ae, ties, undecided``.

    ``jc_hits`` and ``s_hits`` are ``(h, n)`` tuples; ``correct`` is in percent.
    """
    return evaluate(gaps, estimates, gap_errs).as_dict()


def evaluate_columns(columns: Mapping[str, Sequence[float]], names: Sequence[str], gap: str = "gap",
                     gap_err: str = "gap_err") -> dict:
    """``{name: evaluate(columns[gap], columns[name], columns[gap_err])}`` for each estimate column
    (no error bounds when the columns have no ``gap_err``)."""
    errs = columns.get(gap_err)
    return {name: evaluate(columns[gap], columns[name], errs) for name in names}


def certified_metrics(gaps: Sequence[float], estimates: Sequence[float], certs: Sequence[float],
                      gap_errs: Sequence[float] | None = None) -> dict:
    """Coverage and precision of the certified winners over the decided iterations.

    ``certs[k]`` is ``+1`` (JC certified), ``-1`` (``S``) or ``0``/NaN (not certified). ``Coverage =
    100% * #certified / #decided``; ``Precision = 100% * #(certified winner = measured) /
    #certified`` (NaN when nothing is certified). Returns ``{"decided", "certified", "correct",
    "coverage", "precision"}``.
    """
    gap = [float(x) for x in gaps]
    c = [float(x) for x in certs]
    if not (len(gap) == len(c) == len(estimates)):
        raise ValueError(f"{len(c)} certificates and {len(estimates)} estimates against "
                         f"{len(gap)} gaps")
    errs = [0.0] * len(gap) if gap_errs is None else [float(x) for x in gap_errs]
    decided = certified = correct = 0
    for g, e, ck in zip(gap, errs, c):
        w = UNDECIDED if undecided(g, e) else winner(g)
        if w not in (JC, GS):
            continue
        decided += 1
        if ck == 1.0 or ck == -1.0:
            certified += 1
            correct += (JC if ck > 0 else GS) == w
    return {
        "decided": decided,
        "certified": certified,
        "correct": correct,
        "coverage": 100.0 * certified / decided if decided else math.nan,
        "precision": 100.0 * correct / certified if certified else math.nan,
    }


def certified_columns(columns: Mapping[str, Sequence[float]], names: Sequence[str]) -> dict:
    """``{name: certified_metrics(...)}`` for each estimate with a ``NAME_cert`` column."""
    out = {}
    for name in names:
        cert = columns.get(f"{name}_cert")
        if cert is None or all(isinstance(x, float) and math.isnan(x) for x in cert):
            continue
        out[name] = certified_metrics(columns["gap"], columns[name], cert, columns.get("gap_err"))
    return out


def calibration(gaps: Sequence[float], estimates: Sequence[float], errors: Sequence[
        float]) -> float:
    """Percent of iterations with ``|estimate_k - gap_k| <= err_k`` (NaN when every ``err_k`` is
    NaN).
    """
    g, e, r = [float(x) for x in gaps], [float(x) for x in estimates], [float(x) for x in errors]
    if not (len(g) == len(e) == len(r)):
        raise ValueError(f"{len(e)} estimates and {len(r)} errors against {len(g)} gaps")
    if not g or all(math.isnan(x) for x in r):
        return math.nan
    return 100.0 * sum(1 for a, b, c in zip(g, e, r) if abs(b - a) <= c) / len(g)


def bound_coverage(gaps: Sequence[float], bounds: Sequence[float]) -> dict:
    """``{"covered": c, "K": K, "max_ratio": max_k |gap_k| / bound_k}``: how often ``|gap_k| <=
    bound_k`` (Theorem 3); the ratio skips ``bound_k = 0``, NaN bounds are not covered.
    """
    b = [float(x) for x in bounds]
    g = [abs(float(x)) for x in gaps]
    if len(b) != len(g):
        raise ValueError(f"{len(b)} bounds against {len(g)} gaps")
    covered = sum(1 for bk, gk in zip(b, g) if gk <= bk)
    ratios = [gk / bk for bk, gk in zip(b, g) if bk > 0 and math.isfinite(bk)]
    return {"covered": covered, "K": len(g), "max_ratio": max(ratios) if ratios else math.nan}


def run_metrics(columns: Mapping[str, Sequence[float]], names: Sequence[str]) -> tuple[dict, dict]:
    """A run summary's ``(metrics, bound_bk_coverage)``: ``{estimate: evaluate(...) .as_dict()}``
    (hit tuples as lists) and :func:`bound_coverage` of ``gap`` by ``bound_bk``.
    """
    metrics = {name: m.as_dict() for name, m in evaluate_columns(columns, names).items()}
    for m in metrics.values():
        m["jc_hits"], m["s_hits"] = list(m["jc_hits"]), list(m["s_hits"])
    return metrics, bound_coverage(columns["gap"], columns["bound_bk"])
