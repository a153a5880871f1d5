"""Time cost of parking the carried vectors between uses (``run_protocol(..., offload=True)``).

Runs the protocol on a built-in task with offloading off and on, interleaved ``--repeats`` times
(one thread), and reports the minimum wall time of each and their ratio (the records are the same
bit for bit). ``--park N`` times instead one park and one fetch of a parameter-sized vector
(:class:`crosscurv.numeric.offload.Offloaded`) against ``torch.save`` / ``torch.load(mmap=True)``.

Usage::

    .venv/bin/python benchmarks/bench_offload.py [--task fl] [--preset default] [--width W]
        [--iters 5] [--repeats 3] [--threads 1] [--park N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def park_costs(vector: dict, n: int) -> dict:
    """Median CPU seconds of one park and one fetch (each fetched tensor summed, so its pages are
    read) of ``vector``, by the store and by ``torch.save`` / ``torch.load(mmap=True)``."""
    import torch

    from crosscurv.numeric.offload import Offloaded

    store, tmp = Offloaded("cpu"), tempfile.mkdtemp()
    path = os.path.join(tmp, "v.pt")

    def save():
        torch.save(vector, path + ".new")
        os.replace(path + ".new", path)

    def read(tensors):
        return sum(float(t.sum()) for t in tensors.values())

    ways = {"store park": lambda: store.park("v", vector), "torch.save park": save,
            "store fetch": lambda: read(store.fetch("v")),
            "torch.load fetch": lambda: read(torch.load(path, mmap=True, weights_only=True))}
    times = {name: [] for name in ways}
    try:
        for _ in range(n + 1):  # the first round warms up
            for name, fn in ways.items():
                t = time.process_time()
                fn()
                times[name].append(time.process_time() - t)
    finally:
        store.close()
        for name in os.listdir(tmp):
            os.remove(os.path.join(tmp, name))
        os.rmdir(tmp)
    return {name: statistics.median(t[1:]) for name, t in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--task", default="fl")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--width", type=int, default=None,
                    help="fl only: ResNet-18 base width (default: the preset's)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--park", type=int, default=0, metavar="N",
                    help="time N parks and fetches by the store and by torch.save/torch.load "
                         "instead")
    args = ap.parse_args(argv)

    import torch

    from crosscurv.experiments.tasks import TASKS
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.theory.patterns import parse_pattern

    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    s = dict(TASKS[args.task].presets[args.preset])
    if args.width is not None:
        s["width"] = args.width
    task = TASKS[args.task].build(s, device=torch.device("cpu"), dtype=torch.float32, seed=0,
                                  data_path=None, model_path=None)
    if args.park:
        c = park_costs({k: v.detach().clone() for k, v in task.params.items()}, args.park)
        print(f"task {args.task} (preset {args.preset}, {task.num_params():,} parameters), CPU ms, "
              f"medians of {args.park}, {torch.get_num_threads()} thread(s)")
        print("  " + "; ".join(f"{name} {1e3 * t:.2f}" for name, t in c.items()))
        print(f"  torch.save / store park = {c['torch.save park'] / c['store park']:.2f}; "
              f"torch.load / store fetch = {c['torch.load fetch'] / c['store fetch']:.2f}")
        return 0
    pattern = parse_pattern("gs", task.n_blocks, task.block_names)
    times = {False: [], True: []}
    for _ in range(args.repeats):
        for off in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                res = run_protocol(task, pattern, s["lr"], args.iters, out_dir=os.path.join(tmp,
                    "run"), offload=off)
                times[off].append(time.perf_counter() - t0)
            assert res.status == "complete", res.message
    off, on = min(times[False]), min(times[True])
    print(f"task {args.task} (preset {args.preset}, {task.num_params():,} parameters), "
          f"K={args.iters}, {torch.get_num_threads()} thread(s), min of {args.repeats}")
    print(f"offload off: {off:.2f} s   on: {on:.2f} s   on/off = {on / off:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
