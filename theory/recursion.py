"""Lemma 3 (trajectory recursion) and Theorem 2 (loss recursion), checked exactly.

Setting.  Expand everything around ``theta_JC^k`` (the model's origin: ``g``,
``H``, ``T``, ``Q`` are ``g_JC^k``, ``H_JC^k``, ...).  The other trajectory sits at
``theta_S^k = eps * delta`` with a symbolic direction ``delta``, so the paper's
``||Delta theta^k|| = O(eta)`` becomes a second small parameter ``eps``.  Then,
exactly through the Taylor model:

* ``theta_JC^{k+1} = -eta g`` and ``theta_S^{k+1} = eps delta + (exact S step
  started at eps delta)`` (:func:`crosscurv.theory.one_step.one_step_update` with ``base``);
* ``g_S^k = grad L(eps delta)`` and ``M_S`` built from the Hessian blocks at
  ``theta_S^k = eps delta``; ``H_JC^k = H``; ``g_JC^{k+1} = grad L(-eta g)``
  (as in the paper: ``M_S, g_S`` at ``theta_S``, ``H_JC`` at ``theta_JC``).

Lemma 3 (eq. traj_evolution) -- remainder

    r = Delta theta^{k+1} - [(I - eta H) Delta theta^k + eta^2 M_S g_S^k].

Claim checked: every monomial ``eta^a eps^b`` of ``r`` has ``a >= 1, b >= 2``
(the ``eta ||Delta theta||^2`` part) or ``a >= 3`` (the ``eta^3`` part).

Theorem 2 (eq. loss_evolution) -- remainder

    R = Delta L^{k+1} - [g_JC^{k+1 T} (I - eta H) Delta theta^k
        + 1/2 Delta theta^{k T} H Delta theta^k + eta^2 g_JC^{k+1 T} M_S g_S^k].

Claim checked: every monomial has total degree ``a + b >= 3``.

Why the truncation is enough.  We use the *quartic* Taylor model and keep
monomials of total degree ``a + b <= 4``.  Every displacement is ``O(eta + eps)``,
so a derivative of order ``m >= 5`` would enter the loss at total degree
``>= 5`` and gradients / Hessian-vector terms -- which the recursions multiply
by at least one more power of ``eta`` or ``eps`` (``-eta g~``, ``eta^2 M_S g_S``,
``Delta theta`` itself) -- again at degree ``>= 5``.  Hence every kept coefficient
(degree ``<= 4``) is exact for *any* smooth loss, not just for the polynomial
model.  The monomials the claims forbid are ``a = 0`` (any ``b``), and
``(a, b)`` in ``{(1,0), (1,1), (2,0), (2,1)}`` for Lemma 3, and total degree
``<= 2`` for Theorem 2: all of degree ``<= 3`` except ``a = 0, b >= 4``.  At
``eta = 0`` both steps are the identity, so ``r`` and ``R`` restricted to
``a = 0`` are ``eps delta - eps delta = 0`` and ``L(eps delta) - L(0) -
[g^T eps delta + 1/2 eps^2 delta^T H delta]`` = the Taylor remainder of order 3,
which is degree ``>= 3`` for every ``b``; the check covers ``b <= 4`` explicitly.
The degree-3 coefficients (the *leading* remainder terms) are exact and
reported; the cubic model alone would already make them exact, the fourth
order makes the degree-4 coefficients exact as well.

Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .block_model import BlockModel, ModelError
from ._linalg import dot as _dot
from .one_step import (
    check_pattern,
    fresh_cubic_term,
    masked_hessian_apply,
    one_step_update,
)
from .patterns import DelayPattern
from .series import EPS, ETA, SeriesSpace, TruncatedSeries

__all__ = ["RecursionCheck", "recursion_space", "recursion_model", "check_recursions",
           "lemma3_allowed", "theorem2_allowed"]

#: total-degree truncation used for Lemma 3 / Theorem 2 (see module docstring)
RECURSION_DEGREE = 4


def lemma3_allowed(a: int, b: int) -> bool:
    """Lemma 3: a remainder monomial ``eta^a eps^b`` is allowed iff ``a >= 1, b >= 2`` or ``a >= 3``."""
    return (a >= 1 and b >= 2) or a >= 3


def theorem2_allowed(a: int, b: int) -> bool:
    """Theorem 2: a remainder monomial ``eta^a eps^b`` is allowed iff ``a + b >= 3``."""
    return a + b >= 3


def recursion_model(n_blocks: int, dims=1) -> BlockModel:
    """Quartic Taylor model with the extra direction vector ``delta``."""
    return BlockModel(n_blocks, dims, taylor_order=4, vectors=("delta",))


def recursion_space(model: BlockModel, degree: int = RECURSION_DEGREE) -> SeriesSpace:
    """Series in ``(eta, eps)`` truncated at total degree ``degree``."""
    return SeriesSpace((ETA, EPS), degree, model.zero)


@dataclass
class RecursionCheck:
    """Exact remainders of the trajectory and loss recursions.

    Attributes:
        pattern: the delay pattern.
        trajectory_remainder: ``d`` series in ``(eta, eps)`` (Lemma 3's ``r``).
        loss_remainder: series in ``(eta, eps)`` (Theorem 2's ``R``).
        lemma3: every monomial of ``r`` allowed by :func:`lemma3_allowed`.
        theorem2: every monomial of ``R`` allowed by :func:`theorem2_allowed`.
        lemma3_offending / theorem2_offending: forbidden monomials found.
        trajectory_leading: ``{(a, b): [d ring elements]}``, the monomials of
            ``r`` of least total degree.
        loss_leading: ``{(a, b): ring element}``, same for ``R``.
        closed_forms: named exact checks of the leading terms (see
            :func:`check_recursions`).
        degree: the truncation degree.
    """

    pattern: DelayPattern
    trajectory_remainder: list
    loss_remainder: TruncatedSeries
    lemma3: bool
    theorem2: bool
    lemma3_offending: list
    theorem2_offending: list
    trajectory_leading: dict
    loss_leading: dict
    closed_forms: dict = field(default_factory=dict)
    degree: int = RECURSION_DEGREE


def _leading(series_list: list) -> dict:
    degs = [s.min_degree() for s in series_list if not s.is_zero]
    if not degs:
        return {}
    low = min(degs)
    monos = sorted({e for s in series_list for e in s.terms if sum(e) == low})
    return {e: [s.coeff(*e) for s in series_list] for e in monos}


def check_recursions(model: BlockModel, pattern: DelayPattern, degree: int = RECURSION_DEGREE,
                     freshness_at: str = "S") -> RecursionCheck:
    """Compute the Lemma 3 / Theorem 2 remainders exactly and check their monomials.

    Args:
        model: a :func:`recursion_model` (Taylor order 4, vector ``delta``).
        pattern: acyclic delay pattern.
        degree: total-degree truncation in ``(eta, eps)`` (default 4; see the
            module docstring for why 4 makes every kept coefficient exact).
        freshness_at: ``"S"`` (the paper: ``M_S`` and ``g_S`` at ``theta_S^k``)
            or ``"JC"`` (both at ``theta_JC^k``, the replacement the proof of
            Lemma 3 remarks on).  With ``"JC"`` the forcing differs by
            ``eta^2 eps (...)``, an ``O(eta^2 ||Delta theta||)`` term that is
            ``O(eta^3)`` only through Lemma 2 -- so the monomial ``eta^2 eps``
            appears and the structural claim of Lemma 3 fails, while Theorem 2's
            total-degree claim still holds.

    Returns:
        :class:`RecursionCheck`.  ``closed_forms`` holds, as booleans:
        ``trajectory_eta_eps2`` (coefficient of ``eta eps^2`` in ``r`` is
        ``-1/2 T[delta, delta]``) and ``trajectory_eta3`` (coefficient of
        ``eta^3`` in ``r`` is ``-(M_S^2 g + t)``, Lemma 1's next term).
    """
    pattern = check_pattern(model, pattern)
    if model.taylor_order < 4 or "delta" not in model.vectors:
        raise ModelError("the recursion checks need recursion_model(): Taylor order 4 and a 'delta' vector")
    space = recursion_space(model, degree)
    d = model.d
    eta = space.variable(0)
    eps = space.variable(1)
    delta = model.vectors["delta"]

    dtheta0 = [eps * delta[a] for a in range(d)]                      # Delta theta^k = theta_S^k
    step = one_step_update(model, pattern, space, base=dtheta0)
    theta_s1 = [dtheta0[a] + step.displacement[a] for a in range(d)]
    theta_j1 = [eta * (-model.g[a]) for a in range(d)]                 # exact JC step from 0
    dtheta1 = [theta_s1[a] - theta_j1[a] for a in range(d)]

    if freshness_at not in ("S", "JC"):
        raise ModelError(f"freshness_at must be 'S' or 'JC', got {freshness_at!r}")
    at = dtheta0 if freshness_at == "S" else [space.zero_series() for _ in range(d)]
    g_s = model.gradient(at, space=space)                              # g_S^k
    wanted = [(a, b) for a in range(d) for b in pattern.fresh_items(model.block_of[a], model.blocks)]
    h_s = model.hessian(at, entries=wanted, space=space)               # blocks of M_S at theta_S
    mg_s = masked_hessian_apply(model, pattern, [g_s[a] for a in range(d)], H=h_s)
    mg_s = [x if isinstance(x, TruncatedSeries) else space.constant(x) for x in mg_s]

    h_dtheta0 = [_dot(model.H[a], dtheta0) for a in range(d)]        # H_JC^k Delta theta^k
    propagated = [dtheta0[a] - eta * h_dtheta0[a] for a in range(d)]  # (I - eta H) Delta theta^k
    forcing = [(eta * eta) * mg_s[a] for a in range(d)]
    traj_rem = [dtheta1[a] - propagated[a] - forcing[a] for a in range(d)]

    loss_s1 = model.loss(theta_s1, space)
    loss_j1 = model.loss(theta_j1, space)
    g_j1 = model.gradient(theta_j1, space=space)                       # g_JC^{k+1}
    g_j1 = [g_j1[a] for a in range(d)]
    prediction = (_dot(g_j1, propagated)
                  + _dot(dtheta0, h_dtheta0) * model.const(sympy.Rational(1, 2))
                  + _dot(g_j1, forcing))
    loss_rem = (loss_s1 - loss_j1) - prediction

    l3_bad = sorted({e for s in traj_rem for e in s.terms if not lemma3_allowed(*e)})
    t2_bad = sorted(e for e in loss_rem.terms if not theorem2_allowed(*e))

    # closed forms of Lemma 3's leading terms
    half = model.const(sympy.Rational(1, 2))
    tdd = [sum((model.T(a, b, c) * delta[b] * delta[c] for b in range(d) for c in range(d)), model.zero) * half
           for a in range(d)]
    mg = masked_hessian_apply(model, pattern, model.g)
    mmg = masked_hessian_apply(model, pattern, mg)
    t = fresh_cubic_term(model, pattern)
    closed = {
        "trajectory_eta_eps2": all(traj_rem[a].coeff(1, 2) == -tdd[a] for a in range(d)),
        "trajectory_eta3": all(traj_rem[a].coeff(3, 0) == -(mmg[a] + t[a]) for a in range(d)),
    }
    loss_leading = {e: loss_rem.coeff(*e) for e in loss_rem.monomials() if sum(e) == loss_rem.min_degree()}
    return RecursionCheck(
        pattern=pattern,
        trajectory_remainder=traj_rem,
        loss_remainder=loss_rem,
        lemma3=not l3_bad,
        theorem2=not t2_bad,
        lemma3_offending=l3_bad,
        theorem2_offending=t2_bad,
        trajectory_leading=_leading(traj_rem),
        loss_leading=loss_leading,
        closed_forms=closed,
        degree=degree,
    )

