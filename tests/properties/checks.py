"""Assertions shared by the property tests; every failure message carries the error table.

The tables come from :meth:`crosscurv.experiments.scaling.Study.table` (which uses
:func:`crosscurv.numeric.orders.observe_order`): every grid point, its round-off floor,
the pairwise rates over the points kept, ``error / eta^p`` and the predicted
leading coefficient.
"""

from __future__ import annotations

import math

from crosscurv.experiments.scaling import Study

#: At least this many grid points must lie above the round-off floor (two pairwise rates).
MIN_KEPT = 3


def describe(study: Study, **context) -> str:
    """A failure message: the context (instance, pattern, tilt...) and the study's table."""
    head = ", ".join(f"{k}={v}" for k, v in context.items())
    return f"\n{study.quantity} on {study.problem} ({head})\n{study.table()}\ninfo: {study.info}"


def assert_min_rate(study: Study, threshold: float, **context) -> None:
    """Enough points above the floor, and every pairwise rate over them ``>= threshold``."""
    msg = describe(study, **context)
    assert study.n_kept >= MIN_KEPT, (
        f"only {study.n_kept} grid points above the round-off floor" + msg)
    rates = study.order.rates
    assert all(math.isfinite(r) for r in rates), "non-finite pairwise rate" + msg
    assert study.min_rate >= threshold, (
        f"min pairwise rate {study.min_rate:.3f} < {threshold}" + msg)


def assert_tends_to_prediction(study: Study, **context) -> None:
    """``q(eta) = error / eta^p`` tends to the predicted coefficient ``c``: ``q - c = O(eta)``.

    With ``d_k = q(eta_k) - c`` over the kept points, split into the larger-``eta`` half and the
    smaller-``eta`` half, the check is

        max_small (|d_k| - n_k) / eta_k  <=  4 * max_large (|d_k| + n_k) / eta_k,

    where ``n_k = floor_k / eta_k^p`` bounds the round-off in ``q``. If ``d = c' eta + c'' eta^2 +
    ...`` the two sides are about ``|c'|`` (the factor 4 covers a sign change of ``c' + c'' eta``
    inside the larger half); if the prediction is off by ``e != 0``, ``|d_k| / eta_k ~ e / eta_k``
    grows like ``1/eta`` and the left side exceeds the right once ``e`` exceeds about ``|c'| eta0 /
    4``.
    """
    c = study.predicted
    assert c is not None, "study has no predicted coefficient"
    msg = describe(study, **context)
    kept = [pt for pt in study.points if pt["kept"]]
    assert len(kept) >= 4, f"only {len(kept)} grid points above the round-off floor (need 4)" + msg
    p = study.expected
    rows = []
    for pt in kept:
        x = pt["x"]
        d = pt["error"] / x**p - c
        n = pt["floor"] / x**p
        rows.append((x, d, n))
    half = len(rows) // 2
    large = max((abs(d) + n) / x for x, d, n in rows[:half])
    small = max((abs(d) - n) / x for x, d, n in rows[half:])
    assert small <= 4 * large, (
        f"error/eta^{p:g} does not approach the predicted {c:.6g} linearly: "
        f"max |d|/eta over the small half {small:.3g} > 4 x {large:.3g}"
        + "\n d_k: " + ", ".join(f"eta={x:.3g}: {d:.3g}" for x, d, _ in rows)
        + msg
    )
