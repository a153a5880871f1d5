"""``--threads auto``: the intra-op thread count that computes a run's own gradient fastest on this
machine.

Each count of :func:`candidates` times one gradient at the initial parameters (best of ``repeats``
after a warm-up); :func:`choose` keeps the fewest threads unless more are at least :data:`MARGIN`
faster. A resumed run takes the count it recorded; the default stays one thread
(:mod:`crosscurv.experiments.cli.threads`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

__all__ = ["AUTO", "AUTO_SOURCE", "MARGIN", "candidates", "choose", "fastest_threads"]

#: The ``--threads`` value that asks for the measurement.
AUTO = "auto"
#: ``settings["threads_source"]`` of a run that measured its count (its seconds per gradient by
#: count:
#: ``settings["threads_auto_seconds"]``).
AUTO_SOURCE = "--threads auto"
#: More threads are chosen only when their gradient takes at most ``1 - MARGIN`` of the time of the
#: best
#: smaller count.
MARGIN = 0.05


def candidates(cpus: int | None = None) -> list[int]:
    """``[1, 2, 4, ...]`` up to ``cpus`` (default: the CPUs this process may run on), and ``cpus``
    itself."""
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    out, n = [], 1
    while n < cpus:
        out.append(n)
        n *= 2
    return out + [max(1, int(cpus))]


def choose(seconds: Mapping[int, float]) -> int:
    """The count to use from ``{threads: seconds per gradient}``: going up from the fewest threads,
    a count replaces the best so far only if it is at least :data:`MARGIN` faster."""
    best = None
    for n in sorted(seconds):
        if best is None or seconds[n] <= (1.0 - MARGIN) * seconds[best]:
            best = n
    if best is None:
        raise ValueError("no thread count was timed")
    return best


def fastest_threads(loss: Callable, params: Mapping, counts: list[int] | None = None,
                    repeats: int = 3) -> tuple[int, dict[int, float]]:
    """``(threads, {count: seconds})``: each count of ``counts`` (default :func:`candidates`) timed
    on one gradient of ``loss`` at ``params`` (wall seconds, best of ``repeats`` after a warm-up),
    and the count :func:`choose` picks. Leaves torch's thread count as it found it."""
    import torch

    from crosscurv.numeric.hvp import grad

    counts = candidates() if counts is None else sorted(set(int(c) for c in counts))
    before = torch.get_num_threads()
    seconds: dict[int, float] = {}
    try:
        for n in counts:
            torch.set_num_threads(n)
            grad(loss, params)  # warm-up: the thread pool and the allocator at this count
            best = float("inf")
            for _ in range(max(1, int(repeats))):
                t0 = time.perf_counter()
                grad(loss, params)
                best = min(best, time.perf_counter() - t0)
            seconds[n] = best
    finally:
        torch.set_num_threads(before)
    return choose(seconds), seconds
