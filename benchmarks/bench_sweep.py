"""What running a grid through ``crosscurv sweep`` (Ray) costs and gains on this machine.

In one process, in this order:

1. Ray start-up: ``ray.init`` of a local instance (2 CPUs, no dashboard),
   the first no-op task (starts a worker process) and the mean round trip of
   20 further no-op tasks, then ``ray.shutdown``; before it, a control: the
   throughput of two single-threaded torch loops side by side against one
   (2.0 where two cores are free; on a shared machine, what is left of them);
2. the grid's runs one by one with the command line directly
   (``python -m crosscurv run ...`` in a subprocess each, ``OMP_NUM_THREADS``
   = ``--threads``): wall time per run;
3. the same grid as a sweep with 1 worker, then with 2 workers (``run_sweep``,
   each starting and stopping its own local Ray, ``--threads`` threads per run):
   Ray start-up, time from the first submission to the last result
   (``runs_s``), total, and the time the runs spent inside ``crosscurv run``.

Reported: the speedup of 2 workers over 1 (``runs_s`` and total), Ray's
per-run overhead in the sweep (``runs_s`` of 1 worker minus the time inside the
runs, per run) and the sweep's time per run against the command line's.
The machine's load average is printed before and after: on a shared machine
the numbers move with it.

Usage::

    .venv/bin/python benchmarks/bench_sweep.py [--task mlp] [--preset smoke] [--iters 40]
        [--seeds 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _noop(x):
    return x


def _matmuls(n: int) -> float:
    """A fixed CPU-bound torch loop on 1 thread; its wall time."""
    import torch

    torch.set_num_threads(1)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    a = torch.randn(300, 300, generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    for _ in range(n):
        a = (a @ a).tanh()
    return time.perf_counter() - t0


def ray_startup() -> dict:
    import logging

    import ray

    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    t1 = time.perf_counter()
    f = ray.remote(_noop)
    ray.get(f.remote(0))
    t2 = time.perf_counter()
    n = 20
    for i in range(n):
        ray.get(f.remote(i))
    t3 = time.perf_counter()
    # control: does this machine run two single-threaded torch loops side by side right now?
    m = ray.remote(_matmuls)
    ray.get([m.remote(1), m.remote(1)])
    t = time.perf_counter()
    ray.get(m.remote(400))
    one = time.perf_counter() - t
    t = time.perf_counter()
    ray.get([m.remote(400), m.remote(400)])
    two = time.perf_counter() - t
    t4 = time.perf_counter()
    ray.shutdown()
    t5 = time.perf_counter()
    return {"init_s": t1 - t0, "first_task_s": t2 - t1, "task_roundtrip_s": (t3 - t2) / n, "shutdown_s": t5 - t4,
            "control_speedup": 2 * one / two}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="mlp")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=4, help="runs in the grid (seeds 0..N-1)")
    ap.add_argument("--threads", type=int, default=1, help="threads per run (CLI and sweep alike)")
    args = ap.parse_args(argv)

    from crosscurv.experiments.sweep import run_sweep, spec_from_mapping

    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} CPUs")
    spec = spec_from_mapping({"task": args.task, "preset": args.preset, "iters": args.iters,
                              "seed": list(range(args.seeds))})
    start = ray_startup()
    print(f"Ray start-up: init {start['init_s']:.2f} s, first task (worker start) {start['first_task_s']:.2f} s, "
          f"no-op round trip {1e3 * start['task_roundtrip_s']:.2f} ms, shutdown {start['shutdown_s']:.2f} s")
    print(f"control: 2 single-threaded torch loops side by side in 2 Ray tasks against one: "
          f"{start['control_speedup']:.2f}x throughput (2.0 on 2 free cores)")

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        cli = []
        for s in range(args.seeds):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "crosscurv", "run", args.task, "--preset", args.preset,
                            "--iters", str(args.iters), "--seed", str(s), "--out", os.path.join(tmp, f"cli{s}")],
                           check=True, env=env, capture_output=True)
            cli.append(time.perf_counter() - t0)
        cli_total = sum(cli)
        print(f"CLI one by one: {args.seeds} runs in {cli_total:.1f} s ({cli_total / args.seeds:.2f} s per run)")
        res = {}
        for workers in (1, 2):
            r = run_sweep(spec, os.path.join(tmp, f"sweep{workers}"), workers=workers, threads=args.threads,
                          progress=False)
            assert r.exit_code == 0, [x["error"] for x in r.incomplete]
            inside = sum(x["seconds"] for x in r.rows)
            res[workers] = (r.timing, inside)
            t = r.timing
            print(f"sweep, {workers} worker(s): Ray start-up {t['ray_start_s']:.1f} s, runs {t['runs_s']:.1f} s, "
                  f"total {t['total_s']:.1f} s; inside crosscurv run {inside:.1f} s")
    (t1, in1), (t2, _) = res[1], res[2]
    print(f"speedup 2 workers / 1: runs {t1['runs_s'] / t2['runs_s']:.2f}x, total {t1['total_s'] / t2['total_s']:.2f}x")
    print(f"Ray per-run overhead (1 worker, runs_s - time inside the runs): {(t1['runs_s'] - in1) / args.seeds:.2f} s")
    print(f"sweep time per run (1 worker, runs_s / N) {t1['runs_s'] / args.seeds:.2f} s vs CLI "
          f"{cli_total / args.seeds:.2f} s: ratio {t1['runs_s'] / cli_total:.2f}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
