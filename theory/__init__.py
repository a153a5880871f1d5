"""Symbolic half of crosscurv: delay patterns and the paper's expansions (SymPy).

The public surface (everything else lives in the module named after its concept:
:mod:`crosscurv.theory.series`, :mod:`crosscurv.theory.recursion`,
:mod:`crosscurv.theory.cumulative`, :mod:`crosscurv.theory.lambdified`...):

* delay patterns: :class:`DelayPattern`, its constructors, :func:`parse_pattern` (the command-line
  spelling) and :func:`as_pattern` (either form);
* the derivation behind ``crosscurv derive``: :func:`derive`;
* the expansions of a generic block model: :class:`BlockModel`, :func:`delay_curvature` (``C_S``),
  :func:`cross_curvature` (``C_cross``), :func:`loss_series`, :func:`check_recursions` (Lemma 3,
  Theorem 2), :func:`check_cumulative` (Theorem 3);
* the same coefficients for concrete ``g, H, T``, exact or in floating point:
  :func:`gap_coefficients`, :func:`loss_coefficients`;
* errors: every one is an :class:`InputError` (one line, exit code 2 on the command line).

Importing ``theory`` never imports torch; its names are imported on first use, so the delay patterns
alone (what a numeric run needs) do not import SymPy.
"""

from __future__ import annotations

import importlib

#: public name -> the module of this package that defines it, imported on first use (PEP 562): a
#: caller
#: that needs only the delay patterns (every numeric run) does not import SymPy
_EXPORTS = {
    "InputError": "errors",
    **{name: "patterns" for name in (
        "DelayPattern", "PatternError", "as_pattern", "chain", "from_pairs", "gauss_seidel",
        "jacobi",
        "parse_pattern", "partial",
    )},
    "BlockModel": "block_model", "ModelError": "block_model",
    **{name: "one_step" for name in (
        "CoefficientInputError", "cross_curvature", "delay_curvature", "gap_coefficients",
        "loss_coefficients",
        "loss_series",
    )},
    "check_recursions": "recursion",
    "check_cumulative": "cumulative",
    "DerivationResult": "derivation", "derive": "derivation",
}

__all__ = ["DelayPattern", "as_pattern", "parse_pattern", "jacobi", "gauss_seidel", "chain",
           "partial", "from_pairs", "derive", "DerivationResult", "BlockModel", "delay_curvature",
           "cross_curvature", "loss_series", "check_recursions", "check_cumulative",
           "gap_coefficients", "loss_coefficients", "InputError", "PatternError", "ModelError",
           "CoefficientInputError"]


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'crosscurv.theory' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
