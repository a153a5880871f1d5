"""Cost of the protocol is linear in K: time(2K) / time(K) of ``run_protocol`` (target <= 2.1).

Theorem 3 (docs/protocol.md): the cumulative state obeys ``z_{k+1} = (I - eta H_JC^k) z_k + eta^2 u^k``,
so a run of ``K`` iterations needs ``O(K)`` HVPs, not the ``O(K^2)`` of
evaluating Theorem 3's unrolled sum ``z_K = eta^2 sum_j Phi_{K,j+1} M_S^j g_S^j``
afresh at every ``K``.  This script measures, in one process:

* wall time of the full protocol (streamed records and checkpoints in a
  temporary folder) for ``K`` and ``2K`` iterations on a small MLP, the two
  interleaved ``--repeats`` times after a warm-up run, the minimum of each
  kept (the least disturbed by other load);
* the number of Hessian-vector products of each run, counted exactly by
  wrapping ``crosscurv.numeric.hvp.hvp_batch`` where the batched engine looks it up and
  ``crosscurv.numeric.point.PointCurvature.hvp`` (the graph engine):
  at most ``1 + (4 + 2 n_M) K`` with ``n_M`` the number of products of the
  pattern's ``M_S v`` plan (:func:`crosscurv.numeric.curvature.masked_product_plan`; 4 at
  ``theta_JC^k``: Delta, z, y, power vector; ``n_M`` each for ``M_S g`` at
  ``theta_JC^k`` and ``theta_S^k``), i.e. linear in ``K``.

Usage::

    .venv/bin/python benchmarks/bench_cumulative.py [--iters 50] [--repeats 5] [--threads 1]
        [--task mlp --preset smoke] [--pattern gs] [--hvp auto|forward|reverse]

``--threads`` sets ``torch.set_num_threads`` (1 by default: on a small,
shared CPU, OpenMP threads spinning against other processes make timings of
small models meaningless).  Exit code 0 when the ratio is within the target,
1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TARGET = 2.1


class _Counter:
    """Counts products: wraps ``hvp_batch`` where the batched engine and ``masked_products``
    look it up, and ``PointCurvature.hvp`` (the one-graph engine)."""

    def __init__(self):
        import crosscurv.numeric.point as point
        from crosscurv.numeric.point import PointCurvature

        self.count = 0
        self._mods = (point,)
        self._orig = point.hvp_batch
        self._orig_point = PointCurvature.hvp

        def counted(loss, params, vs, *args, **kwargs):
            self.count += len(vs)
            return self._orig(loss, params, vs, *args, **kwargs)

        def counted_point(obj, *args, **kwargs):
            self.count += 1
            return self._orig_point(obj, *args, **kwargs)

        for m in self._mods:
            m.hvp_batch = counted
        PointCurvature.hvp = counted_point

    def restore(self):
        from crosscurv.numeric.point import PointCurvature

        for m in self._mods:
            m.hvp_batch = self._orig
        PointCurvature.hvp = self._orig_point


def _run(task, pattern, lr, iters, counter, hvp="auto"):
    from crosscurv.numeric.protocol import run_protocol

    before = counter.count
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = run_protocol(task, pattern, lr, iters, out_dir=os.path.join(tmp, "run"), hvp_method=hvp)
        el = time.perf_counter() - t0
    assert res.status == "complete", res.message
    return el, counter.count - before


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="mlp")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--pattern", default="gs")
    ap.add_argument("--iters", type=int, default=50, help="K (the second run has 2K)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hvp", default="auto", choices=("auto", "forward", "reverse"),
                    help="protocol HVP engine (auto: one retained graph per point)")
    args = ap.parse_args(argv)

    import torch

    from crosscurv.experiments.tasks import build_task
    from crosscurv.theory.patterns import parse_pattern

    if args.threads:
        torch.set_num_threads(args.threads)
        from crosscurv.numeric.threads import caller_chooses
        caller_chooses()  # the API calls below keep this count
    task, settings = build_task(args.task, args.preset, device="cpu", dtype=torch.float32)
    pattern = parse_pattern(args.pattern, task.n_blocks, task.block_names)
    lr = settings["lr"]
    counter = _Counter()
    try:
        _run(task, pattern, lr, 2, counter, args.hvp)  # warm-up: functorch tracing caches, allocator
        times = {args.iters: [], 2 * args.iters: []}
        hvps = {}
        for _ in range(args.repeats):
            for k in (args.iters, 2 * args.iters):
                el, n = _run(task, pattern, lr, k, counter, args.hvp)
                times[k].append(el)
                hvps[k] = n
    finally:
        counter.restore()
    K = args.iters
    t1, t2 = min(times[K]), min(times[2 * K])
    ratio = t2 / t1
    print(f"task {args.task} (preset {args.preset}, {task.num_params()} parameters, {task.n_blocks} blocks), "
          f"pattern {pattern.name}, lr {lr}, hvp {args.hvp}, torch threads {torch.get_num_threads()}, float32, CPU")
    print(f"{'K':>6} {'time_s (min)':>13} {'all runs':>30} {'it/s':>8} {'HVPs':>7} {'HVPs/it':>8}")
    for k in (K, 2 * K):
        runs = ", ".join(f"{t:.2f}" for t in times[k])
        print(f"{k:>6} {min(times[k]):>13.3f} {runs:>30} {k / min(times[k]):>8.2f} {hvps[k]:>7} {hvps[k] / k:>8.2f}")
    print(f"time(2K)/time(K) = {ratio:.3f} (target <= {TARGET}); HVPs(2K)/HVPs(K) = {hvps[2 * K] / hvps[K]:.3f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
