"""One protocol iteration in gradients, next to its lower bound, with a breakdown.

For each task (built-in presets), in one process, single-threaded CPU time
(``time.process_time``; the machine may be shared), medians of ``--repeats``:

* the unit: one gradient ``grad L(theta^0)`` (:func:`numeric.hvp.grad`), timed before and
  after the run (median of both);
* one iteration of :func:`numeric.protocol.run_protocol` (with a run folder,
  so checkpoints are paid as a user pays them): CPU time between consecutive
  records, iterations ``2..K-1`` (the last one skips the products of ``k + 1``);
* its breakdown, timed inside the same run: building the two points
  (gradient with graph), the restricted ``M_S`` products (two per iteration),
  the full products ``H_JC [p, z, y, Delta]``, the scheme step's block
  gradients, the measured gap's three inner gradients (``numeric.gap``),
  checkpoints, and the rest (vector algebra, records, store);
* the lower bound from the same primitives timed in isolation: 2 points + 4
  full products + 2 masked products + 1 scheme step (with ``g_S`` reused)
  + 3 gradients (the segment gap's inner nodes, where the checkout has them).
  ``iteration / bound`` is the overhead of the iteration body itself (target
  <= 1.1);
* both ``M_S v`` forms (per fresh set, per fresh block) in isolation.

``--iteration-only`` measures just the unit and the iteration, through the
public ``run_protocol`` alone, so that ``--code DIR`` can time another checkout
of crosscurv (for example an older commit exported with ``git archive``) with
the same script::

    python benchmarks/bench_protocol.py [--tasks mlp,fl,lora] [--preset default] [--iters 8]
        [--repeats 3] [--threads 1] [--iteration-only] [--code DIR]

Reports, never asserts (exit code 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu(fn, repeats: int, samples: list | None = None) -> float:
    """Median CPU seconds of ``fn`` after a warm-up (each sample also appended to ``samples``)."""
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    if samples is not None:
        samples.extend(out)
    return statistics.median(out)


class _Timers:
    """process_time accumulated per part, by wrapping the protocol's primitives in place."""

    PARTS = ("points", "masked M_S products", "full products", "scheme step", "segment gap", "checkpoints")

    def __init__(self):
        import numeric.protocol as protocol
        from numeric.point import PointCurvature

        self.acc = dict.fromkeys(self.PARTS, 0.0)
        self._undo = []
        self._depth = 0

        def timed(part, fn):
            def wrapper(*a, **k):
                if self._depth:
                    return fn(*a, **k)
                self._depth += 1
                t = time.process_time()
                try:
                    return fn(*a, **k)
                finally:
                    self.acc[part] += time.process_time() - t
                    self._depth -= 1
            return wrapper

        def patch(obj, name, part):
            orig = getattr(obj, name)
            setattr(obj, name, timed(part, orig))
            self._undo.append((obj, name, orig))

        patch(PointCurvature, "__init__", "points")
        patch(PointCurvature, "masked", "masked M_S products")
        patch(PointCurvature, "hvp", "full products")  # calls from inside masked() count as masked
        patch(protocol, "scheme_step", "scheme step")
        patch(protocol.RunContext, "checkpoint", "checkpoints")
        try:
            from numeric.gap import SegmentGap

            patch(SegmentGap, "interior", "segment gap")  # the measured gap's three inner gradients
        except ImportError:  # a checkout without the segment gap
            pass

    def reset(self):
        self.acc = dict.fromkeys(self.PARTS, 0.0)

    def restore(self):
        for obj, name, orig in reversed(self._undo):
            setattr(obj, name, orig)


def _iteration_times(task, pattern, lr, iters, timers=None):
    """CPU seconds of iterations 2..iters-1 of one run (with a run folder), and the breakdown per iteration."""
    from numeric.protocol import run_protocol

    stamps = {}
    parts = {}

    def progress(k, total):
        stamps[k] = time.process_time()
        if timers is not None:
            parts[k] = dict(timers.acc)

    with tempfile.TemporaryDirectory() as tmp:
        run_protocol(task, pattern, lr, iters, out_dir=os.path.join(tmp, "run"), progress=progress)
    ks = [k for k in range(2, iters) if k in stamps and k - 1 in stamps]
    its = [stamps[k] - stamps[k - 1] for k in ks]
    per = None
    if timers is not None and ks:
        n = len(ks)
        per = {p: (parts[ks[-1]][p] - parts[ks[0] - 1][p]) / n for p in timers.PARTS}
    return its, per


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iteration-only", action="store_true")
    ap.add_argument("--code", default=None, help="crosscurv checkout to time (default: this one)")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.code or HERE))

    import torch

    torch.set_num_threads(args.threads)
    from experiments.loading import load_task
    from numeric.hvp import grad
    from theory.patterns import parse_pattern

    print(f"crosscurv at {os.path.abspath(args.code or HERE)}; {args.threads} thread(s), CPU time, "
          f"medians of {args.repeats}; iterations 2..{args.iters - 1} of a {args.iters}-iteration run")
    for name in args.tasks.split(","):
        task, settings = load_task(name, args.preset)
        pattern = parse_pattern(str(settings.get("pattern") or task.default_pattern), task.n_blocks, task.block_names)
        lr = settings["lr"]
        # the unit is timed before and after the run, so that a change of machine load between them shows
        # in both (its median over all samples)
        units: list = []
        _cpu(lambda: grad(task.loss, task.params), args.repeats, units)
        timers = None if args.iteration_only else _Timers()
        its, per = _iteration_times(task, pattern, lr, args.iters, timers)
        if timers is not None:
            timers.restore()
        _cpu(lambda: grad(task.loss, task.params), args.repeats, units)
        unit = statistics.median(units)
        iteration = statistics.median(its)
        print(f"\n{name} ({args.preset}, {task.num_params()} parameters, pattern {pattern.name}): "
              f"gradient {unit * 1e3:.1f} ms; one iteration {iteration / unit:.2f} gradients ({iteration:.3f} s)")
        if timers is None:
            continue
        from numeric import tree
        from numeric.curvature import masked_product_plan
        from numeric.point import PointCurvature
        from numeric.protocol import choose_engine
        from numeric.records import atomic_torch_save
        from numeric.steps import scheme_step

        engine = choose_engine(task)
        p0 = task.params
        point = PointCurvature(task.loss, p0)
        g = point.grad
        build = _cpu(lambda: PointCurvature(task.loss, p0), args.repeats)
        full = _cpu(lambda: point.hvp(g), args.repeats)
        forms = {}
        for form in ("fresh_set", "fresh_block"):
            plan = masked_product_plan(task, pattern, form)
            forms[form] = _cpu(lambda plan=plan: point.masked(plan, g), args.repeats)
        chosen = masked_product_plan(task, pattern, "auto").form
        step = _cpu(lambda: scheme_step(task, p0, pattern, lr, grad_at_params=g), args.repeats)
        step_plain = _cpu(lambda: scheme_step(task, p0, pattern, lr), args.repeats)
        vecs = {n: tree.clone(p0) for n in ("theta_j", "theta_s", "z", "y", "w", "p")}
        with tempfile.TemporaryDirectory() as tmp:
            save = _cpu(lambda: atomic_torch_save({"vectors": vecs}, os.path.join(tmp, "c.pt")), args.repeats)
        try:
            import numeric.gap  # noqa: F401

            gap_grads = 3
        except ImportError:
            gap_grads = 0
        bound = 2 * build + 4 * full + 2 * forms[chosen] + step + gap_grads * unit
        print(f"  engine {engine.name}; M_S form {chosen}")
        print(f"  lower bound (2 points + 4 products + 2 M_S + 1 step + {gap_grads} gap gradients) {bound / unit:.2f} gradients; "
              f"iteration / bound = {iteration / bound:.3f}")
        print(f"  primitives: point {build / unit:.2f}, product {full / unit:.2f}, "
              f"M_S per fresh set {forms['fresh_set'] / unit:.2f}, per fresh block {forms['fresh_block'] / unit:.2f}, "
              f"step {step / unit:.2f} (without reusing g_S {step_plain / unit:.2f}), "
              f"checkpoint save {save / unit:.2f} gradients")
        rest = iteration - sum(per.values())
        print("  breakdown of one iteration (gradients, share): " + "; ".join(
            f"{p} {v / unit:.2f} ({100 * v / iteration:.0f}%)" for p, v in list(per.items()) + [("rest", rest)]))
        del point
    return 0


if __name__ == "__main__":
    sys.exit(main())
