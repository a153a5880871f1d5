"""The optimizer studies: does the JC/GS winner move, and do the generalized estimates follow the
gap?

    python -m crosscurv.experiments.studies.optimizers.runner run [--out DIR] [--seeds 0,1]
        [--iters K] [--only NAMES]
    python -m crosscurv.experiments.studies.optimizers.runner report [--runs DIR] [--out reports]

``run`` performs every incomplete run of :data:`STUDIES` (:func:`crosscurv.experiments.runs.run`,
one thread, resumed, interleaved by seed); ``report`` copies each run's records and summary into
``OUT/optimizers/runs/<task>/<variant>/seed<s>`` and writes ``OUT/optimizers.md`` from them: per
study and variant the winner timeline against plain ``sgd`` of the same seed, the switch points and
the Table 1 rows of the generalized estimates. Studies: ``lora_lrplus`` (LoRA+ ratios ``eta_B /
eta_A`` in {1, 4, 16}), ``fl_momentum`` (heavy ball 0.9), ``lora_adam`` (Adam at ``lr = 1e-3``).
"""

from __future__ import annotations

import json
import os
import sys
import time

from crosscurv.experiments.studies.optimizers.plan import (  # noqa: F401
    ITERS, RUNS_DIR, SEEDS, STUDIES, OptimizerStudy, StudyVariant, run_dir)


def _status(path: str, iters: int) -> str:
    """``"complete"`` (K records), ``"partial"`` (a checkpoint to resume from) or ``"missing"``."""
    summ = os.path.join(path, "summary.json")
    if os.path.isfile(summ):
        try:
            with open(summ, encoding="utf-8") as fh:
                s = json.load(fh)
        except (OSError, ValueError):
            s = {}
        if s.get("status") in ("complete", "diverged") and s.get("settings", {}).get(
                "iters") == iters:
            return "complete"
    if os.path.isfile(os.path.join(path, "checkpoint.pt")):
        return "partial"
    return "missing"


def planned(seeds, only=None):
    """``[(task, variant, seed)]`` in the order ``run`` performs them (seed-major, each pair once).
    """
    out, seen = [], set()
    for seed in seeds:
        for st in STUDIES:
            if only and st.name not in only:
                continue
            for v in st.variants:
                key = (st.task, v.label, seed)
                if key not in seen:
                    seen.add(key)
                    out.append(key + (v,))
    return out


def description(task: str, variant: StudyVariant, seed: int, iters: int):
    """The :class:`crosscurv.experiments.runs.RunDescription` of ``variant`` on ``task`` (default
    preset) for ``seed`` and ``K = iters``, one intra-op thread."""
    from crosscurv.experiments import runs

    return runs.RunDescription(task, preset="default", seed=seed, iters=iters, checkpoint_every=5,
                               optimizer=variant.optimizer, block_lr=variant.block_lr,
                               lr=variant.lr, threads=runs.DEFAULT_THREADS)


def run_all(out: str, seeds, iters: int, only=None) -> int:
    """Run (or resume) every planned run; returns the number of runs that did not complete (bad
    input and divergence are reported and the campaign goes on; an interrupt stops it, the run
    resumable).
    """
    from crosscurv.experiments import runs
    from crosscurv.theory.errors import InputError

    failed = 0
    for task, label, seed, v in planned(seeds, only):
        path = run_dir(out, task, v, seed)
        state = _status(path, iters)
        if state == "complete":
            continue
        d = description(task, v, seed, iters)
        resume = state == "partial"
        print(f"[optimizer_studies] run {' '.join(d.to_args())} --out "
              f"{path}{' --resume' if resume else ''}",
              file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        progress = runs.Progress()
        try:
            result, _ = runs.run(d, path, resume=resume, progress=progress)
            code = result.exit_code
        except InputError as exc:
            print(f"[optimizer_studies] error: {exc}", file=sys.stderr, flush=True)
            code = 2
        finally:
            progress.close()
        print(f"[optimizer_studies] exit {code} after {time.perf_counter() - t0:.0f} s: {path}",
              file=sys.stderr, flush=True)
        failed += code not in (0, 3)
    return failed


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import optimizer_runner

    raise SystemExit(optimizer_runner())
