"""One exact step of an acyclic delay pattern, its expansions and closed forms.

Paper, Lemma 1, Theorem 1, Corollary 1, and one order further.  From ``theta^k`` (the model's
origin) block ``i`` evaluates its gradient where exactly the blocks ``j in S(i)`` hold their new
values and moves by ``-eta`` times that fresh gradient; through the Taylor model of
:mod:`crosscurv.theory.block_model` every quantity is a truncated power series in ``eta``.  With
``M_S`` keeping the Hessian blocks ``H_ij``, ``(i, j) in S``, ``P_i g`` the blocks ``j in S(i)`` of
``g``, ``E_i g`` block ``i`` and ``t_i = 1/2 T_i[P_i g, P_i g]``:

* Lemma 1: ``g~_i = g_i - eta (M_S g)_i + eta^2 [(M_S^2 g)_i + t_i] + O(eta^3)``;
* Theorem 1: ``L_S^{k+1} - L^k = -eta |g|^2 + eta^2 (1/2 g^T H g + C_S) + eta^3 l_3 + O(eta^4)``,
  ``C_S = g^T M_S g``, ``l_3 = -g^T M_S^2 g - g^T t - g^T H M_S g - 1/6 T[g, g, g]``;
* the gap ``L_S - L_JC = eta^2 C_S + eta^3 c_3 + O(eta^4)``,
  ``c_3 = -g^T (M_S + H) M_S g - 1/2 sum_i T[E_i g, P_i g, P_i g]``;
* Corollary 1: for full GS in any order ``C_S = C_cross / 2``, ``C_cross = g^T (H - D) g``.

The cubic Taylor model makes every coefficient up to ``eta^3`` exact for any smooth loss.
:func:`gap_coefficients` and :func:`loss_coefficients` evaluate the closed forms on numbers
(float64, mpmath or SymPy).  Importing this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import sympy

from ._linalg import dot as _dot, mul as _mul
from .block_model import BlockModel, ModelError
from .errors import CoefficientInputError
from .patterns import DelayPattern, PatternError, as_pattern
from .series import ETA, SeriesSpace, TruncatedSeries

__all__ = ["CoefficientInputError", "OneStepUpdate", "eta_space", "one_step_update", "loss_series",
           "masked_hessian_apply", "delay_curvature", "cross_curvature", "fresh_cubic_term",
           "lemma1_coefficients", "loss_coefficients_closed_form", "eta3_gap_closed_form",
           "gap_coefficients", "loss_coefficients"]


# -- the exact step ---------------------------------------------------------
def eta_space(model: BlockModel, degree: int = 3) -> SeriesSpace:
    """Series in ``eta`` up to ``eta^degree`` with coefficients in ``model.ring``."""
    return SeriesSpace((ETA,), degree, model.zero)


def check_pattern(model: BlockModel, pattern: DelayPattern | str) -> DelayPattern:
    """``pattern`` (or its spec) as a :class:`DelayPattern` over ``model.n_blocks`` blocks."""
    return as_pattern(pattern, model.n_blocks)


def _check_order(pattern: DelayPattern, order: Sequence[int] | None) -> tuple[int, ...]:
    if order is None:
        return pattern.order()
    order = tuple(int(b) for b in order)
    if sorted(order) != list(range(pattern.n_blocks)):
        raise PatternError(f"update order must be a permutation of 1..{pattern.n_blocks}, got "
                           f"{[b + 1 for b in order]}")
    pos = {b: r for r, b in enumerate(order)}
    bad = sorted((i, j) for i, j in pattern.pairs if pos[j] > pos[i])
    if bad:
        raise PatternError("update order processes a fresh block after its user: "
                           + ", ".join(f"{i + 1}<-{j + 1}" for i, j in bad))
    return order


@dataclass
class OneStepUpdate:
    """The exact one-step update of a pattern, as series in ``eta``.

    Attributes:
        pattern: the delay pattern.
        order: the update order used (0-based).
        fresh_gradient: ``d`` series, ``g~_a`` (the gradient each block used).
        displacement: ``d`` series, ``theta^{k+1} - theta^k = -eta g~``.
        base: the state the step started from (``None``: the expansion point).
    """

    pattern: DelayPattern
    order: tuple
    fresh_gradient: list
    displacement: list
    base: list | None = None


def one_step_update(model: BlockModel, pattern: DelayPattern, space: SeriesSpace | None = None,
                    base: Sequence[TruncatedSeries] | None = None, order: Sequence[int]
                    | None = None,
                    direction=None, factors: Sequence | None = None) -> OneStepUpdate:
    """Exact step of the acyclic pattern ``S`` through the Taylor model.

    Block ``i`` (in ``order``, default ``pattern.order()``) evaluates its gradient at ``base +
    x^(i)``, ``x^(i)_j`` block ``j``'s new displacement if ``j in S(i)`` else 0, and moves by ``-eta
    f_i phi_i(g~_i)``: ``direction(i, {a: g~_a}) -> {a: phi_a}`` (default the identity) and
    ``factors`` ``f_i`` (default 1). ``space`` defaults to ``eta`` up to ``eta^3``; ``base`` is the
    starting displacement (Lemma 3 starts at ``eps * delta``). The returned displacement is exact up
    to the space's truncation degree.
    """
    pattern = check_pattern(model, pattern)
    order = _check_order(pattern, order)
    space = space or eta_space(model)
    eta = space.variable(0)
    d = model.d
    base_l = [space.zero_series() for _ in range(d)] if base is None else list(base)
    if len(base_l) != d:
        raise ModelError(f"base state has {len(base_l)} entries, the model {d}")
    disp: list = [None] * d
    fresh: list = [None] * d
    for i in order:
        S_i = set(pattern.fresh(i))
        state = []
        for a in range(d):
            s = base_l[a]
            if model.block_of[a] in S_i:
                s = s + disp[a]
            state.append(s)
        grad = model.gradient(state, components=model.blocks[i], space=space)
        move = grad if direction is None else direction(i, {a: grad[a] for a in model.blocks[i]})
        step = eta if factors is None else eta * factors[i]
        for a in model.blocks[i]:
            fresh[a] = grad[a]
            disp[a] = -(step * move[a])
    return OneStepUpdate(pattern, order, fresh, disp, None if base is None else base_l)


def loss_series(model: BlockModel, pattern: DelayPattern, degree: int = 3, order: Sequence[int]
                | None = None) -> TruncatedSeries:
    """``L_S^{k+1} - L^k`` as a series in ``eta`` up to ``eta^degree`` (brute force)."""
    space = eta_space(model, degree)
    step = one_step_update(model, pattern, space, order=order)
    return model.loss(step.displacement, space)


# -- closed forms (ring elements) -----------------------------------------
def masked_hessian_apply(model: BlockModel, pattern: DelayPattern, v: Sequence, H=None) -> list:
    """``M_S v``: ``(M_S v)_a = sum_{j in S(i)} sum_{b in block j} H_ab v_b`` for ``a`` in block
    ``i``.

    ``H`` defaults to the model Hessian; pass a ``d x d`` nested list (or a dict ``{(a, b): h}``) of
    ring elements / series to use another one (e.g. the Hessian at ``theta_S`` in Lemma 3).
    """
    pattern = check_pattern(model, pattern)
    get = (lambda a, b: H[(a, b)]) if isinstance(H, dict) else (lambda a, b: (model.H if H is None
                                                                              else H)[a][b])
    out = []
    for a in range(model.d):
        i = model.block_of[a]
        acc = 0
        for j in pattern.fresh(i):
            for b in model.blocks[j]:
                acc = _mul(get(a, b), v[b]) + acc
        out.append(acc if not isinstance(acc, int) else model.zero)
    return out


def delay_curvature(model: BlockModel, pattern: DelayPattern):
    """``C_S = g^T M_S g = sum_{(i,j) in S} g_i^T H_ij g_j`` (Theorem 1)."""
    return _dot(model.g, masked_hessian_apply(model, pattern, model.g)) + model.zero


def cross_curvature(model: BlockModel):
    """``C_cross = 2 sum_{i<j} g_i^T H_ij g_j = g^T (H - D) g`` (eq. cross_curvature)."""
    acc = model.zero
    for a in range(model.d):
        for b in range(model.d):
            if model.block_of[a] != model.block_of[b]:
                acc = acc + model.g[a] * model.H[a][b] * model.g[b]
    return acc


def fresh_cubic_term(model: BlockModel, pattern: DelayPattern) -> list:
    """``t``: ``t_a = 1/2 sum_{b,c} T_abc (P_i g)_b (P_i g)_c`` for ``a`` in block ``i`` (zero if no
    ``T``)."""
    pattern = check_pattern(model, pattern)
    out = [model.zero] * model.d
    if model.taylor_order < 3:
        return out
    half = sympy.Rational(1, 2)
    for i in range(model.n_blocks):
        cols = pattern.fresh_items(i, model.blocks)
        for a in model.blocks[i]:
            acc = model.zero
            for b in cols:
                for c in cols:
                    acc = acc + model.T(a, b, c) * model.g[b] * model.g[c]
            out[a] = acc * half
    return out


def lemma1_coefficients(model: BlockModel, pattern: DelayPattern) -> dict[int, list]:
    """Closed-form coefficients of the fresh gradient ``g~`` (Lemma 1 and next term).

    Returns:
        ``{0: g, 1: -M_S g, 2: M_S^2 g + t}`` as lists of ``d`` ring elements.
    """
    mg = masked_hessian_apply(model, pattern, model.g)
    mmg = masked_hessian_apply(model, pattern, mg)
    t = fresh_cubic_term(model, pattern)
    return {0: list(model.g), 1: [-x for x in mg], 2: [x + y for x, y in zip(mmg, t)]}


def _hessian_apply(model: BlockModel, v: Sequence) -> list:
    return [_dot(model.H[a], v) + model.zero for a in range(model.d)]


def _T_ggg(model: BlockModel):
    if model.taylor_order < 3:
        return model.zero
    acc = model.zero
    g = model.g
    for a in range(model.d):
        for b in range(model.d):
            for c in range(model.d):
                acc = acc + model.T(a, b, c) * g[a] * g[b] * g[c]
    return acc


def loss_coefficients_closed_form(model: BlockModel, pattern: DelayPattern) -> dict[int, object]:
    """Closed-form ``eta^1..eta^3`` coefficients of ``L_S^{k+1} - L^k`` (Theorem 1, extended).

    ``1: -|g|^2``, ``2: 1/2 g^T H g + C_S``, ``3: -g^T M_S^2 g - g^T t - g^T H M_S g - 1/6 T[g, g,
    g]``.
    """
    g = model.g
    mg = masked_hessian_apply(model, pattern, g)
    mmg = masked_hessian_apply(model, pattern, mg)
    hmg = _hessian_apply(model, mg)
    hg = _hessian_apply(model, g)
    t = fresh_cubic_term(model, pattern)
    sixth = sympy.Rational(1, 6)
    return {
        1: -_dot(g, g),
        2: _dot(g, hg) * sympy.Rational(1, 2) + _dot(g, mg),
        3: -_dot(g, mmg) - _dot(g, t) - _dot(g, hmg) - _T_ggg(model) * sixth,
    }


def eta3_gap_closed_form(model: BlockModel, pattern: DelayPattern):
    """``c_3 = -g^T (M_S + H) M_S g - sum_i g_i^T t_i`` (beyond the paper).

    The ``eta^3`` coefficient of ``L_S^{k+1} - L_JC^{k+1}``; equivalently ``-g^T (M_S + H) M_S g -
    1/2 sum_i T[E_i g, P_i g, P_i g]``.
    """
    g = model.g
    mg = masked_hessian_apply(model, pattern, g)
    mmg = masked_hessian_apply(model, pattern, mg)
    hmg = _hessian_apply(model, mg)
    t = fresh_cubic_term(model, pattern)
    return -(_dot(g, mmg) + _dot(g, hmg)) - _dot(g, t) + model.zero


# -- numeric evaluation (float / mpmath / sympy) ---------------------------
_MODES = ("float", "mpmath", "sympy")


def _as_array(x, mode: str, ndim: int, name: str) -> np.ndarray:
    """Convert ``x`` to a numpy array (float64, or object of mpf / SymPy numbers)."""
    try:
        import mpmath
        if isinstance(x, mpmath.matrix):
            rows = [[x[r, c] for c in range(x.cols)] for r in range(x.rows)]
            x = [r[0] for r in rows] if ndim == 1 and x.cols == 1 else ([v for r in rows
                for v in r] if ndim == 1 else rows)
    except ImportError:  # pragma: no cover - mpmath ships with sympy
        pass
    if isinstance(x, sympy.MatrixBase):
        x = x.tolist()
        if ndim == 1:
            x = [v for r in x for v in r]
    if mode == "float":
        arr = np.asarray(x, dtype=np.float64)
    else:
        arr = np.array(x, dtype=object)
        conv = (lambda v: _to_mpf(v)) if mode == "mpmath" else sympy.sympify
        arr = np.vectorize(conv, otypes=[object])(arr) if arr.size else arr
    if arr.ndim != ndim:
        raise CoefficientInputError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr


def _to_mpf(v):
    import mpmath

    if isinstance(v, (mpmath.mpf, mpmath.mpc)):
        return v
    if isinstance(v, sympy.Basic):
        v = sympy.Rational(v) if v.is_Rational else v.evalf(mpmath.mp.dps + 5)
        if isinstance(v, sympy.Rational):
            return mpmath.mpf(v.p) / v.q
        return mpmath.mpf(str(v))
    return mpmath.mpf(v)


def _prepare(pattern, block_dims, g, H, T, mode, need_T=True):
    if mode not in _MODES:
        raise CoefficientInputError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
    dims = tuple(int(x) for x in block_dims)
    if not dims or any(x < 1 for x in dims):
        raise CoefficientInputError(
            f"block_dims must be positive integers, got {tuple(block_dims)}")
    pattern = as_pattern(pattern, len(dims))
    d = sum(dims)
    g = _as_array(g, mode, 1, "g")
    H = _as_array(H, mode, 2, "H")
    if g.shape != (d,) or H.shape != (d, d):
        raise CoefficientInputError(f"expected g of shape ({d},) and H of shape ({d}, {d}), got "
                                    f"{g.shape} and {H.shape}")
    if need_T:
        T = _as_array(T, mode, 3, "T")
        if T.shape != (d, d, d):
            raise CoefficientInputError(f"expected T of shape ({d}, {d}, {d}), got {T.shape}")
    starts = np.cumsum((0,) + dims)
    blocks = [np.arange(starts[b], starts[b + 1]) for b in range(len(dims))]
    return pattern, dims, blocks, g, H, T


def _numeric_parts(pattern, blocks, g, H, T):
    """``M_S g``, ``M_S^2 g``, ``H M_S g`` and the per-block cubic term ``t``."""
    d = g.shape[0]
    mask = np.zeros((d, d), dtype=bool)
    for i, j in pattern.pairs:
        mask[np.ix_(blocks[i], blocks[j])] = True
    M = np.where(mask, H, 0 if H.dtype == object else 0.0)
    if H.dtype == object:
        M = M.astype(object)
    mg = M.dot(g)
    mmg = M.dot(mg)
    hmg = H.dot(mg)
    t = np.zeros(d, dtype=g.dtype) if g.dtype != object else np.array([0] * d, dtype=object)
    for i in range(pattern.n_blocks):
        fresh = pattern.fresh(i)
        if not fresh or T is None:
            continue
        cols = np.asarray(pattern.fresh_items(i, blocks), dtype=np.intp)
        pg = g[cols]
        Ti = T[np.ix_(blocks[i], cols, cols)]
        ti = np.tensordot(Ti, pg, axes=([2], [0])).dot(pg)
        t[blocks[i]] = ti / 2 if g.dtype != object else np.array([v / 2 for v in ti], dtype=object)
    return mg, mmg, hmg, t


def _finish(value, mode):
    if mode == "float":
        return float(value)
    if mode == "sympy":
        return sympy.expand(sympy.sympify(value))
    return value


def _symbolic_model(block_dims) -> BlockModel:
    return BlockModel(len(block_dims), tuple(int(x) for x in block_dims), 3)


def gap_coefficients(pattern: DelayPattern | str, block_dims: Sequence[int], g, H, T,
                     mode: str = "float") -> dict:
    """``{2: C_S, 3: c_3}`` of ``L_S^{k+1} - L_JC^{k+1} = eta^2 C_S + eta^3 c_3 + O(eta^4)``.

    ``C_S = g^T M_S g``, ``c_3 = -g^T (M_S + H) M_S g - 1/2 sum_i T[E_i g, P_i g, P_i g]``, from
    ``g`` (shape ``(d,)``), symmetric ``H`` (``(d, d)``) and ``T`` (``(d, d, d)``) at ``theta^k``,
    ``d = sum(block_dims)``.  ``mode``: ``"float"`` (float64 in, floats out), ``"mpmath"``
    (``mpmath.mpf`` at the current precision) or ``"sympy"`` (exact; with ``g = H = T = None`` the
    generic expression in the :class:`BlockModel` symbols).  Raises
    :class:`CoefficientInputError` (shapes, mode) or ``PatternError``.
    """
    if mode == "sympy" and g is None and H is None and T is None:
        model = _symbolic_model(block_dims)
        pattern = check_pattern(model, pattern)
        return {2: model.to_expr(delay_curvature(model, pattern)), 3: model.to_expr(
            eta3_gap_closed_form(model, pattern))}
    pattern, dims, blocks, g, H, T = _prepare(pattern, block_dims, g, H, T, mode)
    mg, mmg, hmg, t = _numeric_parts(pattern, blocks, g, H, T)
    c2 = g.dot(mg)
    c3 = -(g.dot(mmg) + g.dot(hmg)) - g.dot(t)
    return {2: _finish(c2, mode), 3: _finish(c3, mode)}


def loss_coefficients(pattern: DelayPattern | str, block_dims: Sequence[int], g, H, T,
                      mode: str = "float") -> dict:
    """Coefficients ``{1, 2, 3}`` of ``L_S^{k+1} - L^k`` in powers of ``eta`` (Theorem 1, extended).

        1: -|g|^2
        2: 1/2 g^T H g + C_S
        3: -g^T M_S^2 g - g^T t - g^T H M_S g - 1/6 T[g, g, g],
           t_a = 1/2 T[e_a, P_i g, P_i g] for a in block i.

    JC is the empty pattern.  Arguments, modes and errors as in
    :func:`gap_coefficients`.
    """
    if mode == "sympy" and g is None and H is None and T is None:
        model = _symbolic_model(block_dims)
        pattern = check_pattern(model, pattern)
        return {k: model.to_expr(v) for k, v in loss_coefficients_closed_form(model,
                                                                              pattern).items()}
    pattern, dims, blocks, g, H, T = _prepare(pattern, block_dims, g, H, T, mode)
    mg, mmg, hmg, t = _numeric_parts(pattern, blocks, g, H, T)
    hg = H.dot(g)
    tggg = np.tensordot(T, g, axes=([2], [0])).dot(g).dot(g)
    half = 0.5 if mode == "float" else sympy.Rational(1, 2) if mode == "sympy" else _to_mpf(0.5)
    sixth = 1.0 / 6.0 if mode == "float" else sympy.Rational(1, 6) if mode == "sympy" else _to_mpf(
        1) / 6
    l1 = -g.dot(g)
    l2 = g.dot(hg) * half + g.dot(mg)
    l3 = -g.dot(mmg) - g.dot(t) - g.dot(hmg) - tggg * sixth
    return {1: _finish(l1, mode), 2: _finish(l2, mode), 3: _finish(l3, mode)}
