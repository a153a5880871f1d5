"""The certificates study: precision, coverage and regret of every certificate on the problem zoo.

``python -m crosscurv.experiments.studies.certificates --out reports/certificates`` (``make
certificates-study``) runs every zoo problem (:data:`crosscurv.experiments.problems.zoo.ZOO`) at
each of its learning rates and seeds (:func:`crosscurv.experiments.studies.zoo_runs.cached_zoo_run`,
resumable), then writes ``reports/certificates.md``: per problem and learning rate, for the
certificate of :mod:`crosscurv.numeric.certificate` and for the ones it replaces, precision
(certified iterations whose certified scheme ties the measured best), coverage (certified share of
the decided iterations) and the advised scheme's regret (:mod:`crosscurv.numeric.regret`). The
safety factor is chosen on the zoo's halves and the problems beyond it, and tested on the fresh
ones (:mod:`crosscurv.experiments.studies.certificates_factor`).
"""

from __future__ import annotations

import sys
import time

__all__ = ["collect"]

SEEDS = (0, 1, 2)


def collect(
    out: str, seeds=SEEDS, problems=None, factors=None, iters=None, log=sys.stderr
) -> list[dict]:
    """Every zoo run (cached in ``OUT/zoo-runs/``), in the zoo's order, seeds inner; then the
    problems beyond the zoo (:data:`crosscurv.experiments.problems.zoo.BEYOND`) and the fresh
    ones (:data:`crosscurv.experiments.problems.zoo.FRESH`), at the same seeds."""
    from crosscurv.experiments.problems.zoo import BEYOND, FRESH, ZOO
    from crosscurv.experiments.studies.zoo_runs import cached_zoo_run

    rows = []
    for p in ZOO + BEYOND + FRESH:
        if problems and p.name not in problems:
            continue
        for c in factors or p.lr_factors:
            for seed in seeds:
                t = time.perf_counter()
                row = cached_zoo_run(p, c, seed, out, iters)
                rows.append(row)
                print(
                    f"certificates study: {p.name} c={c} seed={seed}: {row['status']} "
                    f"({time.perf_counter() - t:.1f} s)",
                    file=log,
                    flush=True,
                )
    return rows


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import certificates

    raise SystemExit(certificates())
