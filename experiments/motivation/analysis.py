"""What the runs show: the reversal (sequential ahead early, simultaneous later) and the criterion's
agreement.

Sign convention (Figure 1's right axes): ``Delta L = L_seq - L_sim``; negative means the sequential
implementation is ahead.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from crosscurv.numeric import winner_metrics

__all__ = ["eval_series", "reversal", "agreement", "AGREEMENTS"]


def eval_series(records: Sequence[Mapping]) -> tuple[list, list, list, list]:
    """``(k, eval_seq, eval_sim, eval_diff)`` at the evaluated steps (rows with a finite
    ``eval_sim``).
    """
    rows = [r for r in records if math.isfinite(r["eval_sim"])]
    return ([r["k"] for r in rows], [r["eval_seq"] for r in rows], [r["eval_sim"] for r in rows],
            [r["eval_diff"] for r in rows])


def reversal(records: Sequence[Mapping], fraction: float = 1 / 3) -> dict:
    """Does the sequential implementation lead early and the simultaneous one late?

    ``early``/``late``: the first/last ``fraction`` of the evaluated steps. ``seq_ahead_early``:
    share of early points with ``Delta L < 0``; ``sim_ahead_late``: share of late points with
    ``Delta L > 0`` (a non-finite sequential loss, i.e. divergence, counts as the simultaneous one
    ahead). ``reversal`` is true when both shares exceed 1/2. ``last_change``: the first evaluated
    ``k`` from which the sign of ``Delta L`` no longer changes (``None`` if it never changed);
    ``final``: ``Delta L`` at the last point.
    """
    ks, seq, sim, diff = eval_series(records)
    n = len(ks)
    if n == 0:
        return {"points": 0, "reversal": False}
    m = max(1, int(round(n * fraction)))

    def sign(i):
        d = diff[i]
        if not math.isfinite(d):
            return 1 if not math.isfinite(seq[i]) or seq[i] > sim[i] else -1
        return (d > 0) - (d < 0)

    signs = [sign(i) for i in range(n)]
    early = sum(s < 0 for s in signs[:m]) / m
    late = sum(s > 0 for s in signs[-m:]) / m
    last_change = None
    for i in range(1, n):
        if signs[i] != signs[i - 1]:
            last_change = ks[i]
    return {"points": n, "seq_ahead_early": early, "sim_ahead_late": late, "reversal": early > 0.5
            and late > 0.5,
            "last_change": last_change, "final": diff[-1], "final_seq": seq[-1], "final_sim": sim[
            -1],
            "min_diff": min((d for d in diff if math.isfinite(d)), default=float("nan")),
            "max_diff": max((d for d in diff if math.isfinite(d)), default=float("nan"))}


#: ``(name, estimate column, measured column, meaning)`` of the agreement rows
AGREEMENTS = (
    ("Thm 1 on the exact plain steps", "est_plain", "meas_plain",
     "eta^2 C_S against L(exact GS step) - L(JC step), plain gradients"),
    ("Thm 1 on the exact plain steps at eta/8", "est_plain", "meas_plain_8",
     "the same at a step 8 times smaller (the sign of the estimate does not depend on eta)"),
    ("C_S on the practical steps", "est_plain", "meas_seq",
     "eta^2 C_S against L(practical seq step) - L(practical sim step)"),
    ("optimizer-aware on the practical steps", "est", "meas_seq",
     "eta^2 g^T J M_S d against the same practical difference"),
    ("optimizer-aware on exact GS (mlp)", "est", "meas_gs",
     "eta^2 g^T J M_S d against L(exact GS step, clipped SGD) - L(JC step)"),
)


def agreement(probes: Sequence[Mapping]) -> dict:
    """Per row of :data:`AGREEMENTS`: the share of probes where estimate and measurement name the
    same winner.

    Uses :func:`crosscurv.numeric.winner_metrics` (the paper's ``Correct_K``; an estimate of exactly
    0 agrees only with a measured 0). Rows whose measured column is all NaN (``meas_gs`` outside
    ``mlp``) are left out.
    """
    out = {}
    for name, est, meas, meaning in AGREEMENTS:
        ms = [p.get(meas, float("nan")) for p in probes]
        if not ms or not any(math.isfinite(x) for x in ms):
            continue
        m = winner_metrics(ms, [p[est] for p in probes])
        out[name] = {"correct": m["correct"], "n": len(ms), "meaning": meaning,
                     "agree": int(round(m["correct"] * len(ms) / 100.0))}
    return out
