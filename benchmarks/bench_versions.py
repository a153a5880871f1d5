"""Per-iteration CPU time of ``crosscurv run`` from two checkouts: whole processes, interleaved.

Each measurement is one ``python -m experiments run TASK --preset P --iters N
--out TMP`` process, as a user runs it (default checkpoint cadence, default
offloading, the CLI's own start-up), with ``OMP_NUM_THREADS`` threads, timed
by the operating system's account of that process (user + system CPU seconds,
``os.wait4``).  The fixed cost (imports, data, the first checkpoint, the last
one) cancels in

    per iteration = (cpu(N2) - cpu(N1)) / (N2 - N1),

taken within one round, where a round runs the four processes ``before N1,
after N1, before N2, after N2`` (the order of the two checkouts alternates from
round to round, so that machine load hits both alike).  Reported: the
per-iteration CPU time of each checkout (median over rounds), the ratio
``before / after`` of each round and its median.

Run (``--before``: another crosscurv checkout, for example one exported with
``git archive REV | tar -x -C DIR`` or a ``git worktree``)::

    python benchmarks/bench_versions.py --before DIR [--after DIR] [--task mlp] [--preset default]
        [--iters 5,35] [--rounds 3] [--threads 1]

Reports, never asserts (exit code 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cpu(code: str, task: str, preset: str, iters: int, threads: int, extra=()) -> float:
    """CPU seconds (user + system) of one ``crosscurv run`` process from checkout ``code``."""
    env = dict(os.environ, PYTHONPATH=code, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "experiments", "run", task, "--preset", preset, "--iters", str(iters),
               "--out", os.path.join(tmp, "run"), *extra]
        proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (in {code}) exited {proc.returncode}: {err.strip().splitlines()[-1:]}")
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the other crosscurv checkout")
    ap.add_argument("--after", default=HERE, help="this checkout by default")
    ap.add_argument("--task", default="mlp")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", default="5,35", help="N1,N2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    n1, n2 = (int(x) for x in args.iters.split(","))
    codes = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    print(f"{args.task} --preset {args.preset}: per iteration = (cpu({n2}) - cpu({n1})) / {n2 - n1}, whole "
          f"processes, OMP_NUM_THREADS={args.threads}, {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    for name, code in codes.items():
        print(f"  {name}: {code}")
    per = {name: [] for name in codes}
    ratios = []
    for r in range(args.rounds):
        order = list(codes) if r % 2 == 0 else list(reversed(codes))
        cpu = {}
        for n in (n1, n2):
            for name in order:
                cpu[(name, n)] = run_cpu(codes[name], args.task, args.preset, n, args.threads)
        it = {name: (cpu[(name, n2)] - cpu[(name, n1)]) / (n2 - n1) for name in codes}
        for name in codes:
            per[name].append(it[name])
        ratios.append(it["before"] / it["after"])
        print(f"  round {r + 1}: before {it['before']:.3f} s/iteration, after {it['after']:.3f} s/iteration, "
              f"before / after {ratios[-1]:.3f} (fixed cost before {cpu[('before', n1)] - n1 * it['before']:.1f} s, "
              f"after {cpu[('after', n1)] - n1 * it['after']:.1f} s); load average {os.getloadavg()[0]:.1f}",
              flush=True)
    print(f"median: before {statistics.median(per['before']):.3f} s/iteration, after "
          f"{statistics.median(per['after']):.3f} s/iteration; before / after: median {statistics.median(ratios):.3f} "
          f"(rounds {', '.join(f'{x:.3f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
