"""Seconds per protocol iteration with 1 and with 2 intra-op threads, and what ``--threads auto``
picks.

Per task: ``run_protocol`` for ``--iters`` iterations with 1 thread and with ``--threads``,
interleaved ``--repeats`` times; wall time per iteration (minimum over repeats) and the ratio, with
the load average. Before the runs, ``--threads auto``'s pick
(:func:`crosscurv.experiments.thread_count.fastest_threads`) and whether it was the faster; after
the table, whether the records of the two counts are equal bit for bit.

Usage::

    python benchmarks/bench_threads.py [--tasks mlp,fl] [--iters 4] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _first_difference(a: list, b: list):
    """The first ``k`` (from 1) whose records differ in any value (``nan`` equal to ``nan``), or
    ``None`` when the two runs' records are equal bit for bit."""
    for k, (ra, rb) in enumerate(zip(a, b), start=1):
        if any(x != y and not (x != x and y != y) for x, y in zip(ra, rb)):
            return k
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--tasks", default="mlp,fl")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="the count compared with 1 (default 2)")
    args = ap.parse_args(argv)

    import torch

    from crosscurv.experiments.tasks import TASKS
    from crosscurv.experiments.thread_count import fastest_threads
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.records import FIELDS
    from crosscurv.theory.patterns import parse_pattern

    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; wall s per "
          f"iteration, min of {args.repeats}, K = {args.iters}")
    print()
    n = args.threads
    print(f"| task | parameters | 1 thread (s/it) | {n} threads (s/it) | {n} / 1 | auto: gradient "
          f"with 1 / {n} (s) | auto picks | the faster per iteration |")
    print("|---|---|---|---|---|---|---|---|")
    same: dict = {}
    for name in args.tasks.split(","):
        s = dict(TASKS[name].presets[args.preset])
        task = TASKS[name].build(s, device=torch.device("cpu"), dtype=torch.float32, seed=0,
                                 data_path=None, model_path=None)
        pattern = parse_pattern("gs", task.n_blocks, task.block_names)
        pick, grad_s = fastest_threads(task.loss, task.params, counts=[1, n])
        times = {1: [], args.threads: []}
        records: dict = {}
        for _ in range(args.repeats):
            for n in (1, args.threads):
                torch.set_num_threads(n)
                from crosscurv.numeric.threads import caller_chooses
                caller_chooses()  # the API calls below keep this count
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    res = run_protocol(task, pattern, s["lr"], args.iters, out_dir=os.path.join(
                        tmp, "run"))
                    times[n].append((time.perf_counter() - t0) / args.iters)
                assert res.status == "complete", res.message
                records[n] = [tuple(r[f] for f in FIELDS) for r in res.records]
        one, more = min(times[1]), min(times[n])
        faster = n if more < one else 1
        print(f"| {name} | {task.num_params():,} | {one:.3f} | {more:.3f} | {more / one:.2f} | "
              f"{grad_s[1]:.4f} / {grad_s[n]:.4f} | {pick} | {faster} "
              f"({'agrees' if pick == faster else 'differs'}) |", flush=True)
        same[name] = _first_difference(records[1], records[n])
    print()
    for name, k in same.items():
        print(f"{name}: records with 1 and {n} threads "
              + ("equal bit for bit" if k is None else f"differ from k = {k}"))
    print()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
