"""The certificates study: precision, coverage and regret of every certificate on the problem zoo.

``python -m crosscurv.experiments.studies.certificates --out reports/certificates`` (``make
certificates-study``) runs every zoo problem (:data:`crosscurv.experiments.problems.zoo.ZOO`) at
each of its learning rates and seeds (:func:`crosscurv.experiments.studies.zoo_runs.cached_zoo_run`,
resumable), then writes ``reports/certificates.md``: per problem and learning rate, for the
certificate of :mod:`crosscurv.numeric.certificate` and for the ones it replaces, precision
(certified iterations whose certified scheme ties the measured best), coverage (certified share of
the decided iterations) and the advised scheme's regret (:mod:`crosscurv.numeric.regret`).  The
safety factor is chosen on the zoo's tuning half and reported on the held-out half.
"""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["collect", "main"]

SEEDS = (0, 1, 2)


def collect(
    out: str, seeds=SEEDS, problems=None, factors=None, iters=None, log=sys.stderr
) -> list[dict]:
    """Every zoo run (cached in ``OUT/zoo-runs/``), in the zoo's order, seeds inner; then the
    problems beyond the zoo (:data:`crosscurv.experiments.problems.zoo.BEYOND`, first seed only)."""
    from crosscurv.experiments.problems.zoo import BEYOND, ZOO
    from crosscurv.experiments.studies.zoo_runs import cached_zoo_run

    rows = []
    for p in ZOO + BEYOND:
        if problems and p.name not in problems:
            continue
        for c in factors or p.lr_factors:
            for seed in seeds if p.half != "beyond" else seeds[:1]:
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m crosscurv.experiments.studies.certificates",
        description=__doc__.split("\n\n")[0],
    )
    ap.add_argument("--out", default="runs/certificates", help="folder of the cached runs")
    ap.add_argument("--report", default="reports/certificates.md", help="the report written")
    ap.add_argument(
        "--collect-only",
        action="store_true",
        help="run (or read back) the runs, write nothing else",
    )
    args = ap.parse_args(argv)
    rows = collect(args.out)
    if args.collect_only:
        return 0
    from crosscurv.experiments.studies.certificates_report import write_report

    write_report(rows, args.report, "make certificates-study")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
