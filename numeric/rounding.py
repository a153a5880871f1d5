"""The rounding of a measured loss difference, without torch (the reading commands use it).

``ulp(x, dtype)`` is the spacing of ``dtype``'s numbers at ``|x|``; :func:`difference_error` bounds
the rounding of ``L_a - L_b`` by :data:`DIFFERENCE_ULPS` of them at the larger ``|L|``.
"""

from __future__ import annotations

import math

__all__ = ["DIFFERENCE_ULPS", "ulp", "difference_error"]

#: Units in the last place (of the larger loss, in the run's dtype) that bound the rounding of
#: ``loss_s - loss_jc``. Each float32 loss is within 1.8e-7 relative (about 1.5 ulps) of its float64
#: value on the built-in tasks (``python -m crosscurv.experiments.conformance.rounding``, column
#: ``loss_jc``/``loss_s``), so the difference within about 3 ulps; 8 leaves a factor 2.7.
DIFFERENCE_ULPS = 8

#: ``{dtype name: (eps, smallest normal)}`` of the floating-point types a run can use
_FINFO = {
    "float64": (2.0 ** -52, 2.0 ** -1022),
    "float32": (2.0 ** -23, 2.0 ** -126),
    "bfloat16": (2.0 ** -7, 2.0 ** -126),
    "float16": (2.0 ** -10, 2.0 ** -14),
}


def ulp(x: float, dtype) -> float:
    """Spacing of floating-point numbers of ``dtype`` (a torch or numpy dtype, or its name) at
    ``|x|``: ``eps * 2^floor(log2 |x|)``, the smallest normal's spacing at or below it; ``inf`` for
    a non-finite ``x``."""
    name = str(dtype).replace("torch.", "")
    if name not in _FINFO:
        raise ValueError(f"not a floating-point dtype: {dtype!r}")
    eps, smallest = _FINFO[name]
    x = abs(float(x))
    if not math.isfinite(x):
        return math.inf
    _, e = math.frexp(max(x, smallest))  # x = m 2^e, 0.5 <= m < 1
    return eps * 2.0 ** (e - 1)


def difference_error(loss_s: float, loss_jc: float, dtype) -> float:
    """Bound on the rounding of ``loss_s - loss_jc``: :data:`DIFFERENCE_ULPS` ulps of the larger
    ``|loss|``."""
    return DIFFERENCE_ULPS * ulp(max(abs(loss_s), abs(loss_jc)), dtype)
