"""Per-iteration CPU time of ``crosscurv run`` from two checkouts: whole processes, interleaved.

Each measurement is one ``python -m crosscurv run TASK --preset P --iters N
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

``--same-work`` adds a third arm: the ``--after`` checkout with the measured
gap's segment switched off (``crosscurv.numeric.gap.SegmentGap.interior`` returns at once
and ``result`` gives ``(0, 0)``, patched in the process before the CLI starts),
that is the work the protocol did before it measured the gap along the segment
``theta_JC^k -> theta_S^k`` (three gradients per iteration where ``loss_s -
loss_jc`` alone does not suffice).  Its records are not valid; only its time is.

Run (``--before``: another crosscurv checkout, for example one exported with
``git archive REV | tar -x -C DIR`` or a ``git worktree``)::

    python benchmarks/bench_versions.py --before DIR [--after DIR] [--task mlp] [--preset default]
        [--iters 5,35] [--rounds 3] [--threads 1] [--same-work]

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

# the CLI with the measured gap's segment switched off (--same-work)
WITHOUT_GAP = ("import sys, crosscurv.numeric.gap as g; g.SegmentGap.interior = lambda self, *a: None; "
               "g.SegmentGap.result = lambda self: (0.0, 0.0); from crosscurv.experiments.cli import main; "
               "sys.argv[0] = 'crosscurv'; raise SystemExit(main())")


def run_cpu(code: str, task: str, preset: str, iters: int, threads: int, extra=(), without_gap: bool = False) -> float:
    """CPU seconds (user + system) of one ``crosscurv run`` process from checkout ``code``."""
    env = dict(os.environ, PYTHONPATH=code, OMP_NUM_THREADS=str(threads))
    entry = ["-c", WITHOUT_GAP] if without_gap else ["-m", "crosscurv"]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, *entry, "run", task, "--preset", preset, "--iters", str(iters),
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
    ap.add_argument("--same-work", action="store_true",
                    help="also time the after checkout without the measured gap's segment (module docstring)")
    args = ap.parse_args(argv)
    n1, n2 = (int(x) for x in args.iters.split(","))
    codes = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    if args.same_work:
        codes["same work"] = codes["after"]
    print(f"{args.task} --preset {args.preset}: per iteration = (cpu({n2}) - cpu({n1})) / {n2 - n1}, whole "
          f"processes, OMP_NUM_THREADS={args.threads}, {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    for name, code in codes.items():
        print(f"  {name}: {code}")
    per = {name: [] for name in codes}
    ratios = {name: [] for name in codes if name != "before"}
    for r in range(args.rounds):
        order = list(codes) if r % 2 == 0 else list(reversed(codes))
        cpu = {}
        for n in (n1, n2):
            for name in order:
                cpu[(name, n)] = run_cpu(codes[name], args.task, args.preset, n, args.threads,
                                         without_gap=name == "same work")
        it = {name: (cpu[(name, n2)] - cpu[(name, n1)]) / (n2 - n1) for name in codes}
        for name in codes:
            per[name].append(it[name])
        for name in ratios:
            ratios[name].append(it["before"] / it[name])
        times = ", ".join(f"{name} {it[name]:.3f}" for name in codes)
        fixed = ", ".join(f"{name} {cpu[(name, n1)] - n1 * it[name]:.1f}" for name in codes)
        shown = ", ".join(f"before / {name} {ratios[name][-1]:.3f}" for name in ratios)
        print(f"  round {r + 1}: s/iteration {times}; {shown} (fixed cost s: {fixed}); "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
    times = ", ".join(f"{name} {statistics.median(per[name]):.3f}" for name in codes)
    print(f"median s/iteration: {times}")
    for name, rs in ratios.items():
        print(f"before / {name}: median {statistics.median(rs):.3f} (rounds {', '.join(f'{x:.3f}' for x in rs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
