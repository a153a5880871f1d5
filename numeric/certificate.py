"""The certified winner: one rule for ``crosscurv run``'s records and for ``crosscurv advise``.

Every prediction of a loss gap ``P_S^k ~ L_S^k - L_JC^k`` the suite makes (Theorems 2-3 and the
JC-only estimate) keeps the terms up to a given order and drops the rest. The certificate compares
the predictions of the candidates (JC's is 0) with an error bar made of the size of the *first
dropped order*, ``N_S^k``, measured along the run, times a safety factor ``F`` (:data:`SAFETY`) that
the certificates study sets::

    err_S^k = F N_S^k,
    b = argmin_S P_S^k,
    T^k = {S : P_S^k - err_S^k <= P_b^k + err_b^k}           (the candidates not separated from b),

and the winner is *certified* at ``k`` when the run has stayed inside the expansions' regime so far
(below) and either ``T^k = {b}`` or ``T^k`` holds full GS orders only (Corollary 1: they tie at
``O(eta^2)``, so the certificate then says "a sequential order, which one is within the error", and
names ``b``).

The first dropped order ``N_S^k`` (what the error bounds; docs/error_estimates.md):

* advise, the JC-only prediction: the largest of its error ``error_S^j`` over the last
  :data:`REMAINDER_WINDOW` iterations ``j <= k`` (the larger of the embedded pair ``|corrected_S^j -
  estimate_S^j|``, the same prediction forced at the approximate ``S`` point ``theta_JC + yhat``,
  completed by the local errors of its forcing, measured by exact scheme steps along the run and
  carried: :mod:`crosscurv.numeric.advice`) and,
  while ``k <= REMAINDER_WINDOW``, of the measured error of the certified prediction itself at the
  first step, ``|L_S^1 - L_JC^1 - estimate_S^1|`` (the one-step check at ``theta^0`` measures
  ``L_S^1 - L_JC^1`` exactly: :func:`first_step_orders`, :func:`advice_next_orders`); ``inf`` at
  every ``k`` where that first step is not described by the expansion (both kept orders of
  Theorem 1 and Lemma 1 miss it by more than they keep:
  :func:`crosscurv.numeric.certificate.first_step_remainders`);
* records, ``recursive``: the largest of the last :data:`RECORD_WINDOW` measured one-step
  remainders ``r_j = |gap^j - recursive^j|``, ``j < k`` (at least :data:`REMAINDER_WINDOW` of
  them), times their last growth ``max(1, r_{k-1} / r_{k-2})`` (one more step of it).  Theorem 2's
  remainder is ``O(eta^3)`` per step and smooth in ``j`` only where the loss is smooth along the
  step; a non-monotone sequence (a ReLU kink crossed, the curvature changing fast near the edge)
  is bounded by its recent maximum, not by its last values, hence a look-back longer than the
  growth's.  ``N = inf`` (withdrawn) while a remainder of the look-back exceeds the gap it
  corrects, ``r_j > max(|gap^j|, |gap^{j-1}|)``, or while the record's own predicted change does,
  ``|recursive^k - gap^{k-1}| > max(|gap^{k-1}|, |gap^{k-2}|)``: the dropped order is then larger
  than what the expansion keeps, which has no asymptotic meaning (a candidate's run diverging);
  for a plain gradient scheme also at the record after a step that raised either run's loss
  (:func:`rose`: that run has left the regime the JC run's sharpness measures);
* records, ``cumulative``: ``|recursive^k - cumulative^k| + N_recursive^k`` (the linearised state
  ``z_k`` against the measured ``Delta^{k-1}`` one step back, the propagated remainder of Theorem
  3's proof, plus the error of the estimate it is measured against: triangle inequality);
* records, ``jc_only``: ``|cumulative^k - jc_only^k| + N_cumulative^k``, the first term the embedded
  pair's difference with the *measured* ``S`` point (Theorem 3's state forced by ``M_S(theta_S)
  g_S`` against ``M_S(theta_JC) g_JC``).

Two floors under every ``N`` (:func:`rounding_floor`, :func:`edge_amplification`):

* a certificate never separates differences below the rounding of a measured loss difference: a
  record's ``N`` is at least its own ``gap_err``, an advised candidate's at least
  :func:`rounding_floor` of ``L_JC^k`` (JC's prediction, exactly 0, has none): below it no
  measurement on the machine can tell the candidates apart;
* advise's ``N`` is multiplied by :func:`edge_amplification` of ``eta * sharpness_k``: above 1 the
  top mode of ``I - eta H`` flips sign with factor ``|1 - eta lambda|`` and a local error injected
  into it adds up over the run to ``1 / (2 - eta lambda)`` times its size, which the embedded pair,
  a local estimate, does not carry.

The regime (what withdraws every certificate from ``k`` on): ``eta * sharpness_j >= 2`` at some ``j
<= k`` (:func:`crosscurv.numeric.error_estimates.regime_so_far`), or a non-finite prediction or
``N``. All values are Python floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .error_estimates import in_regime
from .records import ESTIMATES
from .rounding import difference_error

__all__ = [
    "SAFETY",
    "rounding_floor",
    "edge_amplification",
    "REMAINDER_WINDOW",
    "RECORD_WINDOW",
    "Verdict",
    "certify_best",
    "certify_gap",
    "advice_next_orders",
    "first_step_orders",
    "record_next_orders",
    "CertificateState",
    "rose",
    "record_certificates",
]

#: the safety factor ``F`` on the first dropped order: the smallest of the study's factors with
#: every problem of the zoo, beyond it and of the fresh rounds then run at 99.9% precision or more,
#: then tested on a fresh round defined before (reports/certificates.md, "The safety factor")
SAFETY = 1.5
#: measured one-step remainders the recursive estimate's ``N`` looks back over
REMAINDER_WINDOW = 3
#: measured one-step remainders the records' ``N`` looks back over (chosen on the zoo's tuning half:
#: the smallest of 3, 5, 8, 12, 20 with every tuning problem and rate at 99.9% precision or more;
#: reports/certificates.md)
RECORD_WINDOW = 3


def rounding_floor(loss: float, dtype) -> float:
    """The rounding of a measured loss difference at ``L = loss``: ``DIFFERENCE_ULPS`` ulps of
    ``|L|`` in ``dtype`` (:func:`crosscurv.numeric.rounding.difference_error`), the records' own
    ``gap_err`` where the plain difference is kept; ``inf`` for a non-finite loss."""
    return difference_error(loss, loss, dtype)


def edge_amplification(eta_sharpness: float) -> float:
    """``1 / (2 - x)`` for ``1 < x = eta * sharpness < 2``: the sum ``sum_j |1 - x|^j`` over the
    steps of the top mode's propagation, how much a local error in it adds up to; 1 for ``x <= 1``
    (or NaN), ``inf`` at or beyond the edge ``x >= 2``."""
    x = float(eta_sharpness)
    if not x > 1.0:
        return 1.0
    return 1.0 / (2.0 - x) if x < 2.0 else math.inf


class Verdict(dict):
    """``{"best", "tied", "certified"}``: ``best`` the lowest prediction (ties: the first), ``tied``
    the candidates not separated from it (``T^k``, ``best`` first), ``certified`` a bool."""


def certify_best(
    predictions: Mapping[str, float],
    next_orders: Mapping[str, float],
    inside: bool,
    gs_orders: Sequence[str] = (),
    factor: float = SAFETY,
) -> Verdict:
    """The certified best candidate at one ``k`` (module docstring).

    Args:
        predictions: ``{candidate: P_S^k}`` (JC: 0), in the candidates' order. next_orders:
        ``{candidate: N_S^k >= 0}`` (JC: 0); NaN or ``inf``: nothing is certified. inside: the run
        has stayed inside the regime up to ``k``. gs_orders: the full GS orders among the candidates
        (they may be certified as a set). factor: ``F``.
    """
    names = list(predictions)
    best = min(
        names, key=lambda n: (not math.isfinite(predictions[n]), predictions[n], names.index(n))
    )
    ok = inside and all(
        math.isfinite(predictions[n]) and math.isfinite(next_orders[n]) for n in names
    )
    if not ok:
        return Verdict(best=best, tied=list(names), certified=False)
    top = predictions[best] + factor * next_orders[best]
    tied = [best] + [
        n for n in names if n != best and predictions[n] - factor * next_orders[n] <= top
    ]
    certified = len(tied) == 1 or all(n in gs_orders for n in tied)
    return Verdict(best=best, tied=tied, certified=bool(certified and len(tied) < len(names)))


def certify_gap(
    prediction: float, next_order: float, inside: bool, factor: float = SAFETY
) -> float:
    """The record's certified winner of ``L_S - L_JC``: ``+1`` JC, ``-1`` the scheme ``S``, ``0``
    not certified (:func:`certify_best` over ``{JC: 0, S: prediction}``)."""
    v = certify_best(
        {"jc": 0.0, "s": float(prediction)},
        {"jc": 0.0, "s": float(next_order)},
        inside,
        factor=factor,
    )
    if not v["certified"]:
        return 0.0
    return 1.0 if v["best"] == "jc" else -1.0


def first_step_remainders(checks: Sequence[Mapping]) -> dict:
    """``{candidate: |L_S^1 - L_JC^1 - eta^2 C_S|}`` from the one-step check at ``theta^0`` (``{}``
    without a check); ``inf`` where the step could not be measured (a non-finite measurement: the
    loss raised outside its domain, or overflowed) and where the expansion does not describe the
    measured step,

        min(|m - p_2|, |m - p_3|) > max(|p_2|, |p_3|, floor)

    (``m`` the measured ``L_S^1 - L_JC^1``, ``p_2 = eta^2 C_S``, ``p_3`` with Lemma 1's ``eta^3``
    term, ``floor`` the steps' rounding): what both kept orders leave out is larger than what they
    keep (the measured differences are made of something else, e.g. the rounding of float32
    iterates), which withdraws the advice's certificate at every ``k``
    (:func:`crosscurv.numeric.certificate.advice_next_orders`)."""
    out = {}
    for chk in checks:
        for n, c in (chk or {}).items():
            m, p2 = c["measured"], c["eta2"]
            if not math.isfinite(m):  # the step could not be measured (outside the loss's domain)
                out[n] = math.inf
                continue
            p3, floor = c.get("eta3", p2), c.get("floor", 0.0)
            dropped = min(abs(m - p2), abs(m - p3))
            r = math.inf if dropped > max(abs(p2), abs(p3), floor) else abs(m - p2)
            out[n] = max(out.get(n, 0.0), r)
    return out


def first_step_orders(
    checks: Sequence[Mapping], first_predictions: Mapping[str, float]
) -> dict:
    """``{candidate: |m_S - P_S^1|}``: the measured error of the prediction advise certifies,
    ``P_S^1`` (its ``estimate`` at ``k = 1``), against the exact first-step gap ``m_S = L_S^1 -
    L_JC^1`` of the one-step check at ``theta^0`` (``checks``: its ``{candidate: {"measured",
    "eta2", "eta3", "floor"}}``); ``inf`` where neither kept order of Theorem 1 / Lemma 1 describes
    that step (:func:`crosscurv.numeric.certificate.first_step_remainders`: the whole run's advice
    is withdrawn, as where the step could not be measured); ``{}`` without a check."""
    withdrawn = first_step_remainders(checks)
    out = {}
    for chk in checks:
        for n, c in (chk or {}).items():
            m, p = float(c["measured"]), float(first_predictions.get(n, math.nan))
            r = math.inf if math.isinf(withdrawn.get(n, 0.0)) else abs(m - p)
            out[n] = max(out.get(n, 0.0), r)
    return out


def advice_next_orders(
    recent_errors: Sequence[Mapping[str, float]],
    first_step: Mapping[str, float],
    k: int,
    window: int = REMAINDER_WINDOW,
    floor: float = 0.0,
    amplification: float = 1.0,
    exact: Sequence[str] = (),
) -> dict:
    """``{candidate: N_S^k}`` of advise at iteration ``k``: the largest embedded error of the last
    ``window`` iterations (``recent_errors``, oldest first, ``k``'s last: a signed difference has
    accidental zeros), for ``k <= window`` the measured error of the prediction at the first step
    (``first_step``: :func:`first_step_orders`; Lemma 1's third-derivative term included, which the
    embedded pair leaves out) and the loss's rounding ``floor`` (:func:`rounding_floor`), times
    ``amplification`` (:func:`edge_amplification`); an ``inf`` first step (the expansion does not
    describe it) at every ``k``; ``exact``: candidates whose prediction is exact (JC), 0. A NaN
    error gives NaN (not certified)."""
    last = list(recent_errors)[-window:]
    out = {}
    for n in last[-1]:
        if n in exact:
            out[n] = 0.0
            continue
        first = float(first_step.get(n, 0.0))
        vals = [float(e[n]) for e in last] + ([first] if k <= window or math.isinf(first) else [])
        vals.append(float(floor))
        out[n] = math.nan if any(math.isnan(v) for v in vals) else max(vals) * amplification
    return out


def record_next_orders(
    record: Mapping,
    past_remainders: Sequence[float],
    window: int = RECORD_WINDOW,
    past_gaps: Sequence[float] = (),
) -> dict:
    """``{estimate: N^k}`` of one record (module docstring); ``past_remainders``: ``|gap^j -
    recursive^j|`` of the records before ``k``, oldest first (``inf`` until
    :data:`REMAINDER_WINDOW` of them exist); ``past_gaps``: their ``gap^j``, aligned with
    ``past_remainders`` at the end, with one more record before them where it exists."""
    rems = [float(x) for x in past_remainders]
    past = rems[-window:]
    enough = len(rems) >= REMAINDER_WINDOW and all(math.isfinite(x) for x in past)
    rec_n = max(past) if enough else math.inf
    rec_n = max(rec_n, float(record.get("gap_err", 0.0)))  # the measurement's own rounding
    if math.isfinite(rec_n) and past[-2] > 0:  # one more step of the remainders' last growth
        rec_n *= max(1.0, past[-1] / past[-2])
    gaps = [abs(float(g)) for g in past_gaps]
    for j in range(1, min(len(past), len(gaps) - 1) + 1):  # the dropped order beyond the kept
        if past[-j] > max(gaps[-j], gaps[-j - 1]):
            rec_n = math.inf
    # this record's predicted change beyond the gap it changes (a candidate's run blowing up)
    if len(gaps) >= 2 and abs(float(record["recursive"]) - float(past_gaps[-1])) > max(gaps[-2:]):
        rec_n = math.inf
    cum_n = abs(float(record["recursive"]) - float(record["cumulative"])) + rec_n
    return {
        "recursive": rec_n,
        "cumulative": cum_n,
        "jc_only": abs(float(record["cumulative"]) - float(record["jc_only"])) + cum_n,
    }


@dataclass
class CertificateState:
    """What the records' certificates carry between records (resumable, :meth:`state_dict`): the
    measured one-step remainders ``|gap^j - recursive^j|`` of the last :data:`RECORD_WINDOW`
    records, their gaps (one more), and whether every record so far was inside the regime."""

    remainders: list = field(default_factory=list)
    inside: bool = True
    gaps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    rose: bool = False

    def record(
        self,
        record: Mapping,
        in_regime_now: bool,
        factor: float = SAFETY,
        window: int = RECORD_WINDOW,
        withdraw: bool = True,
        losses: Sequence[float] | None = None,
        dtype=None,
    ) -> dict:
        """``{estimate: certificate}`` of this record (``gap``, ``recursive``, ``cumulative``,
        ``jc_only``), then its remainder folded in; ``in_regime_now``: below the edge of stability
        at this record; ``withdraw``: a remainder beyond its gap withdraws (the module's rule);
        ``losses``: this record's ``(L_JC, L_S)`` in ``dtype`` for a plain gradient scheme (a loss
        that rose at the step before this record's withdraws its certificates: :func:`rose`;
        ``None``: not checked, as for an optimizer's runs)."""
        self.inside = self.inside and bool(in_regime_now)
        nxt = record_next_orders(record, self.remainders, window, self.gaps if withdraw else ())
        inside = self.inside and not self.rose
        out = {e: certify_gap(record[e], nxt[e], inside, factor) for e in ESTIMATES}
        rem = abs(float(record["gap"]) - float(record["recursive"]))
        # at least REMAINDER_WINDOW remainders must be known: keep that many even if window < it
        keep = max(window, REMAINDER_WINDOW)
        self.remainders = (self.remainders + [rem])[-keep:]
        self.gaps = (self.gaps + [float(record["gap"])])[-(keep + 1):]
        now = [float(x) for x in losses] if losses is not None else []
        self.rose = bool(now and self.losses and rose(self.losses, now, dtype))
        self.losses = now
        return out

    def state_dict(self) -> dict:
        return {"remainders": list(self.remainders), "inside": self.inside, "gaps": list(self.gaps),
                "losses": list(self.losses), "rose": self.rose}

    @classmethod
    def from_state_dict(cls, state) -> "CertificateState":
        state = dict(state or {})
        return cls(
            [float(x) for x in state.get("remainders", [])],
            bool(state.get("inside", True)),
            [float(x) for x in state.get("gaps", [])],
            [float(x) for x in state.get("losses", [])],
            bool(state.get("rose", False)),
        )


def rose(before: Sequence[float], after: Sequence[float], dtype) -> bool:
    """Whether JC's or the scheme's loss rose over one step beyond the rounding of the difference:
    ``before``, ``after``: ``(L_JC, L_S)`` of two consecutive records in ``dtype``; ``L^k >
    L^{k-1} + difference_error(L^k, L^{k-1})`` (:func:`crosscurv.numeric.rounding.
    difference_error`).

    Inside the expansions' regime a step of JC or of a GS order lowers its loss: each group of
    blocks it updates together takes a gradient step from the current point on its own
    sub-problem, ``L(theta - eta g_B) - L(theta) = -eta |g_B|^2 + eta^2/2 g_B . H_BB g_B +
    O(eta^3) < 0`` while ``eta * lambda_max < 2`` (``H_BB``'s eigenvalues lie within ``H``'s). A
    rise means the run the step belongs to has left that regime (its own sharpness beyond ``2 /
    eta``, which the JC run's does not measure, or terms beyond the expansion dominate): the next
    record is not certified. Withdrawing costs coverage only, so other delay patterns use it too;
    a run with momentum or adaptive steps rises inside its regime, so optimizer runs do not."""
    return any(b > a + difference_error(b, a, dtype) for a, b in zip(before, after))


def record_certificates(
    columns: Mapping[str, Sequence[float]],
    lr: float,
    factor: float = SAFETY,
    window: int = RECORD_WINDOW,
    withdraw: bool = True,
    dtype=None,
) -> dict:
    """``{estimate: [certificate per record]}`` of a plain run's columns (``gap``, the three
    estimates, ``sharpness`` and, where present, ``lambda_max``, ``gap_err``, ``loss_jc`` and
    ``loss_s``): what its ``*_cert`` columns hold (:class:`CertificateState` record by record,
    inside the regime while ``eta * max(lambda_max, sharpness) < 2``); ``dtype``: the losses'
    (``None``: a rising loss is not checked)."""
    n = len(columns["gap"])
    lam = columns.get("lambda_max", [math.nan] * n)
    state, out = CertificateState(), {e: [] for e in ESTIMATES}
    for i in range(n):
        top = max(
            (x for x in (float(columns["sharpness"][i]), float(lam[i])) if math.isfinite(x)),
            default=math.nan,
        )
        losses = None
        if dtype is not None and "loss_jc" in columns and "loss_s" in columns:
            losses = (columns["loss_jc"][i], columns["loss_s"][i])
        certs = state.record(
            {c: columns[c][i] for c in ("gap",) + ESTIMATES + ("gap_err",) if c in columns},
            in_regime(lr, top),
            factor,
            window,
            withdraw,
            losses,
            dtype,
        )
        for e in ESTIMATES:
            out[e].append(certs[e])
    return out
