"""How the reports write a number: one formatter for every table cell and sentence under
``reports/``.
"""

from __future__ import annotations

import math

__all__ = ["number", "percent"]


def _missing(x) -> bool:
    return x is None or x != x


def number(x, spec: str = ".3g", missing: str = "nan", infinite: str | None = None) -> str:
    """``x`` written with the format ``spec``; ``missing`` for ``None`` and NaN, ``infinite`` (when
    given) for +-inf.

    ``number(0.012345) == "0.0123"``, ``number(None) == "nan"``, ``number(2.0, ".1e") ==
    "2.0e+00"``, ``number(float("inf"), infinite="nan") == "nan"``.
    """
    if _missing(x):
        return missing
    if infinite is not None and math.isinf(x):
        return infinite
    return format(x, spec)


def percent(x, missing: str = "nan") -> str:
    """A percentage with one decimal (``x`` already in percent): ``percent(12.345) == "12.3%"``;
    ``missing`` for ``None`` and NaN."""
    return missing if _missing(x) else f"{x:.1f}%"
