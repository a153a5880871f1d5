"""Formula-level diagnoses: which likely mistake in an estimate reproduces a user's disagreeing
column?

Each :class:`Variant` recomputes, from the scalar parts of a golden run's ``terms.csv`` alone, what
an implementation with one known mistake records (no torch). With ``Delta^k = theta_S^k -
theta_JC^k``, ``g^k``, ``H^k`` at ``theta_JC^k`` and ``z`` the state of Theorem 3, the reference
estimates of record ``k + 1`` are (Theorems 2, 3)::

    recursive  = g^{k+1} . (I - eta H^k) Delta^k + 1/2 Delta^k . H^k Delta^k
                 + eta^2 g^{k+1} . M_S g_S^k
    cumulative = g^K . z_K + 1/2 z_K . H^K z_K,  z_{k+1} = (I - eta H^k) z_k + eta^2 M_S g_S^k
    bound_bk   = G b_K + L/2 b_K^2,  b_K = eta^2 sum_j (1 + eta L)^{K-1-j} ||M_S g_S^j||

A variant *matches* a column when at every common iteration ``|theirs - variant| <= allowed + 1e-6
(|variant| + |reference|) + 1e-3 |variant - reference|``, and is considered only where at some
iteration ``|variant - reference| > 10 (allowed + 1e-6 (|variant| + |reference|))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

__all__ = ["Variant", "VARIANTS", "PRECISION", "TERM_COLUMNS", "PAIR_SETS", "PROPAGATIONS",
           "match_variants"]

#: The pair sets of the forcing ``M_X g``: the pattern ``S``, its transpose ``T``, all pairs
#: ``i != j``.
PAIR_SETS = ("S", "T", "all")
#: The propagations of ``z``: with each pair set, block-diagonal (``diag``), none.
PROPAGATIONS = PAIR_SETS + ("diag", "none")
#: Columns of a golden run's ``terms.csv`` after ``k``, in order
#: (:mod:`crosscurv.experiments.conformance.golden_terms` defines them).
TERM_COLUMNS = (
    ("rec_prop", "rec_lin", "rec_quad")
    + tuple(f"rec_fresh_{x}" for x in PAIR_SETS)
    + ("rec_prop_now", "rec_quad_now")
    + tuple(f"cum_{p}_{v}" for v in PROPAGATIONS for p in ("lin", "quad"))
    + tuple(f"jco_{p}_{v}" for v in PROPAGATIONS for p in ("lin", "quad"))
    + tuple(f"bnd_{p}_{x}" for x in PAIR_SETS for p in ("G", "L"))
)

#: Relative agreement below which a difference counts as precision, not as a formula.
PRECISION = 1e-6


@dataclass(frozen=True)
class Variant:
    """One likely mistake: ``name``, ``mistake`` (what the implementation does), ``formula`` (the
    paper's formula it departs from) and ``columns`` (``{column: f(terms row) -> value recorded}``).
    """

    name: str
    mistake: str
    formula: str
    columns: Mapping[str, Callable[[Mapping], float]]


def _rec(
    fresh: str = "rec_fresh_S",
    prop: str = "rec_prop",
    quad: str | None = "rec_quad",
    f: float = 1.0,
):
    return lambda t: t[prop] + (t[quad] if quad else 0.0) + f * t[fresh]


def _pair(est: str, v: str, f: float = 1.0, quad: bool = True):
    return lambda t: f * t[f"{est}_lin_{v}"] + (f * f * t[f"{est}_quad_{v}"] if quad else 0.0)


def _bound(x: str, f: float = 1.0):
    return lambda t: f * t[f"bnd_G_{x}"] + f * f * t[f"bnd_L_{x}"]


_THM2 = ("Theorem 2: Delta L^{k+1} = g_JC^{k+1}.(I - eta H_JC^k) Delta theta^k + 1/2 Delta "
         "theta^k.H_JC^k Delta theta^k + eta^2 g_JC^{k+1}.M_S g_S^k")
_THM3 = ("Theorem 3: z_{k+1} = (I - eta H_JC^k) z_k + eta^2 M_S^k g_S^k, z_0 = 0; "
         "Delta L^K = g_JC^K.z_K + 1/2 z_K.H_JC^K z_K")
_MS = "(M_S v)_i = sum_{j in S(i)} H_ij v_j, C_S = sum_{(i,j) in S} c_ij (Theorem 1)"


def _freshness(f: float) -> Variant:
    word = "eta^2/2" if f == 0.5 else "2 eta^2"
    return Variant(
        f"freshness_x{f:g}",
        f"the freshness terms are scaled by {f:g} ({word} M_S g_S in place of eta^2 M_S g_S)",
        "Theorem 1: L_S - L_JC = eta^2 C_S (the eta^2/2 of Corollary 1 multiplies C_cross = 2 "
        "sum_{i<j} c_ij); " + _THM2,
        {
            "recursive": _rec(f=f),
            "cumulative": _pair("cum", "S", f),
            "jc_only": _pair("jco", "S", f),
            "bound_bk": _bound("S", f),
        },
    )


#: The mistakes recognised, in the order they are tried.
VARIANTS: tuple = (
    Variant(
        "delta_after_step",
        "recursive uses the difference of the wrong iteration: Delta theta^{k+1} "
        "(after the step) where Theorem 2 has Delta theta^k",
        _THM2,
        {"recursive": _rec(prop="rec_prop_now", quad="rec_quad_now")},
    ),
    Variant(
        "recursive_no_contraction",
        "recursive propagates Delta theta^k without the -eta H_JC^k Delta theta^k term",
        _THM2,
        {"recursive": _rec(prop="rec_lin")},
    ),
    Variant(
        "recursive_no_quadratic",
        "recursive leaves out the quadratic term 1/2 Delta theta^k.H_JC^k Delta theta^k",
        _THM2,
        {"recursive": _rec(quad=None)},
    ),
    Variant(
        "no_cross_block_propagation",
        "z is propagated with the block diagonal D_JC^k of the Hessian "
        "((I - eta D_JC^k) z_k: no cross-block terms)",
        _THM3,
        {"cumulative": _pair("cum", "diag"), "jc_only": _pair("jco", "diag")},
    ),
    Variant(
        "no_propagation",
        "z is not propagated (z_K = eta^2 sum_j M_S g_S^j: Phi = I)",
        _THM3,
        {"cumulative": _pair("cum", "none"), "jc_only": _pair("jco", "none")},
    ),
    Variant(
        "no_quadratic",
        "the estimates leave out the quadratic term 1/2 z_K.H_JC^K z_K",
        _THM3,
        {"cumulative": _pair("cum", "S", quad=False), "jc_only": _pair("jco", "S", quad=False)},
    ),
    Variant(
        "transposed_pairs",
        "M_S is built over the transposed pairs (j, i) of S (block i reads H_ji)",
        _MS,
        {
            "recursive": _rec("rec_fresh_T"),
            "cumulative": _pair("cum", "T"),
            "jc_only": _pair("jco", "T"),
            "bound_bk": _bound("T"),
        },
    ),
    Variant(
        "all_pairs",
        "M_S is built over all pairs i != j (C_cross, the full GS sum, whatever S is)",
        _MS,
        {
            "recursive": _rec("rec_fresh_all"),
            "cumulative": _pair("cum", "all"),
            "jc_only": _pair("jco", "all"),
            "bound_bk": _bound("all"),
        },
    ),
    _freshness(0.5),
    _freshness(2.0),
)


def _scaled(x: float) -> float:
    return abs(x) if math.isfinite(x) else 0.0


def match_variants(
    theirs: Sequence[float],
    reference: Sequence[float],
    terms: Sequence[Mapping],
    column: str,
    allowed: Sequence[float],
) -> list:
    """The :data:`VARIANTS` that reproduce ``theirs`` for ``column`` at the common iterations
    (module docstring), given the reference's values, the aligned ``terms`` rows and the
    comparison's ``allowed`` difference at each.
    """
    out = []
    for var in VARIANTS:
        f = var.columns.get(column)
        if f is None:
            continue
        try:
            vals = [float(f(t)) for t in terms]
        except KeyError:
            continue
        slack = [
            a + PRECISION * (_scaled(v) + _scaled(r)) for a, v, r in zip(allowed, vals, reference)
        ]
        if not any(abs(v - r) > 10 * s for v, r, s in zip(vals, reference, slack)):
            continue  # not distinguishable from the reference on this run
        if all(
            math.isfinite(t) and abs(t - v) <= s + 1e-3 * abs(v - r)
            for t, v, r, s in zip(theirs, vals, reference, slack)
        ):
            out.append(var)
    return out
