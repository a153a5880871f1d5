"""One-step comparison for a block-separable optimizer (Theorem 1 generalized; beyond the paper).

From a common iterate and optimizer state, block ``i`` moves by ``-eta f_i phi_i(g_i, s_i)``
(``phi`` smooth in the gradient, block-diagonal Jacobian ``J_phi``, ``F`` the factors):

    L_S^{k+1} - L_JC^{k+1} = eta^2 C_S^phi + O(eta^3),
    C_S^phi = g^T F J_phi M_S F phi = sum_{(i,j) in S} f_i f_j (J_i^T g_i)^T H_ij phi_j,

since ``g~ = g - eta M_S F phi + O(eta^2)``. Instances, each checked against the brute-force series:
``phi = g`` (``C_S^F = g^T F M_S F g``; the paper's ``C_S`` for ``F = I``), a fixed preconditioner
(``C_S^P = g^T F P M_S F P g``), heavy ball (``C_S^beta = g^T F M_S F (g + beta m)``) and Adam
(``J`` diagonal, on a separate SymPy path, :func:`check_adam_one_step`). The ``eta^3`` coefficient
is reported as computed. Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .._linalg import dot as _dot
from ..one_step import check_pattern, eta_space, masked_hessian_apply, one_step_update
from ..patterns import DelayPattern, jacobi, parse_pattern
from ..series import ETA, TruncatedSeries
from .adam import adam_direction, adam_jacobian
from .model import OptimizerModel, optimizer_model

__all__ = ["OptimizerOneStepCheck", "optimizer_gap_series", "optimizer_delay_curvature",
           "instance_delay_curvature", "check_optimizer_one_step", "AdamOneStepCheck",
           "check_adam_one_step"]


def optimizer_gap_series(opt: OptimizerModel, pattern: DelayPattern,
                         degree: int = 3) -> TruncatedSeries:
    """``L_S^{k+1} - L_JC^{k+1}`` with the optimizer ``opt`` (brute-force series in ``eta``)."""
    model = opt.model
    pattern = check_pattern(model, pattern)
    space = eta_space(model, degree)
    step_s = one_step_update(model, pattern, space, direction=opt.direction, factors=opt.factors)
    step_j = one_step_update(model, jacobi(model.n_blocks), space, direction=opt.direction,
                             factors=opt.factors)
    return model.loss(step_s.displacement, space) - model.loss(step_j.displacement, space)


def optimizer_delay_curvature(opt: OptimizerModel, pattern: DelayPattern):
    """``C_S^phi = g^T F J_phi M_S F phi`` (the generic closed form)."""
    model = opt.model
    pattern = check_pattern(model, pattern)
    w = opt.scale(opt.phi())                       # F phi
    y = masked_hessian_apply(model, pattern, w)    # M_S F phi
    u = opt.effective(y)                           # F J_phi M_S F phi
    return _dot(model.g, u) + model.zero


def instance_delay_curvature(opt: OptimizerModel, pattern: DelayPattern):
    """The instance's explicit formula (module docstring), written without ``J_phi``.

    ``sgd``: ``sum_{(i,j) in S} f_i f_j g_i^T H_ij g_j``; ``preconditioner``: ``(F P)^T g`` against
    ``M_S F P g``; ``momentum``: ``g^T F M_S F (g + beta m)``; ``generic``: ``(F J)^T g`` against
    ``M_S F p``.
    """
    model = opt.model
    pattern = check_pattern(model, pattern)
    g, f, d = model.g, opt.factors, model.d
    bo = model.block_of
    if opt.kind == "sgd":
        acc = model.zero
        for i, j in pattern.pairs:
            for a in model.blocks[i]:
                for b in model.blocks[j]:
                    acc = acc + f[i] * f[j] * g[a] * model.H[a][b] * g[b]
        return acc
    if opt.kind == "momentum":
        v = [f[bo[b]] * (g[b] + opt.beta * opt.buffer[b]) for b in range(d)]
        mv = masked_hessian_apply(model, pattern, v)
        return sum((g[a] * f[bo[a]] * mv[a] for a in range(d)), model.zero)
    mat = opt.P if opt.kind == "preconditioner" else opt.J
    right = ([sum((mat[(b, c)] * g[c] for c in model.blocks[bo[b]]), model.zero) for b in range(d)]
             if opt.kind == "preconditioner" else list(opt.p))
    right = [f[bo[b]] * right[b] for b in range(d)]
    left = [f[bo[b]] * sum((mat[(a, b)] * g[a] for a in model.blocks[bo[b]]), model.zero)
            for b in range(d)]
    return _dot(left, masked_hessian_apply(model, pattern, right)) + model.zero


@dataclass
class OptimizerOneStepCheck:
    """The generalized Theorem 1 for one optimizer and pattern: the ``gap`` ``L_S - L_JC`` (series
    through ``eta^3``), the closed form ``C_S = g^T F J_phi M_S F phi``, and whether ``[eta^0]``,
    ``[eta^1]`` vanish (``low_orders_vanish``), ``[eta^2] == C_S`` (``eta2_closed_form``),
    ``[eta^2]`` equals the instance's formula (``eta2_instance``) and ``C_S^phi`` is the paper's
    ``g^T M_S g`` with ``f_i = 1``, ``beta = 0``, ``P = I`` (``reduces_to_paper``).
    """

    kind: str
    pattern: DelayPattern
    gap: TruncatedSeries
    C_S: object
    low_orders_vanish: bool
    eta2_closed_form: bool
    eta2_instance: bool
    reduces_to_paper: bool

    @property
    def holds(self) -> bool:
        return (self.low_orders_vanish and self.eta2_closed_form and self.eta2_instance
                and self.reduces_to_paper)


def _paper_substitution(opt: OptimizerModel) -> dict:
    """Symbols -> values that turn the optimizer into plain SGD with one step size."""
    model = opt.model
    sub = {}
    for name, sym in model.extra_symbols.items():
        if name.startswith("f") or name == "beta":
            sub[sym] = 1 if name.startswith("f") else 0
        elif name.startswith("P_") or name.startswith("J_"):
            _, a, b = name.split("_")
            sub[sym] = 1 if a == b else 0
    return sub


def check_optimizer_one_step(kind: str, n_blocks: int = 3, dims: int = 1, pattern: DelayPattern
                             | str = "gs",
                             step_factors: bool = True) -> OptimizerOneStepCheck:
    """Check the generalized Theorem 1 for ``kind`` exactly (cubic Taylor model, series through
    ``eta^3``)."""
    opt = optimizer_model(n_blocks, dims, kind, step_factors=step_factors)
    model = opt.model
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, n_blocks)
    pattern = check_pattern(model, pattern)
    gap = optimizer_gap_series(opt, pattern)
    c_s = optimizer_delay_curvature(opt, pattern)
    inst = instance_delay_curvature(opt, pattern)
    paper = sum((model.g[a] * y for a, y in enumerate(masked_hessian_apply(model, pattern,
                                                                           model.g))), model.zero)
    sub = _paper_substitution(opt)
    c_s_plain = sympy.expand(model.to_expr(c_s).subs(sub))
    if kind == "generic":  # phi(g) = g as well: p -> g
        c_s_plain = sympy.expand(c_s_plain.subs({p: gg for p, gg in zip(model.vector_symbols["p"],
                                                                        model.g_symbols)}))
    return OptimizerOneStepCheck(
        kind=kind,
        pattern=pattern,
        gap=gap,
        C_S=c_s,
        low_orders_vanish=gap.coeff(0) == 0 and gap.coeff(1) == 0,
        eta2_closed_form=gap.coeff(2) == c_s,
        eta2_instance=gap.coeff(2) == inst,
        reduces_to_paper=sympy.expand(c_s_plain - model.to_expr(paper)) == 0,
    )


# -- Adam: plain SymPy, derivatives in eta at eta = 0 ------------------------
@dataclass
class AdamOneStepCheck:
    """The generalized Theorem 1 for Adam (blocks of dimension 1): ``eta1`` (must be 0), ``eta2``
    from the exact Adam steps, ``C_S = sum_{(i,j) in S} f_i f_j J_i g_i H_ij phi_j``,
    ``jacobian_matches`` (``adam_jacobian`` is ``d phi / d gamma`` of ``adam_direction``) and
    ``holds`` (all three, exactly).
    """

    pattern: DelayPattern
    eta1: sympy.Expr
    eta2: sympy.Expr
    C_S: sympy.Expr
    jacobian_matches: bool
    holds: bool


def check_adam_one_step(n_blocks: int = 2, pattern: DelayPattern | str = "gs") -> AdamOneStepCheck:
    """Exact check of ``L_S - L_JC = eta^2 C_S^Adam + O(eta^3)`` for ``N`` one-dimensional
    blocks on the cubic Taylor model, each block with its own moments ``m_i``, ``v_i > 0`` and
    factor
    ``f_i``; a block's direction at ``g_i + e`` is expanded to ``e^2`` with SymPy's derivatives of
    :func:`adam_direction` (exact through ``eta^3`` since ``e = O(eta)`` enters times ``eta``).
    """
    from ..block_model import BlockModel

    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, n_blocks)
    model = BlockModel(n_blocks, 1, taylor_order=3)
    pattern = check_pattern(model, pattern)
    n = n_blocks
    eta = ETA
    xs = sympy.symbols(f"x0:{n}", real=True)
    L = model.loss_expr
    grads = [sympy.diff(L, x) for x in xs]
    b1, b2 = sympy.symbols("beta1 beta2", positive=True)
    eps, c1, c2 = sympy.symbols("epsilon_adam c1 c2", positive=True)
    ms = sympy.symbols(f"m1:{n + 1}", real=True)
    vs = sympy.symbols(f"v1:{n + 1}", positive=True)
    fs = sympy.symbols(f"f1:{n + 1}", positive=True)
    gam = sympy.Symbol("gamma", real=True)
    P0 = sympy.symbols(f"phi0_1:{n + 1}")
    P1 = sympy.symbols(f"phi1_1:{n + 1}")
    P2 = sympy.symbols(f"phi2_1:{n + 1}")
    g = model.g_symbols

    def trunc(expr, deg=3):
        poly = sympy.Poly(sympy.expand(expr), eta)
        return sum((c * eta**k for (k,), c in poly.terms() if k <= deg), sympy.S.Zero)

    def step(pat):
        disp = [None] * n
        for i in pat.order():
            state = {xs[j]: (disp[j] if j in pat.fresh(i) else 0) for j in range(n)}
            e = trunc(grads[i].subs(state, simultaneous=True) - g[i], 2)
            disp[i] = trunc(-eta * fs[i] * (P0[i] + P1[i] * e + P2[i] * e**2 / 2))
        return disp

    def loss_at(disp):
        return L.subs(dict(zip(xs, disp)), simultaneous=True)

    gap = sympy.Poly(trunc(loss_at(step(pattern)) - loss_at(step(jacobi(n)))), eta)
    coeff = {k: c for (k,), c in gap.terms()}
    phi = [adam_direction(g[i], ms[i], vs[i], b1, b2, eps, c1, c2) for i in range(n)]
    dphi = [sympy.diff(adam_direction(gam, ms[i], vs[i], b1, b2, eps, c1, c2), gam) for i in range(
        n)]
    values = {}
    for i in range(n):
        values[P0[i]] = phi[i]
        values[P1[i]] = dphi[i].subs(gam, g[i])
    d1 = sympy.simplify(coeff.get(1, sympy.S.Zero).subs(values))
    d2 = coeff.get(2, sympy.S.Zero).subs(values)
    H = [[model.H_symbols[tuple(sorted((a, b)))] for b in range(n)] for a in range(n)]
    c_s = sympy.S.Zero
    for i, j in pattern.pairs:
        J_i = adam_jacobian(g[i], ms[i], vs[i], b1, b2, eps, c1, c2)
        c_s += fs[i] * fs[j] * J_i * g[i] * H[i][j] * phi[j]
    jac_ok = sympy.simplify(dphi[0] - adam_jacobian(gam, ms[0], vs[0], b1, b2, eps, c1, c2)) == 0
    diff2 = sympy.simplify(d2 - c_s)
    return AdamOneStepCheck(pattern, d1, d2, c_s, bool(jac_ok), bool(d1 == 0 and diff2 == 0
                                                                     and jac_ok))
