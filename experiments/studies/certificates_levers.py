"""Levers on advise's coverage inside the regime, each measured with its own factor chosen on the
zoo's tuning half (``reports/certificates.md``).

Advise certifies the JC-only estimate ``P_S^k`` with the first dropped order ``N_S^k`` (the largest
embedded error ``|corrected_S^j - estimate_S^j|`` of the look-back,
:func:`crosscurv.numeric.certificate.advice_next_orders`) and separates ``S`` from the best ``b``
when ``P_S - F N_S > P_b + F N_b``.  Where that error is the real size of the estimate's error, only
a smaller true error or a tighter, still safe estimate of it raises the coverage.  The levers:

* ``the code's``: the rule above;
* ``corrected prediction`` (local extrapolation): certify the embedded pair's other member,
  ``corrected_S^k`` (it keeps the full gradient difference, ``M_S`` at the ``S`` point and Lemma
  1's ``-eta M_S^2 g``), with the same ``N``: a smaller true error wherever ``corrected`` is the
  more accurate of the two;
* ``pairwise error``: what is certified is the sign of ``P_S - P_b``, and its embedded error is
  ``|d_S^j - d_b^j|`` with ``d = corrected - estimate`` signed (:func:`pairwise_orders`), not
  ``|d_S| + |d_b|``: tighter wherever the candidates' errors share their sign (they are forced by
  the same JC trajectory).

Each lever's factor is the smallest of :data:`LEVER_FACTORS` whose advise precision reaches
:data:`crosscurv.experiments.studies.certificates_report.TARGET` on every tuning problem; the
held-out half and the problems beyond the zoo are measured with it and never consulted.
"""

from __future__ import annotations

import math

from crosscurv.experiments.studies.certificates_report import HALVES, half_cells, problems_below

__all__ = [
    "LEVER_FACTORS",
    "LEVERS",
    "signed_errors",
    "pairwise_orders",
    "certify_pairwise",
    "pairwise_rule",
    "with_prediction",
    "lever_cells",
    "choose_lever_factor",
    "lever_results",
    "lever_summary",
    "lever_lines",
]

#: factors tried per lever on the tuning half (below 1 as well: a more accurate prediction than
#: the one the embedded error measures may need less than its error)
LEVER_FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: the levers measured (module docstring)
LEVERS = ("the code's", "corrected prediction", "pairwise error")


def _f(x) -> float:
    return math.nan if x is None else float(x)


def signed_errors(run: dict) -> tuple[list, dict]:
    """``([{candidate: corrected_S^k - estimate_S^k}], {candidate: m_S - P_S^1})`` of one zoo run's
    advice (JC: 0); the first step's signed error is ``inf`` where the expansion does not describe
    that step (:func:`crosscurv.numeric.certificate.first_step_orders`) and 0 without a check."""
    from crosscurv.experiments.studies.certificates_report import first_step

    adv = run["advice"]
    rows, jc = adv["per_iteration"], adv["candidates"][0]
    signed = [
        {
            n: 0.0 if n == jc else _f(r["corrected"][n]) - _f(r["estimates"][n])
            for n in r["estimates"]
        }
        for r in rows
    ]
    first_abs = first_step(run, "prediction")
    checks = (adv.get("one_step_checks") or [{}])[0] or {}
    first = {}
    for n in adv["candidates"]:
        if n == jc or n not in first_abs:
            first[n] = 0.0
        elif math.isinf(first_abs[n]):
            first[n] = math.inf
        else:
            first[n] = _f(checks[n]["measured"]) - _f(rows[0]["estimates"][n])
    return signed, first


def pairwise_orders(window, first_step: dict, k: int, look_back: int | None = None) -> dict:
    """``{(a, b): N_ab}``: the first dropped order of ``P_a - P_b``, the largest ``|d_a^j - d_b^j|``
    over ``window`` (signed embedded errors, oldest first, ``k``'s last) and, for ``k <=
    REMAINDER_WINDOW``, the first step's ``|(m_a - P_a^1) - (m_b - P_b^1)|``; ``inf`` where either
    first step is withdrawn, NaN where an error is NaN."""
    from crosscurv.numeric.certificate import REMAINDER_WINDOW

    look_back = REMAINDER_WINDOW if look_back is None else look_back
    names = list(window[-1])
    out = {}
    for a in names:
        for b in names:
            if math.isinf(first_step.get(a, 0.0)) or math.isinf(first_step.get(b, 0.0)):
                out[(a, b)] = math.inf
                continue
            vals = [w[a] - w[b] for w in window]
            if k <= look_back:
                vals.append(first_step.get(a, 0.0) - first_step.get(b, 0.0))
            out[(a, b)] = math.nan if any(math.isnan(v) for v in vals) else max(map(abs, vals))
    return out


def certify_pairwise(predictions, pair_orders, inside, gs_orders=(), factor=1.0):
    """:func:`crosscurv.numeric.certificate.certify_best` with the error of each difference:
    ``T^k = {b} + {S : P_S - P_b <= F N_Sb}`` (``pair_orders``: :func:`pairwise_orders`)."""
    from crosscurv.numeric.certificate import Verdict

    names = list(predictions)
    best = min(
        names, key=lambda n: (not math.isfinite(predictions[n]), predictions[n], names.index(n))
    )
    finite = all(math.isfinite(predictions[n]) for n in names)
    if not (inside and finite):
        return Verdict(best=best, tied=list(names), certified=False)
    tied = [best] + [
        n
        for n in names
        if n != best
        and not (predictions[n] - predictions[best] > factor * pair_orders[(n, best)])
    ]
    certified = len(tied) == 1 or all(n in gs_orders for n in tied)
    return Verdict(best=best, tied=tied, certified=bool(certified and len(tied) < len(names)))


def pairwise_rule(run: dict):
    """The pairwise-error rule of one zoo run for
    :func:`crosscurv.experiments.studies.certificates_report.advice_counts`: ``at(i, row,
    estimates, inside, gs, factor)`` certifies with :func:`certify_pairwise` and the embedded error
    of each difference over the last ``REMAINDER_WINDOW`` rows (:func:`pairwise_orders`)."""
    from crosscurv.numeric.certificate import REMAINDER_WINDOW

    signed, first_signed = signed_errors(run)

    def at(i, row, est, inside, gs, factor):
        window = signed[max(0, i + 1 - REMAINDER_WINDOW) : i + 1]
        return certify_pairwise(est, pairwise_orders(window, first_signed, row["k"]), inside, gs,
                                factor)

    return at


def with_prediction(run: dict, key: str) -> dict:
    """``run`` whose advice certifies its rows' ``key`` (``"estimates"``: unchanged;
    ``"corrected"``: the embedded pair's other member) instead of the JC-only estimate."""
    if key == "estimates":
        return run
    adv = dict(run["advice"])
    adv["per_iteration"] = [{**r, "estimates": r[key]} for r in adv["per_iteration"]]
    return {**run, "advice": adv}


def lever_cells(runs, lever: str, factor: float) -> dict:
    """``{(half, problem): {"right", "certified", "decided_inside"}}`` of advise under ``lever``
    (:data:`LEVERS`) at ``factor``, pooled over rates and seeds."""
    from crosscurv.experiments.studies.certificates_report import advice_counts

    out: dict = {}
    for run in runs:
        if lever == "corrected prediction":
            a = advice_counts(with_prediction(run, "corrected"), factor)
        else:
            a = advice_counts(run, factor,
                              pairwise=pairwise_rule if lever == "pairwise error" else None)
        t = out.setdefault(
            (run["half"], run["problem"]), {"right": 0, "certified": 0, "decided_inside": 0}
        )
        for key in t:
            t[key] += a[key]
    return out


def _pct(a, b) -> float:
    return 100.0 * a / b if b else math.nan


def _worst(cells, half) -> float:
    sel = [v for (h, _), v in cells.items() if h == half and v["certified"]]
    return min((_pct(v["right"], v["certified"]) for v in sel), default=math.nan)


def choose_lever_factor(runs, lever: str) -> tuple[float, list]:
    """The smallest of :data:`LEVER_FACTORS` at which ``lever``'s advise precision reaches
    :data:`crosscurv.experiments.studies.certificates_report.TARGET` on every tuning problem
    (tuning half only; the largest where none does); ``(factor, [(factor, worst tuning precision,
    tuning coverage)])``."""
    from crosscurv.experiments.studies.certificates_report import TARGET

    tune = [r for r in runs if r["half"] == "tune"]
    table, chosen = [], None
    for f in LEVER_FACTORS:
        cells = lever_cells(tune, lever, f)
        worst = _worst(cells, "tune")
        cov = _pct(
            sum(v["certified"] for v in cells.values()),
            sum(v["decided_inside"] for v in cells.values()),
        )
        table.append((f, worst, cov))
        if chosen is None and worst >= TARGET:
            chosen = f
            break
    return (chosen if chosen is not None else LEVER_FACTORS[-1]), table


def lever_results(runs) -> dict:
    """``{lever: (factor, [(factor, worst, coverage)], cells)}``: every lever of :data:`LEVERS` with
    its factor chosen on the tuning half (:func:`choose_lever_factor`) and its cells at that factor
    over every half (:func:`lever_cells`)."""
    out = {}
    for lever in LEVERS:
        f, table = choose_lever_factor(runs, lever)
        out[lever] = (f, table, lever_cells(runs, lever, f))
    return out


def lever_summary(results, goal: float = 50.0) -> str:
    """One clause for the report's opening: per lever other than the code's, its factor and the
    problems it leaves below ``goal``."""
    parts = []
    for lever, (f, table, cells) in results.items():
        if lever == LEVERS[0]:
            continue
        if not _reached(table):
            parts.append(f"{lever}: no safe factor up to {f:g}")
            continue
        low = problems_below(cells, goal)
        named = ", ".join(low) if len(low) <= 2 else f"{len(low)}"
        parts.append(f"{lever} (F = {f:g}) leaves {named or 'none'} below {goal:g}%")
    return "; ".join(parts)


def _reached(table) -> bool:
    """Whether the last factor tried reached the target on every tuning problem."""
    from crosscurv.experiments.studies.certificates_report import TARGET

    return bool(table) and table[-1][1] >= TARGET


def lever_lines(runs, goal: float = 50.0, results: dict | None = None) -> list:
    """The report's section: per lever, the factor chosen on the tuning half, the worst tuning
    precision one step below it, and precision / coverage inside the regime per half and problem."""
    lines = [
        "",
        "## Levers on advise's coverage, each with its factor chosen on the tuning half",
        "",
        "Module docstring of `crosscurv.experiments.studies.certificates_levers`: `corrected "
        "prediction` certifies the embedded pair's other member with the same error (local "
        "extrapolation: a smaller true error where it is the more accurate one); `pairwise error` "
        "bounds each difference `P_S - P_b` by its own embedded error `|d_S - d_b|` (`d = "
        "corrected - estimate`, signed) instead of `|d_S| + |d_b|`. Factor: the smallest of "
        + ", ".join(f"{f:g}" for f in LEVER_FACTORS)
        + " with every tuning problem at the target precision (tuning half only); `below it`: the "
          "worst tuning precision at the next smaller factor. Cells: precision / coverage inside "
          "the regime.",
        "",
        "| lever | factor | below it | " + " | ".join(HALVES) + " | problems below the goal |",
        "| " + " | ".join(["---"] * (4 + len(HALVES))) + " |",
    ]
    results = lever_results(runs) if results is None else results
    for lever, (f, table, cells) in results.items():
        prev = [w for ff, w, _ in table if ff < f]
        below = f"{prev[-1]:.2f}%" if prev else "n/a"
        row = half_cells(cells)
        low = problems_below(cells, goal)
        fc = f"{f:g}" if _reached(table) else f"none up to {f:g} (worst {table[-1][1]:.2f}%)"
        lines.append(
            f"| {lever} | {fc} | {below} | " + " | ".join(row) + f" | {', '.join(low) or 'none'} |"
        )
    return lines
