"""The prose of an advice (:mod:`crosscurv.numeric.advice`): the recommendation a person can act on,
and the notes that qualify it (the full GS orders, the one-step check at ``theta^0``, the edge of
stability, a diverged JC run).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from .certificate import SAFETY

__all__ = [
    "k_ranges",
    "recommendation",
    "check_failures",
    "check_note",
    "edge_note",
    "uncoupled_note",
    "order_note",
    "diverged_recommendation",
]


#: a segment's ``best`` where the best two predictions differ below the loss's rounding
ANY = "any scheme"


def _best(r: Mapping) -> str:
    """``r``'s best candidate, or :data:`ANY` where its margin to the runner-up is within its
    ``rounding`` (:func:`crosscurv.numeric.certificate.rounding_floor`; never certified there)."""
    m, floor = r.get("margin"), r.get("rounding")
    tie = (not r["certified"] and m is not None and floor is not None and math.isfinite(m)
           and m <= floor)
    return ANY if tie else r["best"]


def _segments(rows: Sequence[Mapping]) -> list[dict]:
    """Maximal runs of iterations with the same best candidate (:func:`_best`): ``[{"best",
    "first", "last", "certified_ks"}]``."""
    segs: list[dict] = []
    for r in rows:
        best = _best(r)
        if not segs or segs[-1]["best"] != best:
            segs.append({"best": best, "first": r["k"], "last": r["k"], "certified_ks": []})
        s = segs[-1]
        s["last"] = r["k"]
        if r["certified"]:
            s["certified_ks"].append(r["k"])
            if len(r.get("tied", ())) > 1:
                s.setdefault("set_ks", []).append(r["k"])
    return segs


def k_ranges(ks: Sequence[int], max_ranges: int = 5) -> str:
    """``[3, 4, 5, 9]`` as ``"3..5, 9"``; past ``max_ranges`` ranges the rest is counted (``"...,
    and 12 more iterations in 4 ranges"``)."""
    runs: list[list[int]] = []
    for k in ks:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    text = ", ".join(f"{a}..{b}" if b > a else f"{a}" for a, b in runs[:max_ranges])
    rest = runs[max_ranges:]
    if rest:
        text += f", and {sum(b - a + 1 for a, b in rest)} more iterations in {len(rest)} ranges"
    return text


def recommendation(rows: Sequence[Mapping], max_segments: int = 6) -> str:
    """A sentence a person can act on, e.g. ``"jc for K <= 45, certified at K = 3..45; gs for K =
    46..200, certified at K = 52..120"``.

    Built from the per-iteration ``best`` / ``certified`` of ``rows`` (ordered by ``k``): each range
    of budgets with the same predicted best names exactly the budgets where it is certified
    (:func:`crosscurv.numeric.certificate.certify_best`); with more than ``max_segments`` changes of
    the best scheme the last ones are named and the count of changes given.
    """
    if not rows:
        return "no iterations: nothing to advise"
    segs = _segments(rows)
    last = rows[-1]
    parts = []
    shown = segs if len(segs) <= max_segments else segs[-max_segments:]
    for s in shown:
        if s["first"] == rows[0]["k"]:
            where = f"for K <= {s['last']}" if s is not segs[-1] else f"for every K <= {s['last']}"
        elif s["first"] == s["last"]:
            where = f"at K = {s['first']}"
        else:
            where = f"for K = {s['first']}..{s['last']}"
        n = len(s["certified_ks"])
        if n == s["last"] - s["first"] + 1:
            cert = ", certified throughout"
        elif n:
            cert = f", certified at K = {k_ranges(s['certified_ks'])}"
        else:
            cert = ", not certified"
        set_ks = s.get("set_ks", [])
        if set_ks:
            at = "" if set_ks == s["certified_ks"] else f" at K = {k_ranges(set_ks)}"
            cert += f" (as one of the GS orders the errors cannot tell apart{at})"
        if s["best"] == ANY:
            cert = " (the best two predictions within the loss's rounding)"
        parts.append(f"{s['best']} {where}{cert}")
    parts[-1] += "."
    head = (f"at K = {last['k']}: use {last['best']} "
            f"({'certified' if last['certified'] else 'not certified'})")
    if _best(last) == ANY:
        head = f"at K = {last['k']}: use any scheme (predicted {last['best']}, not certified)"
    if last["certified"] and len(last.get("tied", ())) > 1:
        head += (f", as one of the GS orders {', '.join(last['tied'])}, which the errors cannot "
                 "tell apart")
    if len(segs) > max_segments:
        head += f"; the best scheme changes {len(segs) - 1} times, the last {max_segments} runs"
    return head + ". " + "; ".join(parts)


def check_failures(checks: Sequence[dict]) -> list[str]:
    """The candidates whose one-step series does not converge: the measured one-step gap differs
    from ``eta^2 C_S + eta^3 c3`` by more than the ``eta^3`` term itself (and more than the steps'
    rounding), or could not be measured (the loss raised outside its domain)."""
    bad = []
    for check in checks:
        for name, c in (check or {}).items():
            m, p2, p3 = c["measured"], c["eta2"], c["eta3"]
            if not math.isfinite(m):
                bad.append(f"{name} at k = {c['k']}: the exact step could not be measured ({m})")
            elif abs(m - p3) > max(abs(p3 - p2), c["floor"]):
                bad.append(
                    f"{name} at k = {c['k']}: measured {m:.3g}, eta^2 term {p2:.3g}, with "
                    f"eta^3 {p3:.3g}"
                )
    return bad


def check_note(checks: Sequence[dict]) -> str:
    """A warning where the one-step series does not converge (:func:`check_failures`)."""
    bad = check_failures(checks)
    if not bad:
        return ""
    return (
        " Warning: the one-step expansion does not converge at theta^0 ("
        + "; ".join(bad[:3])
        + ("; ..." if len(bad) > 3 else "")
        + "): the first step is outside the expansions' regime (or the loss is not smooth there); "
          "a certificate rests on the errors measured along the run, and the predictions before "
          "one are not reliable."
    )


def rounding_note(last: Mapping | None, floor: float) -> str:
    """A sentence when the run ends with its best two predictions within ``floor``, the rounding of
    a measured loss difference (:func:`crosscurv.numeric.certificate.rounding_floor`): no
    measurement can tell those schemes apart (``""`` otherwise, or where ``K`` is certified)."""
    if not last or last.get("certified"):
        return ""
    m = last.get("margin")
    if m is None or not math.isfinite(m) or m > floor:
        return ""
    return (f" At K = {last['k']} the best two predictions differ by {m:.2g}, within the rounding "
            f"of the loss ({floor:.2g}): no measurement can tell those schemes apart, and either "
            "will do.")


def uncoupled_note(rows: Sequence[Mapping]) -> str:
    """A sentence when every candidate's prediction is exactly 0 at every ``k``: the products ``M_S
    g`` that force the JC-only estimate (Theorem 3) vanish along the whole run, so to every order
    the estimate keeps the blocks do not interact (``""`` otherwise)."""
    if not rows or any(v != 0.0 for r in rows for v in r["estimates"].values()):
        return ""
    return (f" Every prediction is exactly 0 at every K <= {rows[-1]['k']}: the cross-curvature "
            "products M_S g vanish along the run, so to the orders kept the blocks do not "
            "interact, the schemes take the same steps and any of them will do.")


def edge_note(rows: Sequence[Mapping], inside: Sequence[bool], lr: float) -> str:
    """Where the JC run crossed the edge of stability, after which nothing is certified."""
    out = next((r for r, ok in zip(rows, inside) if not ok), None)
    if out is None:
        return ""
    return (
        f" The JC run crossed the edge of stability at K = {out['k']} (eta * sharpness = "
        f"{lr * out['sharpness']:.3g} >= 2): no prediction is certified from there."
    )


def order_note(orders: dict | None, last: Mapping | None, lr: float) -> str:
    """Whether the full GS orders can be told apart at the last ``K`` (prediction differences vs
    errors)."""
    if orders is None or last is None:
        return ""
    names = list(orders["eta3"])
    est, err = last["estimates"], last["next_order"]
    ranked = sorted(names, key=lambda n: est[n])
    apart = all(est[b] - est[a] > SAFETY * (err[a] + err[b]) for a, b in zip(ranked, ranked[1:]))
    orders["told_apart"] = apart
    by3 = sorted(names, key=lambda n: orders["eta3"][n]["k0"])
    step = ", ".join(f"{n} {lr**3 * orders['eta3'][n]['k0']:.3g}" for n in by3)
    if apart:
        note = (
            f" GS orders at K = {last['k']}: {' < '.join(ranked)} (predicted, differences above "
            f"{SAFETY:g} times the errors); one-step eta^3 terms at theta^0 (all orders tie at "
            f"eta^2, Corollary 1): {step}."
        )
    elif last.get("certified") and last["best"] in names and len(last.get("tied", ())) == 1:
        note = (
            f" At K = {last['k']} {last['best']} is ahead of the other GS orders by more than "
            f"{SAFETY:g} times the errors; the others cannot be told apart; one-step eta^3 terms "
            f"at theta^0: {step}."
        )
    else:
        spread = est[ranked[-1]] - est[ranked[0]]
        note = (
            f" The {len(names)} GS orders cannot be told apart at K = {last['k']}: their "
            "predictions differ "
            f"by {spread:.3g}, within {SAFETY:g} times their errors; at one step they tie at eta^2 "
            f"(Corollary 1) and the eta^3 terms at theta^0 "
            + (f"tie them too ({step})." if len({orders["eta3"][n]["k0"] for n in names}) == 1
               else f"rank them {' < '.join(by3)} ({step}).")
        )
    orders["note"] = note.strip()
    return note


def diverged_recommendation(
    message: str, rows: Sequence[Mapping], table: Sequence[Mapping], text: str
) -> str:
    """What advise says when its JC run diverged: the divergence and the last finite state first;
    then ``text`` (the advice over the iterations before it) only where some prediction there is
    certified, else no advice (every prediction would rest on values running into the divergence).
    ``rows``: the per-iteration rows (``k``, ``loss_jc``), ``table``: their decided rows."""
    head = f"the JC run diverged ({message}); "
    if rows:
        head += f"last finite state: k = {rows[-1]['k']}, L_JC = {rows[-1]['loss_jc']:.6g}; "
    else:
        head += "no finite iteration after theta^0; "
    if any(r.get("certified") for r in table):
        return head + text
    return head + (
        "no advice over a diverged run: no prediction before it is certified; a "
        "smaller --lr keeps eta * sharpness below 2, inside the stable regime."
    )
