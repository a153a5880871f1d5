"""The certificates report's section on the safety factor: the tuning half's choice and the
choice over every half but the fresh one (:func:`crosscurv.experiments.studies.certificates_report.
choose_factor`), against the code's, with every half's precision at each.
"""

from __future__ import annotations

from crosscurv.experiments.studies.certificates_report import (_EST, HALVES, SEEN, TARGET, _pct,
                                                               _precisions, choose_factor,
                                                               fresh_modules)

__all__ = ["factor_lines"]


def factor_lines(runs) -> list:
    """The safety factor's section: the tuning half's choice and the choice over every half but
    the fresh one, against the code's, and every half's precision at each."""
    from crosscurv.numeric.certificate import SAFETY

    tuned, table = choose_factor(runs)
    seen, seen_table = choose_factor(runs, SEEN)
    lines = [
        "",
        "## The safety factor",
        "",
        f"The smallest factor whose precision is at least {TARGET:g}% on every problem of the "
        f"halves it is chosen on (advise and each record estimate). On the tuning half alone: "
        f"**{tuned:g}**; on every half but the fresh one ({', '.join(SEEN)}): **{seen:g}**; the "
        f"code's `crosscurv.numeric.certificate.SAFETY`: **{SAFETY:g}**. The fresh problems "
        f"({fresh_modules(runs)}) never choose it: each round was committed before its runs, to "
        f"test the code as it then stood (what each tested: \"The fresh rounds, one at a "
        f"time\"). Coverage pooled over the tuning half.",
        "",
        "| factor | worst precision over the tuning problems | over every problem but the fresh "
        "| coverage: advise | jc_only | cumulative | recursive |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (f, worst, cov), (_, worst_seen, _) in zip(table, seen_table):
        lines.append(
            f"| {f:g} | {worst:.2f}% | {worst_seen:.2f}% | "
            + " | ".join(f"{cov[k]:.1f}%" for k in ("advise",) + _EST)
            + " |"
        )
    return lines + ["", _halves_line(runs, tuned, SAFETY)]


def _halves_line(runs, tuned: float, code: float) -> str:
    """Every half's precision (advise, and the records pooled) at the tuning half's factor and at
    the code's."""
    half_of = {r["problem"]: r["half"] for r in runs}

    def halves(f, which):
        prec, parts = _precisions(runs, f), []
        for h in which:
            cells = [(k, v) for (p, k), v in prec.items() if half_of[p] == h]
            adv = [sum(v[j] for k, v in cells if k == "advise") for j in range(2)]
            rec = [sum(v[j] for k, v in cells if k != "advise") for j in range(2)]
            parts.append(f"{h} advise {_pct(adv[0], adv[1]):.2f}% ({adv[1] - adv[0]} wrong), "
                         f"records {_pct(rec[0], rec[1]):.3f}% ({rec[1] - rec[0]} wrong)")
        return "; ".join(parts)

    at_code = f"At the code's factor, {code:g}: {halves(code, HALVES)}."
    if tuned >= code:
        return at_code
    return (f"At the tuning half's factor, {tuned:g}, the halves it was not chosen on are "
            f"{halves(tuned, HALVES[1:])}: the tuning half does not carry that factor's "
            f"precision to them. " + at_code)
