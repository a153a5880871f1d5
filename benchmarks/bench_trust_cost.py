"""What the error estimates and the converged extremes cost: the protocol with them against without,
in one run.

Per task, single-threaded CPU time, rounds interleaved: ``with`` is
:func:`crosscurv.numeric.protocol.run_protocol` as a user runs it (extreme eigenpairs of ``H_JC^k``
and every estimate's error columns); ``without`` the same run with neither (the norms the error
bounds read inside the scheme step are still taken). Printed per task and round: CPU seconds of the
first record and of the later iterations, and the ratios ``with / without``: ``steady`` (per later
iteration) and ``run of K = P`` (the whole run at the preset's ``K``). Target: both <= 1.3.

    python benchmarks/bench_trust_cost.py [--tasks mlp,fl,lora] [--preset default] [--iters 41]
        [--rounds 2]

Reports, never asserts (exit code 0).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)


@contextlib.contextmanager
def without_trust_columns():
    """The protocol with the extremes and the error columns switched off (module docstring,
    ``without``)."""
    from crosscurv.numeric import paper_estimates
    from crosscurv.numeric.records import ESTIMATES
    from crosscurv.numeric.update_rules.plain import PlainRule

    def extremes(ctx, k, at_j, theta_j, record, meas):
        r = ctx.est.rayleigh
        record["lambda_max"], record["lambda_min"], record["sharpness_hvps"] = math.nan, math.nan, 0
        meas["top"] = r
        meas["lam"] = abs(r)
        meas["c"] = abs(1.0 - ctx.lr * r)

    def error_columns(self, ctx, record, meas):
        for name in ESTIMATES:
            record[f"{name}_err"], record[f"{name}_cert"] = math.nan, 0.0

    saved = paper_estimates.extremes, PlainRule.error_columns
    paper_estimates.extremes, PlainRule.error_columns = extremes, error_columns
    try:
        yield
    finally:
        paper_estimates.extremes, PlainRule.error_columns = saved


def timed_run(task, pattern, lr, iters) -> tuple[float, list]:
    """CPU seconds to the first record, and of each later iteration (``k = 2..iters``)."""
    from crosscurv.numeric.protocol import run_protocol

    stamps = {}

    def progress(k, total):
        stamps[k] = time.process_time()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        run_protocol(task, pattern, lr, iters, out_dir=os.path.join(tmp, "run"), progress=progress)
    first = stamps[1] - t0
    return first, [stamps[k] - stamps[k - 1] for k in range(2, iters + 1) if k in stamps and k
                   - 1 in stamps]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", type=int, default=41,
                    help="K of each timed run (default 41: two refinements)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.estimates import SHARPNESS_EVERY
    from crosscurv.theory.patterns import parse_pattern

    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    print(f"{args.threads} thread(s), CPU time; K = {args.iters} per timed run (refinements "
          f"every {SHARPNESS_EVERY}); "
          f"{args.rounds} round(s), each one run with and one without, interleaved")
    for name in args.tasks.split(","):
        task, settings = load_task(name, args.preset)
        pattern = parse_pattern(str(settings.get("pattern") or task.default_pattern), task.n_blocks,
                                task.block_names)
        lr, preset_k = settings["lr"], int(settings.get("iters") or args.iters)
        print(f"\n{name} ({args.preset}, {task.num_params()} parameters, pattern "
              f"{pattern.name}, K = {preset_k})")
        steady, whole = [], []
        for r in range(args.rounds):
            f_with, its_with = timed_run(task, pattern, lr, args.iters)
            with without_trust_columns():
                f_without, its_without = timed_run(task, pattern, lr, args.iters)
            m_with, m_without = statistics.fmean(its_with), statistics.fmean(its_without)
            s = m_with / m_without
            # the whole run at the preset's K: the first record once, then K - 1 iterations at the
            # mean
            w = (f_with + (preset_k - 1) * m_with) / (f_without + (preset_k - 1) * m_without)
            steady.append(s)
            whole.append(w)
            print(f"  round {r + 1}: first record {f_with:.2f} s with, {f_without:.2f} s without; "
                  f"later iterations {m_with:.3f} s with, {m_without:.3f} s without (mean of "
                  f"{len(its_with)}): steady {s:.3f}, run of K = {preset_k}: {w:.3f}", flush=True)
        print(f"  median: steady {statistics.median(steady):.3f}, run of K = {preset_k}: "
              f"{statistics.median(whole):.3f} (target <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
