"""Cost of ``crosscurv advise`` against running the candidates' trajectories with the protocol.

For each built-in task (a preset, CPU, the thread count of the process; run it with
``OMP_NUM_THREADS=1``) and ``P`` candidates (JC and up to ``P - 1`` others, the first of
``gs``, GS reversed, ``chain``, ``2<-1`` that are distinct schemes for the task), times in one
process, alternating, ``rounds`` times:

* ``advise``: :func:`numeric.advice.advise` over the ``P`` candidates (one JC trajectory);
* ``protocol``: :func:`numeric.protocol.run_protocol` once per non-JC candidate (each run is the JC
  and the candidate's trajectory with the protocol's estimates and measured gap), in memory.

Prints per task the median seconds of both and their ratio (target <= 0.5).

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_advise.py --preset smoke --iters 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def candidates(task, p: int) -> list[str]:
    from theory.patterns import as_pattern

    n = task.n_blocks
    out, seen = ["jc"], {frozenset()}
    for s in ["gs", "gs:" + ",".join(str(b) for b in range(n, 0, -1)), "chain", "2<-1"]:
        pairs = as_pattern(s, n).pairs
        if pairs not in seen and len(out) < p:
            seen.add(pairs)
            out.append(s)
    return out


def main(argv=None) -> None:
    from experiments.loading import load_task
    from numeric.advice import advise
    from numeric.protocol import run_protocol

    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--p", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"threads {torch.get_num_threads()}, preset {a.preset}, K = {a.iters}, P = {a.p}")
    print("| task | blocks | candidates | advise s | protocol s | ratio |")
    print("|---|---|---|---|---|---|")
    for name in a.tasks.split(","):
        task, settings = load_task(name, a.preset, device=torch.device("cpu"))
        cands = candidates(task, a.p)
        lr = settings["lr"]
        ta, tp = [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            advise(task, lr, a.iters, cands)
            ta.append(time.perf_counter() - t)
            t = time.perf_counter()
            for c in cands[1:]:
                run_protocol(task, c, lr, a.iters)
            tp.append(time.perf_counter() - t)
        ma, mp = statistics.median(ta), statistics.median(tp)
        print(f"| {name} | {task.n_blocks} | {';'.join(cands)} | {ma:.2f} | {mp:.2f} | {ma / mp:.2f} |", flush=True)


if __name__ == "__main__":
    main()
