"""The zoo's runs: for one problem, seed and learning rate, advise and every candidate's protocol
run.

:func:`zoo_run` advises (:func:`crosscurv.numeric.advice.advise`, in memory, default candidates) and
runs every non-JC candidate beside JC (:func:`crosscurv.numeric.protocol.run_protocol`, in memory),
and keeps what the certificates are measured from: the advice rows and its one-step check at
``theta^0``, and every candidate's record columns.  :func:`cached_zoo_run` reads a finished run back
from ``OUT/zoo-runs/`` (JSON, written atomically), so an interrupted study resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["zoo_run", "cached_zoo_run", "run_path", "RECORD_COLUMNS"]

#: the record columns kept per candidate
RECORD_COLUMNS = (
    "k",
    "loss_jc",
    "loss_s",
    "gap",
    "gap_err",
    "recursive",
    "cumulative",
    "jc_only",
    "recursive_err",
    "cumulative_err",
    "jc_only_err",
    "recursive_cert",
    "cumulative_cert",
    "jc_only_cert",
    "lambda_max",
    "sharpness",
)


def zoo_run(problem, c: float, seed: int = 0, iters: int | None = None) -> dict:
    """Advise and run every candidate of ``problem`` (a
    :class:`crosscurv.experiments.problems.zoo.ZooProblem`) at ``lr = c / lambda_max(H^0)`` for
    ``iters`` (default ``problem.iters``) iterations.

    Returns:
        ``{"problem", "half", "seed", "c", "lr", "lambda_max0", "iters", "advice", "records",
        "status", "cpu_s"}``: ``advice`` is :meth:`crosscurv.numeric.advice.Advice.to_json`,
        ``records`` ``{candidate: {column: [values]}}`` (:data:`RECORD_COLUMNS`; floats, ``inf`` and
        NaN kept, as Python's ``json`` writes them).
    """
    from crosscurv.experiments.problems.zoo import lambda_max0
    from crosscurv.numeric.advice import advise, parse_candidates
    from crosscurv.numeric.protocol import run_protocol

    t0 = time.process_time()
    task = problem.task(seed)
    lam = lambda_max0(task, seed)
    lr = float(c) / lam
    K = int(iters or problem.iters)
    adv = advise(task, lr, K, seed=seed)
    records, status = {}, adv.status
    for name, pattern in parse_candidates(task, adv.candidates):
        if pattern.is_jacobi:
            continue
        res = run_protocol(task, pattern, lr, K, seed=seed)
        if res.status != "complete":
            status = f"{name}: {res.status}"
        records[name] = {col: [r[col] for r in res.records] for col in RECORD_COLUMNS}
    return {
        "problem": problem.name,
        "half": problem.half,
        "seed": seed,
        "c": float(c),
        "lr": lr,
        "lambda_max0": lam,
        "iters": K,
        "advice": adv.to_json(),
        "records": records,
        "status": status,
        "cpu_s": time.process_time() - t0,
    }


def run_path(out: str, name: str, seed: int, c: float, iters: int) -> str:
    return os.path.join(out, "zoo-runs", f"{name}-seed{seed}-c{c!r}-K{iters}.json")


def cached_zoo_run(problem, c: float, seed: int, out: str, iters: int | None = None) -> dict:
    """:func:`zoo_run`, read back from ``OUT/zoo-runs/`` when it was finished before (written
    atomically)."""
    from crosscurv.numeric.records import atomic_write_text

    K = int(iters or problem.iters)
    path = run_path(out, problem.name, seed, c, K)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    row = zoo_run(problem, c, seed, K)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_text(path, json.dumps(row, allow_nan=True))
    return row
