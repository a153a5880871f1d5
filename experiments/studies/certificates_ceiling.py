"""What each prediction allows a certificate to cover: coverage inside the regime when every
candidate's error bar is its prediction's *actual* error (``reports/certificates.md``).

A certificate separates the best prediction ``P_b`` from every other ``P_S`` when
``P_S - F N_S > P_b + F N_b`` (:func:`crosscurv.numeric.certificate.certify_best`).  A safe
symmetric error bar is at least the prediction's actual error ``|gap_S - P_S|`` (the measured gap of
the candidate's own run), so certifying with ``N_S = |gap_S - P_S|`` and ``F = 1`` gives the
*ceiling*: the most coverage any certificate of that prediction with symmetric bars can reach at
full precision, whatever estimates its error.  Measured for the JC-only estimate advise certifies
and for the embedded pair's other member, ``corrected`` (:mod:`crosscurv.numeric.advice`).

Read beside the code's coverage: a problem whose ceiling is far above it loses coverage to the
error estimate (a tighter safe estimate would raise it); one whose ceiling is itself below the goal
is limited by the prediction's accuracy, and only a more accurate prediction with an estimate of its
own error can raise it there.
"""

from __future__ import annotations

from crosscurv.experiments.studies.certificates_report import HALVES, _measured, _pct

__all__ = ["PREDICTIONS", "exact_error_rule", "ceiling_cells", "ceiling_results", "ceiling_lines",
           "ceiling_clause"]

#: the predictions measured: the advice rows' key and its name in the report
PREDICTIONS = (("estimates", "JC-only estimate"), ("corrected", "corrected"))


def exact_error_rule(run: dict):
    """The rule of :func:`crosscurv.experiments.studies.certificates_report.advice_counts` that
    certifies one zoo run's predictions with their actual errors: ``at(i, row, estimates, inside,
    gs, factor)`` calls :func:`crosscurv.numeric.certificate.certify_best` with ``N_S = |gap_S -
    P_S|`` (JC: 0) and ``F = 1`` (``factor`` is ignored)."""
    from crosscurv.numeric.certificate import certify_best

    cands = run["advice"]["candidates"]

    def at(i, row, est, inside, gs, factor):
        gaps, _ = _measured(run["records"], cands, i)
        return certify_best(est, {n: abs(gaps[n] - est[n]) for n in cands}, inside, gs, 1.0)

    return at


def ceiling_cells(runs, key: str) -> dict:
    """``{(half, problem): {"right", "certified", "decided_inside"}}`` with the rows' ``key``
    (``"estimates"`` or ``"corrected"``) certified by :func:`exact_error_rule`, pooled over rates
    and seeds."""
    from crosscurv.experiments.studies.certificates_levers import with_prediction
    from crosscurv.experiments.studies.certificates_report import advice_counts

    out: dict = {}
    for run in runs:
        a = advice_counts(with_prediction(run, key), 1.0, pairwise=exact_error_rule)
        t = out.setdefault(
            (run["half"], run["problem"]), {"right": 0, "certified": 0, "decided_inside": 0}
        )
        for name in t:
            t[name] += a[name]
    return out


def ceiling_results(runs) -> dict:
    """``{key: ceiling_cells(runs, key)}`` for every prediction of :data:`PREDICTIONS`."""
    return {key: ceiling_cells(runs, key) for key, _ in PREDICTIONS}


def _coverage(v: dict) -> float:
    return _pct(v["certified"], v["decided_inside"])


def ceiling_lines(ceilings: dict, code_cells: dict, goal: float) -> list:
    """The report's section: per problem, the code's coverage inside the regime (``code_cells``, as
    :func:`crosscurv.experiments.studies.certificates_findings.advice_cells`) beside the ceiling of
    each of :data:`PREDICTIONS` (``ceilings``, :func:`ceiling_results`), and what limits it."""
    lines = [
        "",
        "## What each prediction allows: coverage with its actual errors as error bars",
        "",
        "Module docstring of `crosscurv.experiments.studies.certificates_ceiling`: every "
        "candidate's error bar set to its prediction's actual error `|gap_S - P_S|` (F = 1), the "
        "most coverage inside the regime that a certificate of that prediction with symmetric "
        "bars can reach at full precision. `limited by`: `error estimate` where the ceiling of the "
        f"certified prediction reaches {goal:g}% and the code's coverage does not; `prediction` "
        f"where that ceiling itself is below {goal:g}%.",
        "",
        "| half | problem | the code's coverage | "
        + " | ".join(f"ceiling: {name}" for _, name in PREDICTIONS)
        + " | precision at the ceilings | limited by |",
        "| --- | --- | --- | " + " | ".join("---" for _ in PREDICTIONS) + " | --- | --- |",
    ]
    order = {h: i for i, h in enumerate(HALVES)}
    for cell in sorted(code_cells, key=lambda c: (order[c[0]], c[1])):
        code = _coverage(code_cells[cell])
        if code != code:  # NaN: no decided iteration inside the regime (said above the table)
            continue
        tops = [ceilings[key][cell] for key, _ in PREDICTIONS]
        right = sum(t["right"] for t in tops)
        cert = sum(t["certified"] for t in tops)
        first = _coverage(tops[0])
        limit = "prediction" if first < goal else ("error estimate" if code < goal else "")
        lines.append(
            f"| {cell[0]} | {cell[1]} | {code:.1f}% | "
            + " | ".join(f"{_coverage(t):.1f}%" for t in tops)
            + f" | {_pct(right, cert):.2f}% | {limit} |"
        )
    return lines


def ceiling_clause(ceilings: dict, goal: float, most: int = 4) -> str:
    """One clause for the report's opening: the problems whose JC-only ceiling is below ``goal``,
    the lowest ``most`` named, then how many more (the table has them all, and the corrected
    prediction's ceiling there)."""
    est = ceilings[PREDICTIONS[0][0]]
    low = sorted((_coverage(v), cell[1]) for cell, v in est.items() if _coverage(v) < goal)
    text = ", ".join(f"{p} {c:.1f}%" for c, p in low[:most]) or "none"
    if len(low) > most:
        text += f" and {len(low) - most} more (table below)"
    return f"below {goal:g}% even with actual errors as bars: " + text
