"""bench_protocol.py, as a user runs it: its breakdown wraps the primitives the protocol really
calls.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_run_times_every_part_of_an_iteration():
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_protocol.py", "--tasks", "mlp", "--preset", "smoke",
         "--iters", "4", "--repeats", "1", "--offload", "on"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ,
                                                                        OMP_NUM_THREADS="1"))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: the 1.1 target missed, a measurement
    line = next(x for x in proc.stdout.splitlines() if "breakdown of one iteration" in x)
    parts = dict(re.findall(r"([a-zA-Z_ ]+?) ([0-9.]+) \(", line.split(":", 1)[1]))
    parts = {k.strip(" ;"): float(v) for k, v in parts.items()}
    for part in ("points", "masked M_S products", "full products", "scheme step", "segment gap"):
        assert parts[part] > 0, (part, line)  # each wrapped primitive is called by the iteration
    rest = float(re.search(r"; rest (-?[0-9.]+) \(", line).group(1))
    split = next(x for x in proc.stdout.splitlines() if "rest, the body's own work" in x)
    store, sums, other = map(float, re.findall(r"(?:store|float64 sums|records) (-?[0-9.]+)",
                                               split))
    # the smoke MLP is offloaded by the default policy: both are called
    assert store > 0 and sums > 0, split
    assert abs(store + sums + other - rest) <= 0.011, (split, rest)  # the split adds up to the rest
    in_run = next(x for x in proc.stdout.splitlines()
                  if "in the run: one iteration / its timed parts" in x)
    # the body's own work is > 0
    assert float(re.search(r"= ([0-9.]+) \(rounds", in_run).group(1)) > 1.0, in_run
    # the floor of the rest: the two float64 step remainders, the run's parks and reductions, each
    # timed alone
    floor = next(x for x in proc.stdout.splitlines() if "floor of the rest" in x)
    remainders, parks, park, reductions, reduction, total, above = map(float, re.search(
        r"remainders ([0-9.]+) \+ ([0-9.]+) parks of a parameter-sized vector x ([0-9.]+) \+ "
        r"([0-9.]+) float32 "
        r"reductions over the parameters x ([0-9.]+) = ([0-9.]+) gradients; the rest above "
        r"it (-?[0-9.]+)",
        floor).groups())
    assert remainders > 0 and park > 0 and reduction > 0, floor
    assert parks >= 1, floor  # offload on: the body parks its carried vectors
    assert reductions >= 10, floor  # the estimates' dot products and the error estimates' norms
    # printed to 2 and 3 digits (the counts to 1)
    slack = 0.01 + (parks + reductions) * 0.0005 + 0.05 * (park + reduction)
    assert abs(remainders + parks * park + reductions * reduction - total) <= slack, floor
    assert abs(total + above - rest) <= 0.011, (floor, rest)
