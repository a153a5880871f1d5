"""The fresh problems one module at a time: each module (:data:`ROUNDS`) was committed before any
of its runs, to test the certificate's rule as the code then stood, so each is a test of its own.

The section (``reports/certificates.md``) gives per module the certified advise iterations, how
many were wrong and the coverage of the decided iterations inside the regime, and the same for the
records (the three estimates pooled), at the code's factor.
"""

from __future__ import annotations

__all__ = ["ROUNDS", "round_of", "round_counts", "round_lines"]

#: the modules of fresh problems in the order they were defined, with what each round tested
ROUNDS = (
    ("crosscurv.experiments.problems.fresh", "rounds 1-4; the fourth found the failures the "
     "floors of `crosscurv.numeric.certificate` answer"),
    ("crosscurv.experiments.problems.fresh_fits", "round 5, defined before the floors"),
    ("crosscurv.experiments.problems.fresh_models", "round 6, defined after the floors and the "
     "factor, the rule unchanged since"),
    ("crosscurv.experiments.problems.fresh_float32", "round 7, in float32 (every other problem "
     "is float64), defined after round 6, the rule unchanged"),
    ("crosscurv.experiments.problems.fresh_starts", "round 8, starts where a block's gradient "
     "vanishes (half in float32), defined after round 7's failure was fixed"),
    ("crosscurv.experiments.problems.fresh_structures", "round 9, kinds no earlier round has "
     "(three in float32), defined after round 8's results, the rule unchanged"),
    ("crosscurv.experiments.problems.fresh_likelihoods", "round 10, kinds no earlier round has "
     "(three in float32), defined after the pair's second read-out"),
    ("crosscurv.experiments.problems.fresh_recurrences", "round 11, kinds no earlier round has, "
     "most a recurrence unrolled in the loss (three in float32), the rule unchanged since round "
     "10; it found the records' 3 wrong certificates the rising-loss withdrawal answers"),
    ("crosscurv.experiments.problems.fresh_sharpening", "round 12, losses whose curvature grows "
     "along the run (three in float32), defined after the records' rising-loss withdrawal"),
    ("crosscurv.experiments.problems.fresh_pairings", "round 13, kinds no earlier round has, most "
     "a model of pairs (three in float32), defined after round 12's results, the rule unchanged"),
    ("crosscurv.experiments.problems.fresh_blocks", "round 14, kinds no earlier round has, every "
     "one of three or four blocks (three in float32), defined after round 13's results, the rule "
     "unchanged"),
    ("crosscurv.experiments.problems.fresh_scale", "round 15, models ten to a hundred times the "
     "size of the earlier rounds' (three in float32), defined after round 14's results, the rule "
     "unchanged"),
    ("crosscurv.experiments.problems.fresh_rates", "round 16, kinds no earlier round has, at rates "
     "no fresh round used (0.1, 0.6, 1.3, 1.95 over lambda_max; three in float32), defined after "
     "round 15's results, the rule unchanged"),
)


def round_of(problem: str) -> str:
    """The module that defines the fresh problem called ``problem``."""
    from crosscurv.experiments.problems.zoo import zoo_problem

    return zoo_problem(problem).factory.__module__


def round_counts(runs, factor) -> dict:
    """``{module: {"problems", "advise": [right, certified, decided inside], "records": [right,
    certified, decided]}}`` over the fresh runs at ``factor``."""
    from crosscurv.experiments.studies.certificates_report import advice_counts, record_counts

    out: dict = {}
    for run in runs:
        if run["half"] != "fresh":
            continue
        t = out.setdefault(round_of(run["problem"]),
                           {"problems": set(), "advise": [0, 0, 0], "records": [0, 0, 0]})
        t["problems"].add(run["problem"])
        a = advice_counts(run, factor)
        for i, key in enumerate(("right", "certified", "decided_inside")):
            t["advise"][i] += a[key]
        for right, cert, dec in record_counts(run, factor).values():
            for i, x in enumerate((right, cert, dec)):
                t["records"][i] += x
    return out


def _pct(a, b) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "-"


def _cell(right, cert, dec) -> str:
    wrong = cert - right
    return f"{cert:,} certified, {wrong} wrong, coverage {_pct(cert, dec)}"


def round_lines(runs, factor) -> list:
    """The report's section on the fresh rounds (module docstring)."""
    counts = round_counts(runs, factor)
    lines = [
        "",
        "## The fresh rounds, one at a time",
        "",
        f"Each module of fresh problems was committed before any of its runs (F = {factor:g}). "
        "Advise: coverage of the decided iterations inside the regime; records: the three "
        "estimates pooled.",
        "",
        "| module | what it tested | problems | advise | records |",
        "| --- | --- | --- | --- | --- |",
    ]
    for module, what in ROUNDS:
        t = counts.get(module)
        if t is None:
            continue
        lines.append(f"| `{module.rsplit('.', 1)[-1]}` | {what} | {len(t['problems'])} | "
                     f"{_cell(*t['advise'])} | {_cell(*t['records'])} |")
    return lines if len(lines) > 7 else []

