"""The float32 reductions of the protocol's body against fused kernels: time and rounding error.

On a built-in task's parameter vector (and a seeded normal draw), each way of forming ``a . b`` and
``||a||`` is timed (CPU, one thread, medians, interleaved) and its relative error measured against
``math.fsum`` of the float64 products: ``Tensor.sum`` of the products per entry
(:func:`crosscurv.numeric.tree.dot`, what the body uses), ``torch.dot``,
``torch.linalg.vector_norm`` and ``torch._foreach_norm``.

Usage::

    .venv/bin/python benchmarks/bench_reductions.py [--task mlp] [--preset default] [--repeats 30]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _time_cpu(fn, samples: list) -> None:
    """One call of ``fn``, its CPU seconds appended to ``samples``."""
    t = time.process_time()
    fn()
    samples.append(time.process_time() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--task", default="mlp")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)

    import torch

    from crosscurv.experiments.tasks import build_task
    from crosscurv.numeric import tree

    torch.set_num_threads(1)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    task, _ = build_task(args.task, args.preset)
    a = {k: v.detach().float().contiguous() for k, v in task.params.items()}
    g = torch.Generator().manual_seed(0)
    b = {k: torch.randn(v.shape, generator=g, dtype=torch.float64).float() for k, v in a.items()}

    # a product of two float32 numbers is exact in float64; fsum rounds once
    def exact(x, y) -> float:
        return math.fsum(p for k in x for p in (x[k].double() * y[k].double()).reshape(-1).tolist())

    dots = {
        "Tensor.sum of the products (tree.dot)": lambda: float(tree.dot(a, b)),
        "torch.dot per entry": lambda: sum(float(torch.dot(a[k].reshape(-1), b[k].reshape(-1)))
                                           for k in a),
    }
    norms = {
        "Tensor.sum of the squares (tree.norm)": lambda: float(tree.norm(a)),
        "torch.linalg.vector_norm per entry": lambda: math.sqrt(sum(float(torch.linalg.vector_norm(
        v)) ** 2
                                                                    for v in a.values())),
        "torch._foreach_norm": lambda: float(torch.linalg.vector_norm(torch.stack(
        torch._foreach_norm(list(a.values()))))),
    }
    ref_dot, ref_norm = exact(a, b), math.sqrt(exact(a, a))
    samples = {}
    for _ in range(args.repeats):  # interleaved: each kernel once per round
        for name, fn in {**dots, **norms}.items():
            _time_cpu(fn, samples.setdefault(name, []))
    n = sum(v.numel() for v in a.values())
    print(f"{args.task} ({args.preset}): {n:,} float32 parameters in {len(a)} entries; 1 thread, "
          f"CPU time, medians of {args.repeats}; error relative to the exact value (math.fsum of "
          f"float64 products)")
    print()
    print("| quantity | kernel | time (ms) | time / the body's | relative error |")
    print("|---|---|---|---|---|")
    for group, ref, quantity in ((dots, ref_dot, "a . b"), (norms, ref_norm, "norm of a")):
        base = None
        for name, fn in group.items():
            t = statistics.median(samples[name])
            base = t if base is None else base
            err = abs(fn() - ref) / abs(ref)
            print(f"| {quantity} | {name} | {t * 1e3:.3f} | {t / base:.2f} | {err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
