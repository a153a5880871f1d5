"""Derive and verify the paper's expansions for one block model and one pattern.

:func:`derive` runs every symbolic check of ``theory`` and collects one boolean
per identity of the paper (keys ``lemma1``, ``theorem1``, ``corollary1``,
``order_invariance``, ``lemma3``, ``theorem2``, ``theorem3_quadratic``), the
checks that go beyond the paper (``extensions``), the explicit ``eta^3``
coefficient of ``L_S - L_JC``, the leading remainder terms of the recursions
and timings.  Every identity is an exact polynomial identity: coefficients are
canonical polynomials over QQ (:mod:`crosscurv.theory.block_model`), and the Theorem 1
gap is additionally re-checked as ``sympy.expand(difference) == 0``.

What each key checks (``g, H, T`` generic symbols at the common iterate):

* ``lemma1``: ``[eta^0] g~ = g`` and ``[eta^1] g~ = -M_S g`` for the pattern.
* ``theorem1``: ``[eta^1], [eta^2]`` of ``L_S^{k+1} - L^k`` and of ``L_JC^{k+1} - L^k``
  are ``-|g|^2`` and ``1/2 g^T H g (+ C_S)``, and ``L_S - L_JC = eta^2 C_S + O(eta^3)``
  (coefficients 0 and 1 vanish, coefficient 2 equals ``C_S = g^T M_S g``).
* ``corollary1``: for full GS in every block order (all ``N!`` orders for
  ``N <= 4``; identity, reverse and every rotation above), ``[eta^2](L_GS - L_JC)``
  equals ``C_cross / 2`` with ``C_cross = g^T (H - D) g``.
* ``order_invariance``: the same GS orders give identical ``L^{k+1}`` through
  ``eta^2`` (they differ at ``O(eta^3)`` only).
* ``lemma3`` / ``theorem2``: :mod:`crosscurv.theory.recursion`.
* ``theorem3_quadratic``: :mod:`crosscurv.theory.cumulative`, ``K = 1..4``.

Extensions: ``lemma1_next_term`` (``[eta^2] g~ = M_S^2 g + t``), ``eta3_closed_form`` (``[eta^3](L_S
- L_JC) = c_3``), ``loss_eta3_closed_form``, ``gs_orders_eta3_closed_form`` (``[eta^3](L_GS(o) -
L_GS(o')) = c_3(o) - c_3(o')``), ``lemma3_leading_closed_forms`` and ``theorem3_eta3_growth``.

Importing this module never imports torch.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

import sympy

from .block_model import BlockModel, ModelError
from .cumulative import check_cumulative, quadratic_model
from .one_step import (check_pattern, cross_curvature, delay_curvature, eta3_gap_closed_form,
                       lemma1_coefficients, loss_coefficients_closed_form, loss_series,
                       one_step_update)
from .patterns import DelayPattern, as_pattern, gauss_seidel, jacobi
from .recursion import check_recursions, recursion_model

__all__ = ["IDENTITY_KEYS", "EXTENSION_KEYS", "MAX_TOTAL_DIM", "DerivationResult", "derive",
           "gs_orders"]

#: one boolean per result of the paper, in this order
IDENTITY_KEYS = ("lemma1", "theorem1", "corollary1", "order_invariance", "lemma3", "theorem2",
                 "theorem3_quadratic")
#: checks beyond the paper
EXTENSION_KEYS = ("lemma1_next_term", "eta3_closed_form", "loss_eta3_closed_form",
                  "gs_orders_eta3_closed_form", "lemma3_leading_closed_forms",
                  "theorem3_eta3_growth")

ALLOWED_DIMS = (1, 2)
#: The largest total dimension ``d = N * D`` :func:`derive` accepts.  The
#: Lemma 3 / Theorem 2 check expands a fourth-order Taylor model whose
#: tensor ``Q`` alone has ``C(d + 3, 4)`` symbols, and its time grows about
#: threefold per added coordinate (docs/cli.md, "Size limit of crosscurv derive":
#: one to two minutes at ``d = 8`` on a loaded 2-core machine, ``d = 10`` not
#: done after four minutes).  ``crosscurv scaling`` and ``crosscurv run`` check
#: the same results numerically on models of any size.
MAX_TOTAL_DIM = 8
#: all block orders are checked up to this many blocks
ALL_ORDERS_MAX_BLOCKS = 4


def gs_orders(n_blocks: int) -> list[tuple[int, ...]]:
    """GS block orders checked: all ``N!`` for ``N <= 4``, else identity, reverse and rotations."""
    if n_blocks <= ALL_ORDERS_MAX_BLOCKS:
        return list(itertools.permutations(range(n_blocks)))
    ident = tuple(range(n_blocks))
    out = [ident[r:] + ident[:r] for r in range(n_blocks)]
    out.append(tuple(reversed(ident)))
    return out


def _monomial_label(exps: tuple, names=("eta", "eps")) -> str:
    parts = [n if k == 1 else f"{n}^{k}" for n, k in zip(names, exps) if k]
    return " ".join(parts) or "1"


@dataclass
class DerivationResult:
    """Everything :func:`derive` found: the ``pattern`` (and ``pattern_spec`` as given), the block
    model (``n_blocks``, ``dims``), ``{key: bool}`` for :data:`IDENTITY_KEYS` (``identities``) and
    :data:`EXTENSION_KEYS` (``extensions``), named SymPy ``expressions`` (``C_S``, ``C_cross``,
    ``eta3``, ``loss_1..3``, ...), the least-degree remainders of Lemma 3 and Theorem 2, one dict
    per ``K`` for Theorem 3, the GS orders checked and the pair compared at ``eta^3`` (1-based),
    ``failures``, ``timings`` and the ``symbols`` naming convention.
    """

    pattern: DelayPattern
    pattern_spec: str
    n_blocks: int
    dims: int
    identities: dict
    extensions: dict
    expressions: dict
    lemma3_leading: dict
    theorem2_leading: dict
    theorem3: list
    gs_orders_checked: int
    gs_order_pair: tuple
    failures: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    symbols: str = ""

    @property
    def ok(self) -> bool:
        """Every identity and every extension holds."""
        return all(self.identities.values()) and all(self.extensions.values())

    @property
    def eta3_coefficient(self) -> str:
        """``[eta^3](L_S^{k+1} - L_JC^{k+1})`` as a string (expanded polynomial)."""
        return str(self.expressions["eta3"])

    def to_dict(self) -> dict:
        """JSON-friendly record (expressions as strings)."""
        return {
            "pattern": self.pattern.to_dict(),
            "pattern_spec": self.pattern_spec,
            "n_blocks": self.n_blocks,
            "dims": self.dims,
            "ok": self.ok,
            "identities": dict(self.identities),
            "extensions": dict(self.extensions),
            "eta3_coefficient": self.eta3_coefficient,
            "eta3_closed_form": "-g^T (M_S + H) M_S g - 1/2 sum_i T[E_i g, P_i g, P_i g]",
            "C_S": str(self.expressions["C_S"]),
            "C_cross": str(self.expressions["C_cross"]),
            "gs_orders_eta3": {
                "orders": [",".join(str(b + 1) for b in o) for o in self.gs_order_pair],
                "coefficient": str(self.expressions["gs_orders_eta3"]),
            },
            "gs_orders_checked": self.gs_orders_checked,
            "lemma3_leading": {k: [str(e) for e in v] for k, v in self.lemma3_leading.items()},
            "theorem2_leading": {k: str(v) for k, v in self.theorem2_leading.items()},
            "theorem3": [
                {**{k: v for k, v in s.items() if k not in ("trajectory_eta3", "loss_eta3")},
                 "trajectory_eta3": [str(e) for e in s["trajectory_eta3"]],
                 "loss_eta3": str(s["loss_eta3"])}
                for s in self.theorem3
            ],
            "failures": list(self.failures),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }


def _validate(n_blocks, dims, max_dim: int | None = MAX_TOTAL_DIM) -> None:
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 2:
        raise ModelError(f"number of blocks (--blocks) must be an integer >= 2, got {n_blocks!r}")
    if dims not in ALLOWED_DIMS or isinstance(dims, bool):
        raise ModelError(f"block dimension (--dims) must be 1 or 2, got {dims!r}")
    if max_dim is not None and n_blocks * dims > max_dim:
        raise ModelError(
            f"--blocks {n_blocks} x --dims {dims} = {n_blocks * dims} coordinates is above the "
            f"symbolic limit of {max_dim}: the exact derivation's time grows about 3x per "
            f"coordinate (1-2 minutes at 8); crosscurv scaling and crosscurv run check the same "
            f"results numerically at any size"
        )


def derive(n_blocks: int = 3, dims: int = 1, pattern: DelayPattern | str = "gs", *, K_max: int = 4,
           max_dim: int | None = MAX_TOTAL_DIM, progress: Callable[[str, float], None]
           | None = None) -> DerivationResult:
    """Derive and check the paper's expansions for ``N`` blocks of dimension ``dims``.

    Args:
        n_blocks: ``N >= 2``.
        dims: block dimension, 1 or 2.
        pattern: a :class:`DelayPattern` over ``N`` blocks or CLI text
            (``jc``, ``gs``, ``gs:ORDER``, ``chain``, ``i<-j,...``; 1-based).
        K_max: horizons ``K = 1..K_max`` for Theorem 3.
        max_dim: the largest ``N * dims`` accepted (:data:`MAX_TOTAL_DIM`;
            ``None``: no limit, for those who will wait).
        progress: called as ``progress(stage, seconds)`` after each stage
            (``one_step``, ``corollary1_orders``, ``lemma3_theorem2``,
            ``theorem3``).

    Returns:
        :class:`DerivationResult`.

    Raises:
        ModelError: ``N < 2``, ``dims`` not in {1, 2}, or ``N * dims > max_dim``.
        PatternError: a malformed pattern.
    """
    _validate(n_blocks, dims, max_dim)
    stage_done = progress or (lambda stage, seconds: None)
    spec = pattern if isinstance(pattern, str) else pattern.name
    pattern = as_pattern(pattern, n_blocks)
    t_all = time.perf_counter()
    acc = _Checks()

    def stage(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(acc, *args)
        acc.timings[name] = time.perf_counter() - t0
        stage_done(name, acc.timings[name])
        return out

    model, pattern, L_jc = stage("one_step", _one_step_checks, n_blocks, dims, pattern)
    n_orders, order_pair = stage("corollary1_orders", _gs_order_checks, model, n_blocks, L_jc)
    lemma3_leading, theorem2_leading = stage("lemma3_theorem2", _recursion_checks, n_blocks, dims,
                                             pattern)
    theorem3 = stage("theorem3", _theorem3_checks, n_blocks, dims, pattern, K_max)
    acc.name_unexplained_failures()
    acc.timings["total"] = time.perf_counter() - t_all
    return DerivationResult(
        pattern=pattern,
        pattern_spec=spec,
        n_blocks=n_blocks,
        dims=dims,
        identities={k: bool(acc.ident[k]) for k in IDENTITY_KEYS},
        extensions={k: bool(acc.ext[k]) for k in EXTENSION_KEYS},
        expressions=acc.expr,
        lemma3_leading=lemma3_leading,
        theorem2_leading=theorem2_leading,
        theorem3=theorem3,
        gs_orders_checked=n_orders,
        gs_order_pair=order_pair,
        failures=acc.failures,
        timings=acc.timings,
        symbols=_symbol_note(model),
    )


@dataclass
class _Checks:
    """What the stages of :func:`derive` find: the paper's identities (``ident``), the checks beyond
    it (``ext``), the expressions of the report (``expr``), the failures in the order found and the
    seconds per stage."""

    ident: dict = field(default_factory=dict)
    ext: dict = field(default_factory=dict)
    expr: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)

    def name_unexplained_failures(self) -> None:
        """A failure line for every check that failed without one."""
        for key in IDENTITY_KEYS:
            if not self.ident[key] and not any(f.startswith(key + ":") for f in self.failures):
                self.failures.append(f"{key}: identity does not hold")
        for key in EXTENSION_KEYS:
            if not self.ext[key]:
                self.failures.append(f"{key}: closed form does not match the brute-force series")


def _one_step_checks(acc: _Checks, n_blocks: int, dims: int, pattern: DelayPattern):
    """One step from a common iterate: Lemma 1 (and its next term), Theorem 1 ``L_S - L_JC = eta^2
    C_S + O(eta^3)``, the closed forms of the loss to ``eta^3`` and of ``c_3``. Returns the block
    model, the pattern checked against it and the JC loss series."""
    ident, ext, expr = acc.ident, acc.ext, acc.expr
    model = BlockModel(n_blocks, dims, taylor_order=3)
    pattern = check_pattern(model, pattern)
    d = model.d
    step = one_step_update(model, pattern)
    l1 = lemma1_coefficients(model, pattern)
    ident["lemma1"] = all(step.fresh_gradient[a].coeff(k) == l1[k][a] for a in range(d)
                          for k in (0, 1))
    ext["lemma1_next_term"] = all(step.fresh_gradient[a].coeff(2) == l1[2][a] for a in range(d))
    expr["lemma1_1"] = [model.to_expr(x) for x in l1[1]]
    expr["lemma1_2"] = [model.to_expr(x) for x in l1[2]]

    L_s = model.loss(step.displacement)
    L_jc = loss_series(model, jacobi(n_blocks))
    c_s = delay_curvature(model, pattern)
    g2 = sum((x * x for x in model.g), model.zero)
    gHg = sum((model.g[a] * model.H[a][b] * model.g[b] for a in range(d) for b in range(d)),
              model.zero)
    half = model.const(sympy.Rational(1, 2))
    gap = L_s - L_jc
    diff_expr = sympy.expand(model.to_expr(gap.coeff(2)) - model.to_expr(c_s))
    ident["theorem1"] = (
        L_s.coeff(0) == 0 and L_jc.coeff(0) == 0
        and L_s.coeff(1) == -g2 and L_jc.coeff(1) == -g2
        and L_jc.coeff(2) == gHg * half and L_s.coeff(2) == gHg * half + c_s
        and gap.coeff(0) == 0 and gap.coeff(1) == 0 and gap.coeff(2) == c_s
        and diff_expr == 0
    )
    lcf = loss_coefficients_closed_form(model, pattern)
    ext["loss_eta3_closed_form"] = all(L_s.coeff(k) == lcf[k] for k in (1, 2, 3))
    c3 = eta3_gap_closed_form(model, pattern)
    ext["eta3_closed_form"] = gap.coeff(3) == c3
    expr["C_S"] = model.to_expr(c_s)
    expr["eta3"] = model.to_expr(gap.coeff(3))
    for k in (1, 2, 3):
        expr[f"loss_{k}"] = model.to_expr(L_s.coeff(k))
    return model, pattern, L_jc


def _gs_order_checks(acc: _Checks, model: BlockModel, n_blocks: int, L_jc):
    """Corollary 1 (``C_S = C_cross / 2`` for every GS order) and GS order invariance below
    ``eta^3``; the ``eta^3`` difference of two orders against its closed form. Returns how many
    orders were checked and the two orders compared at ``eta^3``."""
    half = model.const(sympy.Rational(1, 2))
    c_cross = cross_curvature(model)
    acc.expr["C_cross"] = model.to_expr(c_cross)
    orders = gs_orders(n_blocks)
    ref = None
    cor_ok, inv_ok = True, True
    series_by_order = {}
    for o in orders:
        gs = gauss_seidel(n_blocks, o)
        Lo = loss_series(model, gs)
        series_by_order[o] = Lo
        named = ",".join(str(b + 1) for b in o)
        if (Lo - L_jc).coeff(2) != c_cross * half or delay_curvature(model, gs) != c_cross * half:
            cor_ok = False
            acc.failures.append(f"corollary1: C_S != C_cross/2 for GS order {named}")
        if ref is None:
            ref = Lo
        elif any(Lo.coeff(k) != ref.coeff(k) for k in (0, 1, 2)):
            inv_ok = False
            acc.failures.append(f"order_invariance: GS order {named} differs below eta^3")
    acc.ident["corollary1"] = cor_ok
    acc.ident["order_invariance"] = inv_ok
    o1 = tuple(range(n_blocks))
    o2 = tuple(reversed(o1))
    diff3 = (series_by_order[o1] - series_by_order[o2]).coeff(3)
    closed3 = (eta3_gap_closed_form(model, gauss_seidel(n_blocks, o1))
               - eta3_gap_closed_form(model, gauss_seidel(n_blocks, o2)))
    acc.ext["gs_orders_eta3_closed_form"] = diff3 == closed3
    acc.expr["gs_orders_eta3"] = model.to_expr(diff3)
    return len(orders), (o1, o2)


def _recursion_checks(acc: _Checks, n_blocks: int, dims: int, pattern: DelayPattern):
    """Lemma 3 and Theorem 2 on the quartic model; returns their leading remainders by monomial."""
    rmodel = recursion_model(n_blocks, dims)
    rec = check_recursions(rmodel, pattern)
    acc.ident["lemma3"] = rec.lemma3
    acc.ident["theorem2"] = rec.theorem2
    acc.ext["lemma3_leading_closed_forms"] = all(rec.closed_forms.values())
    for name, offending in (("lemma3", rec.lemma3_offending), ("theorem2", rec.theorem2_offending)):
        if offending:
            acc.failures.append(f"{name}: forbidden remainder monomials "
                                + ", ".join(_monomial_label(e) for e in offending))
    lemma3_leading = {_monomial_label(e): [rmodel.to_expr(x) for x in v]
                      for e, v in rec.trajectory_leading.items()}
    theorem2_leading = {_monomial_label(e): rmodel.to_expr(v) for e, v in rec.loss_leading.items()}
    return lemma3_leading, theorem2_leading


def _theorem3_checks(acc: _Checks, n_blocks: int, dims: int, pattern: DelayPattern, K_max: int):
    """Theorem 3 on a quadratic objective for ``K = 1..K_max``: one row per ``K``."""
    qmodel = quadratic_model(n_blocks, dims)
    cum = check_cumulative(qmodel, pattern, K_max=K_max)
    acc.ident["theorem3_quadratic"] = cum.holds
    acc.ext["theorem3_eta3_growth"] = cum.growth_holds
    theorem3 = []
    for s in cum.steps:
        theorem3.append({
            "K": s.K,
            "trajectory_order": s.trajectory_order,
            "loss_order": s.loss_order,
            "trajectory_eta3": [qmodel.to_expr(x) for x in s.trajectory_eta3],
            "loss_eta3": qmodel.to_expr(s.loss_eta3),
            "holds": s.holds,
            "growth": s.growth_holds,
        })
        if not s.holds:
            acc.failures.append(f"theorem3_quadratic: remainder below eta^3 at K={s.K}")
    acc.expr["theorem3_degree"] = cum.degree
    return theorem3


def _symbol_note(model: BlockModel) -> str:
    ex = [model.g_symbols[0], model.H_symbols[(0, model.d - 1)], model.T_symbols.get((0, 0, model.d
                                                                                      - 1))]
    return ", ".join(str(s) for s in ex if s is not None)
