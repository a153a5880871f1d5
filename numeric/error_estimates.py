"""A-posteriori error estimates of the protocol's loss-gap estimates, and certified winners.

Every estimate the protocol records (:mod:`crosscurv.numeric.estimates`) drops terms that the
paper's proofs bound with the constants ``G, L, rho`` of Assumption 1 (Lemma 3, Theorem 2, Theorem
3, appendix). Here each dropped term is bounded with quantities *measured along the run* instead of
the constants, giving one error column per estimate (``recursive_err``, ``cumulative_err``,
``jc_only_err``). Derivation and cost: ``docs/error_estimates.md``.

Measured quantities at iteration ``k`` (all Python floats, float64 arithmetic):

* ``lam_max_k``, ``lam_min_k``: the converged extreme eigenvalues of ``H_JC^k``
  (:func:`crosscurv.numeric.estimates.track_extremes`); ``Lambda_k = ||H_JC^k|| = max(|lam_max_k|,
  |lam_min_k|)`` and ``c_k = ||I - eta H_JC^k|| = max(|1 - eta lam_max_k|, |1 - eta lam_min_k|)``;
* ``G_k = ||g_JC^k||``, ``D_k = ||Delta^k||``;
* ``rho_hat``: the running maximum over ``j < k`` of the third-derivative scale seen by the
  gradient expansion (paper, eq. grad_diff_expansion, ``||w^j|| <= rho/2 ||Delta^j||^2``)::

      rho_j = 2 max(||g_S^j - g_JC^j - H_JC^j Delta^j|| - noise_j, 0) / D_j^2,

  ``noise_j = 8 eps (||g_S^j|| + ||g_JC^j|| + ||H_JC^j Delta^j||)`` (the gradients' round-off in the
  task's dtype);
* ``e_k = ||theta_S^{k+1} - theta_S^k + eta g_S^k - eta^2 u^k||``: the block scheme's own remainder
  ``eta^3 ||eps^k||`` of Lemma 1 at step ``k`` (paper, eq. traj_exact), measured exactly from the
  step the ``S`` run takes.

The step remainder of Lemma 3 (eq. traj_compact), ``s^k = Delta^{k+1} - (I - eta H_JC^k) Delta^k -
eta^2 u^k = -eta w^k + eta^3 eps^k``, with the measured ``w^k = g_S^k - g_JC^k - H_JC^k Delta^k``::

    sigma_k = eta ||w^k|| + e_k >= ||s^k||      (measured_step_remainder; the jc_only state,
                                                 which has no measured w, uses
                                                 eta rho_hat X^2 / 2 + e_k: step_remainder)

The bounds are a-posteriori *estimates*: ``rho_hat`` and ``Lambda`` are measured on the
trajectories, not suprema over a region, so a bound can fail where the loss's third derivative along
the next step exceeds everything seen before. Their calibration (share of iterations with
``|estimate - gap| <= err``) is measured, not assumed (``experiments/studies``).

Optimizer runs (momentum, Adam, block factors) propagate through a tangent step, not ``I - eta H``,
so the bounds above are not derived for them; their error columns are the defect interval's
symmetric bar (:func:`defect_error`), and their certificates ask that bar and the optimizer's own
edge of stability (:func:`crosscurv.numeric.optimizer_estimates.optimizer_in_regime`).

The bounds are orders of magnitude wider than the errors they bound. The *defect interval*
(:func:`defect_interval`) is the sharp alternative: from the realised signed defects ``gap^j -
estimate^j`` of the last :data:`DEFECT_WINDOW` iterations (the estimate's neglected terms, measured
once ``gap^j`` is), their range widened by :data:`DEFECT_FACTOR` times its width; a winner is
certified when the predicted interval excludes 0 and the run has never left the regime
(:func:`regime_so_far`). Derivation and measured calibration: ``docs/error_estimates.md``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

__all__ = [
    "step_remainder",
    "measured_step_remainder",
    "rho_sample",
    "recursive_error",
    "cumulative_error",
    "propagate_remainder",
    "forcing_difference",
    "jc_only_error",
    "certify",
    "in_regime",
    "ErrorState",
    "ERROR_FIELDS",
    "CERT_FIELDS",
    "DEFECT_FACTOR",
    "DEFECT_WINDOW",
    "defect_interval",
    "defect_calibration",
    "defect_record",
    "defect_error",
    "DefectState",
    "regime_so_far",
    "defect_certificates",
]

#: widening of the defect interval, in units of the window's spread of defects
#: (:func:`defect_interval`)
DEFECT_FACTOR = 1.0
#: iterations of realised defects the defect interval looks back over
DEFECT_WINDOW = 10

#: The error columns, one per estimate of :data:`crosscurv.numeric.records.ESTIMATES`.
ERROR_FIELDS = ("recursive_err", "cumulative_err", "jc_only_err")
#: The certified-winner columns: ``+1`` JC certified, ``-1`` ``S`` certified, ``0`` not certified.
CERT_FIELDS = ("recursive_cert", "cumulative_cert", "jc_only_cert")


def _safe(f):
    """``f`` returning ``inf`` instead of raising :class:`OverflowError` (a bound past float64's
    range)."""
    def wrapped(*args):
        try:
            return f(*args)
        except OverflowError:
            return math.inf
    wrapped.__doc__, wrapped.__name__ = f.__doc__, f.__name__
    return wrapped


@_safe
def step_remainder(lr: float, rho: float, D: float, e: float) -> float:
    """``sigma_k = eta rho D_k^2 / 2 + e_k`` (Lemma 3, eq. traj_compact: ``||s^k|| <= eta rho/2
    ||Delta^k||^2 + eta^3 C_eps``, with the measured ``e_k = eta^3 ||eps^k||``)."""
    return 0.5 * lr * rho * D * D + e


@_safe
def measured_step_remainder(lr: float, w_norm: float, e: float) -> float:
    """``sigma_k = eta ||w^k|| + e_k`` with the measured ``w^k = g_S^k - g_JC^k - H_JC^k Delta^k``
    (Lemma 3, eq. traj_compact: ``s^k = -eta w^k + eta^3 eps^k``): the step remainder the protocol
    uses, exact up to round-off; :func:`step_remainder` is its bound through ``rho``, which a loss
    with kinks (ReLU) makes useless (``||w|| = O(||Delta||)`` there, so ``2 ||w|| / ||Delta||^2``
    grows without bound)."""
    return lr * w_norm + e


def rho_sample(w_norm: float, noise: float, D: float) -> float:
    """``2 max(||w|| - noise, 0) / D^2`` (eq. grad_diff_expansion: ``||g_S - g_JC - H_JC Delta|| <=
    rho/2 D^2``); ``0`` when ``D = 0`` or a norm is not finite."""
    if not (D > 0 and math.isfinite(w_norm) and math.isfinite(D)):
        return 0.0
    return 2.0 * max(w_norm - noise, 0.0) / (D * D)


@_safe
def recursive_error(lr: float, rho: float, sigma: float, G_next: float, G: float, lam: float,
                    lam_next: float, A: float, d: float, P: float) -> float:
    """Error bound of Theorem 2's ``recursive^{k+1}`` (paper, proof of Theorem 2)::

        err = G_{k+1} sigma_k                                   (linear remainder g_JC^{k+1} . s^k)
            + Lambda_k d P / 2 + rho eta G_k A^2 / 2            (1/2 a.H^{k+1} a  vs  1/2 Delta.H^k
              Delta)
            + Lambda_{k+1} (A sigma_k + sigma_k^2 / 2)          (cross and square terms of s^k)
            + rho (A + sigma_k)^3 / 6                           (cubic Taylor remainder R_3^{k+1})

    with ``a = (I - eta H_JC^k) Delta^k + eta^2 u^k`` (the estimate's own vector), ``A = ||a||``,
    ``d = ||a - Delta^k||``, ``P = ||a + Delta^k||``: ``Delta^{k+1} = a + s^k``, ``|1/2 (a - Delta)
    H (a + Delta)| <= Lambda d P / 2`` and ``||H^{k+1} - H^k|| <= rho ||theta_JC^{k+1} -
    theta_JC^k|| = rho eta G_k``.
    """
    return (G_next * sigma + 0.5 * lam * d * P + 0.5 * rho * lr * G * A * A
            + lam_next * (A * sigma + 0.5 * sigma * sigma) + rho * (A + sigma) ** 3 / 6.0)


@_safe
def propagate_remainder(R: float, c: float, sigma: float) -> float:
    """``R_{k+1} = c_k R_k + sigma_k`` (``R_0 = 0``): bound of ``||Delta^k - z_k||``.

    ``Delta - z`` obeys ``r_{k+1} = (I - eta H_JC^k) r_k + s^k`` (Lemma 3 minus Theorem 3's state
    recursion, same forcing), and ``||I - eta H_JC^k|| = c_k`` from the converged extremes.
    """
    return c * R + sigma


@_safe
def _terminal(G: float, lam: float, X: float, R: float, rho: float) -> float:
    """``G R + Lambda (X R + R^2/2) + rho (X + R)^3 / 6``: the error of ``g.x + 1/2 x.H x`` against
    ``L(theta_JC + Delta) - L(theta_JC)`` when ``||Delta - x|| <= R``, ``||x|| = X`` (proof of
    Theorem 3)."""
    return G * R + lam * (X * R + 0.5 * R * R) + rho * (X + R) ** 3 / 6.0


def cumulative_error(G: float, lam: float, Z: float, R: float, rho: float) -> float:
    """Error bound of Theorem 3's ``cumulative^K = g_JC^K . z_K + 1/2 z_K . H_JC^K z_K``::

        err = G_K R_K + Lambda_K (||z_K|| R_K + R_K^2 / 2) + rho (||z_K|| + R_K)^3 / 6

    (the linear remainder ``g.r_K``, the quadratic difference ``z.H r + 1/2 r.H r`` and the cubic
    Taylor remainder, with ``||r_K|| <= R_K`` of :func:`propagate_remainder`).
    """
    return _terminal(G, lam, Z, R, rho)


@_safe
def forcing_difference(rho: float, lam: float, G: float, X: float, n_pairs: int) -> float:
    """Bound of ``||M_S(theta_S) g_S - M_S(theta_JC) g_JC||`` when ``||Delta|| <= X``::

        sqrt(|S|) [ rho X (G + Lambda X + rho X^2/2) + Lambda (Lambda X + rho X^2 / 2) ]

    ``||M_S|| <= sqrt(|S|) ||H||`` (a block mask of ``|S|`` blocks, each of norm at most ``||H||``),
    ``||M_S(theta_S) - M_S(theta_JC)|| <= sqrt(|S|) rho X``, ``||g_S - g_JC|| <= Lambda X + rho
    X^2/2``.
    """
    dg = lam * X + 0.5 * rho * X * X
    return math.sqrt(n_pairs) * (rho * X * (G + dg) + lam * dg)


def jc_only_error(G: float, lam: float, Y: float, E: float, rho: float) -> float:
    """Error bound of the JC-only estimate ``g_JC^K . y_K + 1/2 y_K . H_JC^K y_K``:
    :func:`cumulative_error`
    with ``y_K`` for ``z_K`` and ``E_K >= ||Delta^K - y_K||``, where::

        E_{k+1} = c_k E_k + eta^2 forcing_difference(rho, Lambda_k, G_k, ||y_k|| + E_k, |S|)
                  + eta rho (||y_k|| + E_k)^2 / 2 + e_k

    (``Delta - y`` obeys the recursion of ``Delta - z`` plus the forcing difference ``eta^2
    (M_S(theta_S) g_S - M_S(theta_JC) g_JC)``; ``||Delta^k|| <= ||y_k|| + E_k``).
    """
    return _terminal(G, lam, Y, E, rho)


def in_regime(lr: float, lam_max: float) -> bool:
    """``eta lambda_max(H_JC^k) < 2`` with the converged ``lambda_max`` (below the edge of
    stability).
    """
    return math.isfinite(lam_max) and lr * lam_max < 2.0


def certify(estimate: float, err: float, regime: bool) -> float:
    """The certified winner: ``+1`` (JC) or ``-1`` (``S``) when ``|estimate| > err`` and the run is
    in the regime (:func:`in_regime`), else ``0`` (not certified; also for NaN)."""
    if not regime or not (math.isfinite(estimate) and math.isfinite(err)) or abs(estimate) <= err:
        return 0.0
    return 1.0 if estimate > 0 else -1.0


@dataclass
class ErrorState:
    """The scalars the error estimates carry between iterations (resumable, :meth:`state_dict`).

    Attributes:
        rho: ``rho_hat`` over the samples so far (:func:`rho_sample`; the record of ``k`` is formed
            before iteration ``k``'s sample is folded in).
        R: bound of ``||Delta^k - z_k||``; ``E``: bound of ``||Delta^k - y_k||``. sigma:
        ``sigma_{k-1}`` (the last step's remainder bound). G, lam, A, d, P: ``G_{k-1}``,
        ``Lambda_{k-1}`` and the norms of ``recursive^k``'s vector ``a``
            (:func:`recursive_error`), from iteration ``k - 1``.
    """

    rho: float = 0.0
    R: float = 0.0
    E: float = 0.0
    sigma: float = 0.0
    G: float = 0.0
    lam: float = 0.0
    A: float = 0.0
    d: float = 0.0
    P: float = 0.0

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state_dict(cls, state) -> "ErrorState":
        return cls(**{k: float(v) for k, v in dict(state).items()})


def defect_interval(gaps, estimates, factor: float = DEFECT_FACTOR,
                    window: int = DEFECT_WINDOW) -> list:
    """The defect interval of an estimate at each iteration: where ``gap^k - estimate^k`` is
    expected, from the realised signed defects ``d_j = gap^j - estimate^j`` of the ``window``
    iterations before ``k``::

        s_k = max_j d_j - min_j d_j,     [lo_k, hi_k] = [min_j d_j - factor s_k,  max_j d_j + factor
        s_k]

    (``j = k - window .. k - 1``; ``(-inf, inf)`` until ``window`` finite defects exist). ``d_j`` is
    exactly the sum of the terms the estimate neglects at ``j`` (for the recursive estimate the
    remainder of Theorem 2's proof, ``O(eta^3)`` per step; for the cumulative ones the propagated
    remainder of Theorem 3's), known once ``gap^j`` is measured. Those terms are smooth functions of
    the iterates: below the edge of stability they drift by about their own spread over ``window``
    steps, and keep their sign, which a symmetric bar ``|d| <= err`` throws away (the cumulative
    estimate on ``mlp`` is a third of the gap, with the right sign, at every iteration). An
    *estimate*, not a bound: its calibration is measured (``docs/error_estimates.md``).

    Returns:
        ``K`` pairs ``(lo_k, hi_k)`` of Python floats.
    """
    if factor < 0 or window < 1:
        raise ValueError(f"factor must be >= 0 and window >= 1, got {factor}, {window}")
    d = [float(g) - float(e) for g, e in zip(gaps, estimates)]
    out = []
    for k in range(len(d)):
        past = [x for x in d[max(0, k - window):k] if math.isfinite(x)]
        if len(past) < window:
            out.append((-math.inf, math.inf))
            continue
        lo, hi = min(past), max(past)
        out.append((lo - factor * (hi - lo), hi + factor * (hi - lo)))
    return out


def regime_so_far(eta_sharpness) -> list:
    """``True`` at ``k`` while ``eta * sharpness_j < 2`` for every ``j <= k`` (finite): the run has
    never left the regime. Once past the edge, ``Delta`` (and the cumulative states) carry the
    amplification of ``prod_j (I - eta H_JC^j)``, so a later return below 2 does not bring the
    expansions back."""
    out, ok = [], True
    for x in eta_sharpness:
        ok = ok and math.isfinite(float(x)) and float(x) < 2.0
        out.append(ok)
    return out


def defect_record(past_defects, estimate: float, bound_err: float, inside: bool,
                  factor: float = DEFECT_FACTOR,
                  window: int = DEFECT_WINDOW) -> tuple[float, float, float]:
    """``(lo_k, hi_k, certificate)`` of one record from the signed defects of the iterations before
    it (``past_defects``, oldest first; the last ``window`` are used): :func:`defect_interval`'s
    interval, and the winner certified when ``inside`` (the run has never left the regime) and
    ``estimate + [lo, hi]`` excludes 0, or ``|estimate| > bound_err`` (NaN: no bound)."""
    past = [float(x) for x in list(past_defects)[-window:] if math.isfinite(float(x))]
    if len(past) < window:
        lo, hi = -math.inf, math.inf
    else:
        a, b = min(past), max(past)
        lo, hi = a - factor * (b - a), b + factor * (b - a)
    e = float(estimate)
    c = 0.0
    if inside and math.isfinite(e):
        if e + lo > 0:
            c = 1.0
        elif e + hi < 0:
            c = -1.0
        else:
            c = certify(e, float(bound_err), True)
    return lo, hi, c


def defect_error(lo: float, hi: float) -> float:
    """The symmetric error bar of a defect interval: ``max(|lo|, |hi|)``, so ``lo <= gap - estimate
    <= hi`` gives ``|gap - estimate| <= defect_error`` (``inf`` while the interval is unknown)."""
    return max(abs(float(lo)), abs(float(hi)))


def defect_certificates(gaps, estimates, eta_sharpness, bound_errs=None,
                        factor: float = DEFECT_FACTOR,
                        window: int = DEFECT_WINDOW) -> tuple[list, list]:
    """``(intervals, certificates)`` per iteration: :func:`defect_record` over a run's columns, with
    :func:`regime_so_far` as ``inside`` and ``bound_errs`` (the records' ``*_err``; ``None``: no
    bound)."""
    regime = regime_so_far(eta_sharpness)
    intervals, certs, past = [], [], []
    for k, (g, e, r) in enumerate(zip(gaps, estimates, regime)):
        b = math.nan if bound_errs is None else float(bound_errs[k])
        lo, hi, c = defect_record(past, e, b, r, factor, window)
        intervals.append((lo, hi))
        certs.append(c)
        past = (past + [float(g) - float(e)])[-window:]
    return intervals, certs


@dataclass
class DefectState:
    """What the defect interval carries between records of a run (resumable, :meth:`state_dict`):
    per
    estimate the signed defects ``gap^j - estimate^j`` of the last :data:`DEFECT_WINDOW` records,
    and whether every record so far was inside the regime.  :meth:`record` gives one record's ``(lo,
    hi, certificate)`` and then folds its defect in, so a run's records equal
    :func:`defect_certificates` of its columns."""

    defects: dict = field(default_factory=dict)
    inside: bool = True

    def record(self, name: str, gap: float, estimate: float, bound_err: float, in_regime_now: bool,
               window: int = DEFECT_WINDOW) -> tuple[float, float, float]:
        """``(lo, hi, certificate)`` of ``name`` at this record; call once per estimate, every
        estimate with the same ``in_regime_now`` (``eta * sharpness_k < 2``)."""
        self.inside = self.inside and bool(in_regime_now)
        past = self.defects.get(name, [])
        out = defect_record(past, estimate, bound_err, self.inside, DEFECT_FACTOR, window)
        self.defects[name] = (past + [float(gap) - float(estimate)])[-window:]
        return out

    def state_dict(self) -> dict:
        return {"defects": {k: list(v) for k, v in self.defects.items()}, "inside": self.inside}

    @classmethod
    def from_state_dict(cls, state) -> "DefectState":
        state = dict(state)
        return cls({k: [float(x) for x in v] for k, v in dict(state.get("defects", {})).items()},
                   bool(state.get("inside", True)))


def defect_calibration(gaps, estimates, intervals) -> float:
    """Share (percent) of iterations with ``lo_k <= gap^k - estimate^k <= hi_k`` (NaN without
    iterations)."""
    hits = [lo <= float(g) - float(e) <= hi for g, e, (lo, hi) in zip(gaps, estimates, intervals)]
    return 100.0 * sum(hits) / len(hits) if hits else math.nan
