"""The one-step predictor along JC, beside a finished run: Theorem 1's ``eta^2 C_S`` at each JC
iterate.

    one_step_k = eta^2 C_S(theta_JC^{k-1}),   C_S = g^T M_S g,   k = 1..K,

Table 1's one-step baseline. Records do not hold it, so the JC trajectory is replayed from the
run's settings (:meth:`crosscurv.experiments.runs.RunDescription.from_summary`) into
``RUN/one_step.csv`` (``k, one_step, loss_jc``; the replayed loss is checked against the recorded
one); :func:`read_one_step` gives the column back to
:func:`crosscurv.experiments.reports.table.load_run`. Complete files are kept::

    python -m crosscurv.experiments.reports.one_step_along_jc reports/runs/mlp reports/sweeps/seeds
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .one_step_sidecar import FIELDS, SIDECAR, read_one_step, replay_drift

__all__ = ["SIDECAR", "read_one_step", "replay_drift", "replay", "replay_runs", "run_dirs"]

def replay(run_dir: str | os.PathLike, log=print) -> float:
    """Replay the JC trajectory of the run in ``run_dir`` and write :data:`SIDECAR`.

    Returns the largest ``|loss_jc replayed - loss_jc recorded| / |loss_jc recorded|`` over the
    records (``0`` when the replay reproduces the run's JC losses bit for bit).

    Raises:
        crosscurv.theory.errors.InputError: not a run folder, a run with an optimizer or block step
        sizes, or one whose task cannot be rebuilt.
    """
    import torch

    from crosscurv.experiments.reports.table import load_run
    from crosscurv.experiments.runs import RunDescription, load
    from crosscurv.experiments.tasks.errors import DataError
    from crosscurv.numeric.curvature import masked_product_plan
    from crosscurv.numeric.float64_sums import dot64
    from crosscurv.numeric.protocol import choose_engine
    from crosscurv.numeric.steps import check_pattern

    run = load_run(run_dir)
    s = run.summary.get("settings") or {}
    opt = s.get("optimizer")
    if (opt.get("name") if isinstance(opt, dict) else opt or "sgd") != "sgd" or s.get("block_lr"):
        raise DataError(
            f"{run_dir}: the one-step baseline is defined for the paper's plain steps only"
        )
    if "pattern_spec" not in s or "lr" not in s:
        raise DataError(
            f"{run_dir}: summary.json lacks the pattern or learning rate needed to replay the run"
        )
    task, _, _, _ = load(
        RunDescription.from_summary(run.summary)
    )  # the run's task, preset, seed, dtype
    pattern = check_pattern(task, s["pattern_spec"])
    used = (run.summary.get("hvp") or {}).get("used") or s.get("hvp", "auto")
    engine = choose_engine(task, used if used in ("reverse", "forward", "rof") else "auto", None)
    plan = masked_product_plan(task, pattern, "auto")
    lr, K = float(s["lr"]), run.iters
    recorded = run.columns["loss_jc"]
    theta = {n: p.detach().clone() for n, p in task.params.items()}
    rows, worst, t0 = [], 0.0, time.time()
    prev = math.nan
    for k in range(K + 1):
        at = engine.point(task.loss, theta)
        loss = float(at.value)
        g = at.grad
        if k >= 1:
            rows.append((k, prev, loss))
            worst = max(worst, abs(loss - recorded[k - 1]) / abs(recorded[k - 1]))
        if k < K:
            prev = lr * lr * dot64(g, at.masked(plan, g))  # eta^2 C_S at theta_JC^k, Theorem 1
            with torch.no_grad():
                theta = {n: theta[n] - lr * g[n] for n in theta}  # the protocol's JC step
        at.release()
        del at, g
    tmp = Path(run_dir) / (SIDECAR + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        for k, one, loss in rows:
            w.writerow([k, repr(one), repr(loss)])
    os.replace(tmp, Path(run_dir) / SIDECAR)
    log(
        f"{run_dir}: {K} iterations in {time.time() - t0:.0f} s; replayed loss_jc within "
        f"{worst:.2g} (relative) of the records"
    )
    return worst


def run_dirs(paths) -> list[Path]:
    """The run folders named by ``paths``: a folder with ``records.csv``, or a sweep folder's
    ``runs/*``."""
    out = []
    for p in map(Path, paths):
        if (p / "records.csv").is_file():
            out.append(p)
        elif (p / "runs").is_dir():
            out += sorted(d for d in (p / "runs").iterdir() if (d / "records.csv").is_file())
    return out


def _complete(run_dir: Path) -> bool:
    from crosscurv.experiments.reports.table import load_run

    run = load_run(run_dir)
    col = read_one_step(run_dir, run.columns["k"])
    return col is not None and len(col) == run.iters and not np.isnan(col[: run.iters - 1]).any()


def replay_runs(paths: Sequence[str], fresh: bool = False) -> None:
    """:func:`replay` every run folder of ``paths`` (:func:`run_dirs`) whose :data:`SIDECAR` is not
    complete (``fresh``: every one), with one intra-op thread; a run committed twice (the same
    records and settings) is replayed once and its file copied.

    Raises:
        crosscurv.theory.errors.InputError: no run folder among ``paths``, or a run that cannot be
        replayed (one line).
    """
    import torch

    from crosscurv.theory.errors import InputError

    torch.set_num_threads(1)  # the studies' thread count: one fixed order of every reduction
    dirs = run_dirs(paths)
    if not dirs:
        raise InputError("no run folder among the paths given")
    # the same run committed twice (same records and settings): replayed once, the file copied
    done: dict = {}
    for d in dirs:
        key = _identity(d)
        if not fresh and _complete(d):
            print(f"{d}: {SIDECAR} complete, kept")
            done.setdefault(key, d)
            continue
        if key in done:
            shutil.copyfile(done[key] / SIDECAR, d / SIDECAR)
            print(f"{d}: the same run as {done[key]} (records and settings): {SIDECAR} copied")
            continue
        replay(d)
        done[key] = d


def _identity(run_dir: Path) -> tuple:
    """What fixes a run's replay: its records' bytes and its settings."""
    settings = json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("settings")
    digest = hashlib.sha256((run_dir / "records.csv").read_bytes()).hexdigest()
    return digest, json.dumps(settings, sort_keys=True)


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import one_step_along_jc

    sys.exit(one_step_along_jc())
