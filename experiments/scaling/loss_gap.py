"""Loss differences without cancellation, and the scale their round-off acts on.

:func:`loss_gap` computes ``L(a) - L(b)`` as a Gauss-Legendre quadrature of
``grad L . (a - b)`` along the segment, so its round-off is relative to the
gap instead of to ``|L|``; :func:`rounding_scale` is the ``||theta (*) g||``
part of the round-off floors of :mod:`.study`.
"""

from __future__ import annotations


import torch

from crosscurv.numeric.hvp import grad


#: Gauss-Legendre nodes of :func:`loss_gap` (exact when ``grad L`` is a polynomial of degree <= 7 along the segment).
GAP_NODES = 4


def loss_gap(task, theta_a, theta_b, nodes: int = GAP_NODES) -> float:
    """``L(theta_a) - L(theta_b)`` without the cancellation of subtracting two losses.

    ``L(a) - L(b) = int_0^1 grad L(b + t (a - b)) . (a - b) dt`` by ``nodes``-point
    Gauss-Legendre quadrature (float64 accumulation).  ``a - b`` is formed
    exactly when the two points are close (Sterbenz), so the result carries a
    round-off *relative to the gap*, not to ``|L|``: subtracting two losses of
    size ``|L|`` loses ``eps |L|`` (about ``5e-16`` for a cross-entropy near
    ``ln 10``), more than the ``O(eta^3)`` remainders at small ``eta``.  Exact for
    a quartic polynomial (``grad L`` is cubic along the segment); for a smooth
    loss the quadrature error is ``O((lam |a - b|)^(2 nodes))``.  Costs
    ``nodes`` gradients.
    """
    import numpy as np

    delta = {k: theta_a[k].detach() - theta_b[k].detach() for k in theta_b}
    xs, ws = np.polynomial.legendre.leggauss(nodes)
    total = 0.0
    for x, w in zip(xs, ws):
        t = 0.5 * (float(x) + 1.0)
        point = {k: theta_b[k].detach() + t * delta[k] for k in theta_b}
        _, g = grad(task.loss, point)
        total += 0.5 * float(w) * float(sum((g[k].to(torch.float64) * delta[k].to(torch.float64)).sum() for k in g))
    return total


def rounding_scale(task, params) -> float:
    """``||theta (*) g||`` (elementwise product): the loss change from rounding every coordinate of ``theta``.

    Rounding ``theta_i`` to float moves it by at most ``eps |theta_i| / 2`` with
    no preferred sign, so the loss moves by about ``eps ||theta (*) g||``.
    """
    _, g = grad(task.loss, params)
    return float(torch.sqrt(sum(((params[k].to(torch.float64) * g[k].to(torch.float64)) ** 2).sum() for k in g)))
