"""The answer of one run, as ``crosscurv run`` prints it at the end.

From a run's records (``k, loss_jc, loss_s, gap, gap_err``...): the two final losses ``L_JC^K`` and
``L_S^K``, which is lower and by how much (``gap = L_S^K - L_JC^K``; within ``gap_err`` neither: the
measurement does not decide), the iterations where the measured winner changed (undecided iterations
skipped, :func:`crosscurv.experiments.studies.optimizers.report.switch_points`), and for a diverged
run the last finite state.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from crosscurv.experiments.reports.numbers import number

__all__ = ["final_answer", "answer_lines", "diverged_lines", "MAX_CHANGES"]

#: Changes of winner listed by k; beyond them, only their count.
MAX_CHANGES = 12
#: Significant digits of a printed loss (two losses that differ past the third digit stay apart).
LOSS = ".6g"


def final_answer(columns: Mapping[str, Sequence[float]]) -> dict:
    """``{"K", "loss_jc", "loss_s", "gap", "gap_err", "lower", "changes", "timeline"}`` of the
    records ``columns`` (``lower``: ``"JC"``, ``"S"`` or ``None`` when ``|gap| <= gap_err`` or not
    finite; ``changes``: the ``k`` where the decided winner differs from the previous decided one;
    ``timeline``: ``J``/``G``/``.`` per iteration)."""
    from crosscurv.experiments.studies.optimizers.report import switch_points, winners

    gap = [float(x) for x in columns["gap"]]
    errs = [float(x) for x in columns.get("gap_err", [0.0] * len(gap))]
    timeline = winners(gap, errs)
    g, e = gap[-1], errs[-1]
    lower = None
    if math.isfinite(g) and abs(g) > (e if math.isfinite(e) else math.inf):
        lower = "JC" if g > 0 else "S"
    return {
        "K": int(columns["k"][-1]),
        "loss_jc": float(columns["loss_jc"][-1]),
        "loss_s": float(columns["loss_s"][-1]),
        "gap": g,
        "gap_err": e,
        "lower": lower,
        "changes": switch_points(timeline),
        "timeline": timeline,
    }


def _segments(timeline: str, k0: int = 1) -> str:
    """``JC at k = 1..6, S at 7..40`` from a ``J``/``G``/``.`` timeline (undecided iterations joined
    to the decided stretch around them)."""
    out, start, last = [], None, None
    for k, w in enumerate(timeline, start=k0):
        if w not in "JG":
            continue
        if w != last:
            if last is not None:
                out.append((last, start, k - 1))
            start, last = k, w
    if last is None:
        return "no iteration decided"
    out.append((last, start, k0 + len(timeline) - 1))
    name = {"J": "JC", "G": "S"}
    return ", ".join(f"{name[w]} at k = {a}" + (f"..{b}" if b > a else "") for w, a, b in out)


def answer_lines(columns: Mapping[str, Sequence[float]], s_label: str) -> list[str]:
    """The lines ``crosscurv run`` prints for a finished run: which scheme is lower at ``K`` and by
    how much, and where the winner changed (``s_label`` names the scheme ``S``, e.g. ``gs:V,U``)."""
    a = final_answer(columns)
    K, jc, s, gap = a["K"], a["loss_jc"], a["loss_s"], a["gap"]
    head = f"at K = {K}: L_JC = {number(jc, LOSS)}, L_S = {number(s, LOSS)} (S = {s_label}): "
    if a["lower"] is None and gap == 0:
        head += "neither is lower: the two losses are equal"
    elif a["lower"] is None:
        head += (
            f"neither is lower: the gap {number(gap)} is within its measurement error "
            f"{number(a['gap_err'])}"
        )
    else:
        rel = f" ({100 * abs(gap) / abs(jc):.3g}% of L_JC)" if jc != 0 and math.isfinite(jc) else ""
        head += f"{a['lower']} is lower by {number(abs(gap))}{rel}"
    changes = a["changes"]
    if not changes:
        decided = {w for w in a["timeline"] if w in "JG"}
        who = {"J": "JC", "G": "S"}[decided.pop()] if len(decided) == 1 else None
        undecided = a["timeline"].count(".")
        change = (
            f"no change of winner: {who} lower at every decided k"
            if who is not None
            else "no iteration decided: every gap is 0 or within its measurement error"
        )
        if undecided and who is not None:
            change += f" ({undecided} undecided: |gap| <= gap_err)"
    else:
        shown = ", ".join(str(k) for k in changes[:MAX_CHANGES])
        more = f" and {len(changes) - MAX_CHANGES} more" if len(changes) > MAX_CHANGES else ""
        change = (
            f"winner changed {len(changes)} time{'s' if len(changes) != 1 else ''}, at k = "
            f"{shown}{more}: {_segments(a['timeline'])}"
        )
    return [head, change]


def diverged_lines(records: Sequence[Mapping], out_dir: str) -> list[str]:
    """The lines ``crosscurv run`` prints for a diverged run: its last finite state, and no metrics
    (they would be taken over the divergence)."""
    if records:
        r = records[-1]
        first = (
            f"last finite state: k = {r['k']}, L_JC = {number(r['loss_jc'], LOSS)}, L_S = "
            f"{number(r['loss_s'], LOSS)}, gap {number(r['gap'])}; records of k = 1..{r['k']} in "
            f"{out_dir}"
        )
    else:
        first = f"no finite iteration after theta^0: nothing recorded in {out_dir}"
    return [
        first,
        "no metrics over a diverged run: a smaller --lr keeps eta * sharpness below 2, inside "
        "the stable regime",
    ]
