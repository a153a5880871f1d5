"""Derived symbolic quantities as numeric functions (numpy float64 or mpmath).

Any expression in the symbols of a :class:`crosscurv.theory.block_model.BlockModel` (``g1, H12,
T123, Q1234, delta1, ...``) and the small parameters ``eta`` / ``epsilon`` becomes a function of
*arrays*::

    f = numeric_function(expr, model, module="numpy")
    f(g=g, H=H, T=T, eta=0.01)        # g (d,), H (d, d), T (d, d, d), Q (d,)*4, delta (d,)

The function reads ``g[a]``, ``H[a, b]``, ``T[a, b, c]`` ... for exactly the
entries the model's symbols stand for (the *first* index of each symmetric
multiset, so only the upper "triangle" is read; pass symmetric tensors).
``module="mpmath"`` evaluates with mpmath at the current ``mpmath.mp.dps``;
inputs may be numpy object arrays, mpmath matrices or nested lists.
:func:`exact_value` substitutes exact numbers (SymPy Rationals) for the same
check done without rounding.

Importing this module never imports torch.
"""

from __future__ import annotations

from typing import Callable

import sympy

from .block_model import BlockModel
from .errors import InputError
from .series import EPS, ETA

__all__ = ["numeric_function", "exact_value", "value_map"]



def _entry(arr, idx: tuple):
    """``arr[idx]`` for numpy arrays, mpmath matrices and nested lists."""
    try:
        import mpmath

        if isinstance(arr, mpmath.matrix):
            if len(idx) == 1:
                return arr[idx[0]]
            return arr[idx[0], idx[1]]
    except ImportError:  # pragma: no cover
        pass
    if hasattr(arr, "shape") and not isinstance(arr, sympy.MatrixBase):
        return arr[idx]
    if isinstance(arr, sympy.MatrixBase):
        return arr[idx[0]] if len(idx) == 1 else arr[idx[0], idx[1]]
    out = arr
    for i in idx:
        out = out[i]
    return out


def value_map(model: BlockModel, symbols, arrays: dict) -> list:
    """Values for ``symbols`` read from ``arrays`` (``g``, ``H``, ``T``, ``Q``, ``delta``, ``eta``,
    ``eps``)."""
    vals = []
    for s in symbols:
        if s == ETA or s == EPS:
            key = "eta" if s == ETA else "eps"
            if arrays.get(key) is None:
                raise InputError(f"the expression depends on {key}; pass {key}=...")
            vals.append(arrays[key])
            continue
        kind, idx = model.symbol_index[s]
        if arrays.get(kind) is None:
            raise InputError(f"the expression depends on {kind}; pass {kind}=...")
        vals.append(_entry(arrays[kind], idx))
    return vals


def _args(expr: sympy.Expr, model: BlockModel) -> list:
    free = sympy.sympify(expr).free_symbols
    order = list(model.symbols) + [ETA, EPS]
    unknown = free - set(order)
    if unknown:
        raise InputError(f"expression has symbols outside the model: {sorted(map(str, unknown))}")
    return [s for s in order if s in free]


def numeric_function(expr, model: BlockModel, module: str = "numpy") -> Callable:
    """Lambdify ``expr`` (or a sequence / Matrix of them) in the ``model`` symbols, ``eta`` and
    ``epsilon``: ``f(g=None, H=None, T=None, Q=None, delta=None, eta=None, eps=None)`` with
    ``module`` ``"numpy"`` (float64) or ``"mpmath"``, a scalar (a list for a sequence).
    """
    if module not in ("numpy", "mpmath"):
        raise InputError(f"module must be 'numpy' or 'mpmath', got {module!r}")
    many = isinstance(expr, (list, tuple, sympy.MatrixBase))
    exprs = list(expr) if many else [sympy.sympify(expr)]
    args = sorted(set().union(*[set(_args(e, model)) for e in exprs]), key=lambda s: (list(
        model.symbols) + [ETA, EPS]).index(s))
    fn = sympy.lambdify(args, exprs if many else exprs[0], modules=module)

    def f(g=None, H=None, T=None, Q=None, delta=None, eta=None, eps=None):
        vals = value_map(model, args, {"g": g, "H": H, "T": T, "Q": Q, "delta": delta, "eta": eta,
                                       "eps": eps})
        return fn(*vals)

    f.__doc__ = f"Numeric ({module}) value of {str(expr)[:200]}"
    f.symbols = tuple(args)
    return f


def exact_value(expr, model: BlockModel, **arrays) -> sympy.Expr:
    """``expr`` with the model symbols replaced by exact entries of ``arrays`` (same keys as above).
    """
    expr = sympy.sympify(expr)
    args = _args(expr, model)
    vals = value_map(model, args, arrays)
    return sympy.expand(expr.xreplace({s: sympy.sympify(v) for s, v in zip(args, vals)}))
