"""Advise's coverage by learning rate: per half and rate ``c / lambda_max(H^0)``, the decided
iterations inside the regime, how many the certificate (at the code's factor) certified and how many
of those were wrong, pooled over the half's problems and seeds.

Where the rate is small the expansion's dropped orders are small against the differences between the
candidates and most decided iterations are certified; near the edge of stability they are not, and
the certificate withholds. The section shows where on the rate axis a user can expect a certified
answer.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["rate_cells", "rate_lines"]


def rate_cells(runs, factor) -> dict:
    """``{(half, c): [certified, wrong, decided inside]}`` of advise at ``factor``, halves in the
    report's order, rates ascending."""
    from crosscurv.experiments.studies.certificates_report import HALVES, advice_counts

    cells: dict = defaultdict(lambda: [0, 0, 0])
    for run in runs:
        a = advice_counts(run, factor)
        t = cells[(run["half"], float(run["c"]))]
        t[0] += a["certified"]
        t[1] += a["certified"] - a["right"]
        t[2] += a["decided_inside"]
    order = {h: i for i, h in enumerate(HALVES)}
    return dict(sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1])))


def rate_lines(runs, factor) -> list:
    """The report's section: one row per half and rate."""
    lines = [
        "",
        "## Advise's coverage by learning rate",
        "",
        "Module docstring of `crosscurv.experiments.studies.certificates_rates`: per half and "
        f"rate `c / lambda_max(H^0)`, pooled over the half's problems and seeds, at F = "
        f"{factor:g}. Coverage: certified over decided iterations inside the regime.",
        "",
        "| half | c | decided inside the regime | certified | wrong | coverage |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (half, c), (cert, wrong, dec) in rate_cells(runs, factor).items():
        cov = f"{100 * cert / dec:.1f}%" if dec else "n/a"
        lines.append(f"| {half} | {c:g} | {dec:,} | {cert:,} | {wrong:,} | {cov} |")
    return lines
