"""Loss differences without cancellation, and the scale their round-off acts on.

:func:`loss_gap` (:func:`crosscurv.numeric.gap.loss_gap`) computes ``L(a) - L(b)`` as a
Gauss-Legendre quadrature of ``grad L . (a - b)`` along the segment, so its round-off is relative to
the gap instead of to ``|L|``; :func:`rounding_scale` is the ``||theta (*) g||`` part of the
round-off floors of :mod:`.study`.
"""

from __future__ import annotations

from crosscurv.numeric.float64_sums import norm64
from crosscurv.numeric.gap import GAP_NODES, loss_gap
from crosscurv.numeric.hvp import grad

__all__ = ["GAP_NODES", "loss_gap", "rounding_scale"]


def rounding_scale(task, params) -> float:
    """``||theta (*) g||`` (elementwise product): the loss change from rounding every coordinate of
    ``theta``.

    Rounding ``theta_i`` to float moves it by at most ``eps |theta_i| / 2`` with no preferred sign,
    so the loss moves by about ``eps ||theta (*) g||``.  Accumulated in float64
    (:mod:`crosscurv.numeric.float64_sums`).
    """
    _, g = grad(task.loss, params)
    return norm64(lambda x, t, p, gk: x.copy_(p).mul_(gk), params, g)
