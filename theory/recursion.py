"""Lemma 3 (trajectory recursion) and Theorem 2 (loss recursion), checked exactly.

Everything is expanded around ``theta_JC^k`` (the model's origin); the other trajectory sits at
``theta_S^k = eps * delta`` with a symbolic ``delta``, so ``||Delta theta^k|| = O(eta)`` becomes a
second small parameter ``eps``. ``theta_JC^{k+1} = -eta g``, ``theta_S^{k+1}`` is the exact ``S``
step started at ``eps delta``; ``M_S``, ``g_S`` at ``theta_S^k``, ``H_JC^k = H``.

Lemma 3 (eq. traj_evolution): every monomial ``eta^a eps^b`` of

    r = Delta theta^{k+1} - [(I - eta H) Delta theta^k + eta^2 M_S g_S^k]

has ``a >= 1, b >= 2`` or ``a >= 3``. Theorem 2 (eq. loss_evolution): every monomial of

    R = Delta L^{k+1} - [g_JC^{k+1 T} (I - eta H) Delta theta^k
        + 1/2 Delta theta^{k T} H Delta theta^k + eta^2 g_JC^{k+1 T} M_S g_S^k]

has total degree ``a + b >= 3``. With the quartic Taylor model and monomials of total degree ``<=
4`` kept, every kept coefficient is exact for any smooth loss (a derivative of order ``>= 5`` enters
at degree ``>= 5``); at ``a = 0`` both remainders are Taylor remainders of order 3. Importing this
module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .block_model import BlockModel, ModelError
from ._linalg import dot as _dot
from .one_step import check_pattern, fresh_cubic_term, masked_hessian_apply, one_step_update
from .patterns import DelayPattern
from .series import EPS, ETA, SeriesSpace, TruncatedSeries

__all__ = ["RecursionCheck", "recursion_space", "recursion_model", "check_recursions",
           "lemma3_allowed", "theorem2_allowed"]

#: total-degree truncation used for Lemma 3 / Theorem 2 (see module docstring)
RECURSION_DEGREE = 4


def lemma3_allowed(a: int, b: int) -> bool:
    """Lemma 3: a remainder monomial ``eta^a eps^b`` is allowed iff ``a >= 1, b >= 2`` or ``a >=
    3``.
    """
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

    ``trajectory_remainder``: ``d`` series in ``(eta, eps)`` (Lemma 3's ``r``); ``loss_remainder``:
    Theorem 2's ``R``; ``lemma3``/``theorem2``: every monomial allowed, else the forbidden ones in
    ``*_offending``; ``*_leading``: the monomials of least total degree, ``{(a, b):
    coefficient(s)}``.
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
    """The Lemma 3 / Theorem 2 remainders, exact to total degree ``degree`` in ``(eta, eps)``, and
    their monomials checked.

    ``model`` is a :func:`recursion_model`. ``freshness_at``: ``"S"`` (the paper: ``M_S`` and
    ``g_S`` at ``theta_S^k``) or ``"JC"`` (both at ``theta_JC^k``: the forcing differs by ``eta^2
    eps (...)``, so Lemma 3's structural claim fails while Theorem 2's holds). ``closed_forms`` of
    the result: ``trajectory_eta_eps2`` (the ``eta eps^2`` coefficient of ``r`` is ``-1/2 T[delta,
    delta]``) and ``trajectory_eta3`` (the ``eta^3`` coefficient is ``-(M_S^2 g + t)``).
    """
    pattern = check_pattern(model, pattern)
    if model.taylor_order < 4 or "delta" not in model.vectors:
        raise ModelError("the recursion checks need recursion_model(): Taylor order 4 and a "
                         "'delta' vector")
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
    wanted = [(a, b) for a in range(d) for b in pattern.fresh_items(model.block_of[a],
                                                                    model.blocks)]
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
    tdd = [sum((model.T(a, b, c) * delta[b] * delta[c] for b in range(d) for c in range(d)),
               model.zero) * half
           for a in range(d)]
    mg = masked_hessian_apply(model, pattern, model.g)
    mmg = masked_hessian_apply(model, pattern, mg)
    t = fresh_cubic_term(model, pattern)
    closed = {
        "trajectory_eta_eps2": all(traj_rem[a].coeff(1, 2) == -tdd[a] for a in range(d)),
        "trajectory_eta3": all(traj_rem[a].coeff(3, 0) == -(mmg[a] + t[a]) for a in range(d)),
    }
    loss_leading = {e: loss_rem.coeff(*e) for e in loss_rem.monomials() if sum(e)
                    == loss_rem.min_degree()}
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

