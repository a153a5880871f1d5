"""One protocol iteration in gradients, next to its lower bound, with a breakdown.

Per task (built-in presets), single-threaded CPU time (``time.process_time``), medians of
``--repeats``:

* the unit: one gradient (:func:`crosscurv.numeric.hvp.grad`), timed before and after the run;
* one iteration of :func:`crosscurv.numeric.protocol.run_protocol` with a run folder (iterations
  ``2..K-1``), and its breakdown timed inside the same run: points, masked ``M_S`` products, full
  products, the scheme step, the segment gap, checkpoints, and the rest (split into the store's
  parks and fetches and the float64 sums);
* the floor of that rest: the two float64 step remainders, the run's parks of a parameter-sized
  vector and its float32 reductions, each timed alone;
* the lower bound from the same primitives timed alone: 2 points + 4 full products + 2 masked
  products + 1 scheme step + 3 gradients times the share of iterations that took the segment
  (:func:`crosscurv.numeric.gap.plain_suffices`); ``iteration / bound`` is the body's overhead
  (target <= 1.1); a second bound takes the segment as timed alone;
* both ``M_S v`` forms (per fresh set, per fresh block) alone.

``in the run`` divides the mean iteration by the mean of its timed parts over the same iterations.
``--rounds R`` repeats the whole measurement and reports each round and the medians.

Usage::

    python benchmarks/bench_protocol.py [--tasks mlp,fl,lora] [--preset default] [--iters 8]
        [--repeats 3] [--rounds 1] [--threads 1] [--offload auto|on|off]

Reports, never asserts (exit code 0).
"""

from __future__ import annotations

import argparse
import importlib
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

    PARTS = ("points", "masked M_S products", "full products", "scheme step", "segment gap",
             "checkpoints")
    #: the body's own work ("rest") split further: the store's parks and fetches, the float64 sums
    #: outside the parts above (the JC and S steps' remainders where the steps are not timed, the
    #: extremes' residuals)
    REST_PARTS = ("store", "float64 sums")

    def __init__(self):
        from crosscurv.numeric.point import PointCurvature

        self.acc = dict.fromkeys(self.PARTS + self.REST_PARTS, 0.0)
        self.calls = dict.fromkeys(self.PARTS + self.REST_PARTS, 0)
        self.parks = 0  # parks of a vector (not of None) in the store, the floor's count
        # float32 dot products and norms over the parameters outside the timed parts
        self.reductions = 0
        self._undo = []
        self._depth = 0

        def timed(part, fn, count=True):
            def wrapper(*a, **k):
                if self._depth:
                    return fn(*a, **k)
                self._depth += 1
                self.calls[part] += count
                t = time.process_time()
                try:
                    return fn(*a, **k)
                finally:
                    self.acc[part] += time.process_time() - t
                    self._depth -= 1
            return wrapper

        def patch(obj, name, part, count=True):
            orig = getattr(obj, name)
            setattr(obj, name, timed(part, orig, count))
            self._undo.append((obj, name, orig))

        from crosscurv.numeric import float64_sums, offload, tree
        from crosscurv.numeric.gap import SegmentGap
        from crosscurv.numeric.point import TermwisePoint
        from crosscurv.numeric.update_rules import plain
        from crosscurv.numeric.trajectory import Run

        for cls in (PointCurvature, TermwisePoint):  # the engines' point classes
            patch(cls, "__init__", "points")
            patch(cls, "masked", "masked M_S products")
            patch(cls, "hvp", "full products")  # calls from inside masked() count as masked
        # the update rule takes the steps: S's by scheme_step (the bound's step), JC's inline
        # (vector algebra)
        patch(plain, "scheme_step", "scheme step")
        patch(Run, "checkpoint", "checkpoints")  # the trajectory runner writes every checkpoint
        patch(SegmentGap, "interior", "segment gap")  # the measured gap's three inner gradients
        # and its two end nodes (float64 dot products with g_JC^k and g_S^k), as in the segment
        # timed alone; the part's calls count the iterations that took the segment (interior only)
        patch(SegmentGap, "add", "segment gap", count=False)
        for cls in (offload.Resident, offload.Offloaded):
            for name in ("park", "fetch", "fetch_entry"):
                patch(cls, name, "store")
        park = offload.Offloaded.park

        def counted_park(store, name, vector, *a, **k):
            self.parks += vector is not None
            return park(store, name, vector, *a, **k)

        offload.Offloaded.park = counted_park
        self._undo.append((offload.Offloaded, "park", park))
        patch(float64_sums, "_accumulate", "float64 sums")

        def counted(fn):  # the reductions of the floor, where the body calls them
            def wrapper(*a, **k):
                self.reductions += not self._depth
                return fn(*a, **k)
            return wrapper

        # tree.dot (tree.norm calls it) and inplace.norm_of
        self._undo.append((tree, "dot", tree.dot))
        tree.dot = counted(tree.dot)
        for name in ("crosscurv.numeric.inplace", "crosscurv.numeric.update_rules.plain"):
            module = importlib.import_module(name)
            if hasattr(module, "norm_of"):
                self._undo.append((module, "norm_of", module.norm_of))
                module.norm_of = counted(module.norm_of)

    def restore(self):
        for obj, name, orig in reversed(self._undo):
            setattr(obj, name, orig)


def _iteration_times(task, pattern, lr, iters, timers=None):
    """CPU seconds of iterations 2..iters-1 of one run (with a run folder), and the breakdown per
    iteration."""
    from crosscurv.numeric.protocol import run_protocol

    stamps = {}
    parts = {}

    def progress(k, total):
        stamps[k] = time.process_time()
        if timers is not None:
            parts[k] = (dict(timers.acc), timers.calls["segment gap"], timers.parks,
                        timers.reductions)

    with tempfile.TemporaryDirectory() as tmp:
        run_protocol(task, pattern, lr, iters, out_dir=os.path.join(tmp, "run"), progress=progress,
                     offload=OFFLOAD)
    ks = [k for k in range(2, iters) if k in stamps and k - 1 in stamps]
    its = [stamps[k] - stamps[k - 1] for k in ks]
    per, segments = None, None
    if timers is not None and ks:
        n = len(ks)
        per = {p: (parts[ks[-1]][0][p] - parts[ks[0] - 1][0][p]) / n for p in timers.PARTS
               + timers.REST_PARTS}
        # parks of a vector per iteration
        per["parks"] = (parts[ks[-1]][2] - parts[ks[0] - 1][2]) / n
        # float32 reductions per iteration
        per["reductions"] = (parts[ks[-1]][3] - parts[ks[0] - 1][3]) / n
        # share of iterations that took the segment
        segments = (parts[ks[-1]][1] - parts[ks[0] - 1][1]) / n
    return its, per, segments


def _primitives(task, pattern, lr, repeats: int, samples: dict) -> dict:
    """The lower bound's primitives at ``theta^0``, each timed alone (CPU seconds): each sample
    appended to ``samples[name]``, and the medians over all samples there (those of an earlier call
    included)."""
    from crosscurv.numeric import tree
    from crosscurv.numeric.curvature import masked_product_plan
    from crosscurv.numeric.gap import SegmentGap
    from crosscurv.numeric.inplace import step_residual
    from crosscurv.numeric.offload import Offloaded
    from crosscurv.numeric.protocol import choose_engine
    from crosscurv.numeric.records import atomic_torch_save
    from crosscurv.numeric.steps import scheme_step

    p0 = task.params
    engine = choose_engine(task)  # the run's engine: its points and products are the bound's
    point = engine.point(task.loss, p0)
    g = point.grad

    def timed(name, fn):
        _cpu(fn, repeats, samples.setdefault(name, []))

    timed("point", lambda: engine.point(task.loss, p0))
    timed("product", lambda: point.hvp(g))
    for form in ("fresh_set", "fresh_block"):
        plan = masked_product_plan(task, pattern, form)
        timed(form, lambda plan=plan: point.masked(plan, g))
    timed("step", lambda: scheme_step(task, p0, pattern, lr, grad_at_params=g))
    timed("step without g_S", lambda: scheme_step(task, p0, pattern, lr))
    # the same step through the loss alone (crosscurv.numeric.chain)
    if getattr(task, "chain", None) is not None:
        from crosscurv.numeric import Task

        bare = Task(task.params, task.loss, task.blocks, task.name, task.info, task.default_pattern)
        timed("step without the chain", lambda: scheme_step(bare, p0, pattern, lr,
                                                            grad_at_params=g))
    # the measured gap's segment as the iteration takes it: three inner gradients, five float64 dots
    theta_s = {k: v + 1e-3 for k, v in p0.items()}
    delta = tree.sub(theta_s, p0)

    def segment():
        seg = SegmentGap(delta)
        seg.add(0.0, g, delta)
        seg.interior(task.loss, p0, delta)
        seg.add(1.0, g, delta)
        return seg.result()

    timed("segment", segment)
    # the floor of the body's own work: its two float64 step remainders, a reduction, a park
    gd = tree.detach(g)
    new = {k: p0[k].detach() - lr * gd[k] for k in p0}
    # as the body takes a dot product or a norm
    timed("reduction", lambda: float(tree.dot(gd, new)))
    timed("S step remainder", lambda: step_residual(new, p0, gd, lr, gd, lr * lr))
    timed("JC step remainder", lambda: step_residual(new, p0, gd, lr, None, 0.0))
    store = Offloaded(task.device)
    try:
        store.park("v", gd)  # then overwritten in place, as the run parks a name again
        timed("park", lambda: store.park("v", gd))
    finally:
        store.close()
    vecs = {n: tree.clone(p0) for n in ("theta_j", "theta_s", "z", "y", "w", "p")}
    with tempfile.TemporaryDirectory() as tmp:
        timed("checkpoint", lambda: atomic_torch_save({"vectors": vecs}, os.path.join(tmp, "c.pt")))
    out = {name: statistics.median(times) for name, times in samples.items()}
    out["chosen"] = out[masked_product_plan(task, pattern, "auto").form]
    return out


#: The measured gap's inner gradients in an iteration that takes its segment
#: (:mod:`crosscurv.numeric.gap`).
GAP_GRADIENTS = 3
#: ``run_protocol``'s ``offload`` (``None``: its default policy), from ``--offload``.
OFFLOAD = None


def _parse(argv):
    """The command line's options (module docstring)."""
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--offload", choices=("auto", "on", "off"), default="auto",
                    help="the runs' offloading of the carried vectors "
                         "(default auto: the protocol's policy)")
    return ap.parse_args(argv)


def _round(task, pattern, lr, args, r: int) -> dict:
    """Round ``r`` (from 0): the unit, the primitives and the run's iterations, timed together;
    prints the round's line and returns its figures (CPU seconds)."""
    from crosscurv.numeric.hvp import grad

    # the unit and the primitives are timed before and after the run, so that a change of machine
    # load between them shows in both (medians over all samples of the round)
    units: list = []
    _cpu(lambda: grad(task.loss, task.params), args.repeats, units)
    samples: dict = {}  # the primitives' times, taken before and after the run like the unit's
    _primitives(task, pattern, lr, args.repeats, samples)
    timers = _Timers()
    its, per, segments = _iteration_times(task, pattern, lr, args.iters, timers)
    timers.restore()
    _cpu(lambda: grad(task.loss, task.params), args.repeats, units)
    rd = {"unit": statistics.median(units), "iteration": statistics.median(its),
          "mean": statistics.fmean(its)}
    line = (f"  round {r + 1}: gradient {rd['unit'] * 1e3:.1f} ms; "
            f"one iteration {rd['iteration'] / rd['unit']:.2f} gradients")
    # the mean counts the iterations whose Hessian extremes are converged (every few iterations)
    line += f" (mean {statistics.fmean(its) / rd['unit']:.2f})"
    prim = _primitives(task, pattern, lr, args.repeats, samples)
    # the gap's three inner gradients count where the run took them (plain_suffices skips them)
    body = 2 * prim["point"] + 4 * prim["product"] + 2 * prim["chosen"] + prim["step"]
    bound = body + GAP_GRADIENTS * segments * rd["unit"]
    rd.update(per=per, segments=segments, prim=prim, bound=bound, ratio=rd["iteration"] / bound)
    line += f", bound {bound / rd['unit']:.2f}: iteration / bound = {rd['ratio']:.3f}"
    # the gap's segment as timed alone, with its float64 accumulation
    bound_seg = body + segments * prim["segment"]
    rd.update(bound_seg=bound_seg, ratio_seg=rd["iteration"] / bound_seg)
    line += f"; with the segment timed alone {bound_seg / rd['unit']:.2f}: {rd['ratio_seg']:.3f}"
    print(line, flush=True)
    return rd


def _rounds_list(xs) -> str:
    return ", ".join(f"{x:.3f}" for x in xs)


def _print_bounds(task, pattern, rounds, med) -> None:
    """The lower bounds against the iteration and the primitives, medians over the rounds."""
    from crosscurv.numeric.curvature import masked_product_plan
    from crosscurv.numeric.protocol import choose_engine

    ratios = [rd["ratio"] for rd in rounds]
    segments = statistics.median(rd["segments"] for rd in rounds)
    form = masked_product_plan(task, pattern, 'auto').form
    print(f"  engine {choose_engine(task).name}; M_S form {form}")
    print(f"  lower bound (2 points + 4 products + 2 M_S + 1 step + {GAP_GRADIENTS} gap gradients "
          f"x the share {segments:.2f} of iterations that took the segment) "
          f"{med(lambda rd: rd['bound']):.2f} gradients; "
          f"iteration / bound = {statistics.median(ratios):.3f} (rounds {_rounds_list(ratios)})")
    ratios = [rd["ratio_seg"] for rd in rounds]
    alone = med(lambda rd: rd['prim']['segment'])
    print(f"  lower bound with the segment timed alone ({alone:.2f} gradients: its three gradients "
          f"and five float64 dot products) {med(lambda rd: rd['bound_seg']):.2f} gradients; "
          f"iteration / bound = {statistics.median(ratios):.3f} (rounds {_rounds_list(ratios)})")
    chain = ("; through the loss instead of the task's chain "
             f"{med(lambda rd: rd['prim']['step without the chain']):.2f}"
             if "step without the chain" in rounds[0]["prim"] else "")
    print(f"  primitives: point {med(lambda rd: rd['prim']['point']):.2f}, "
          f"product {med(lambda rd: rd['prim']['product']):.2f}, "
          f"M_S per fresh set {med(lambda rd: rd['prim']['fresh_set']):.2f}, "
          f"per fresh block {med(lambda rd: rd['prim']['fresh_block']):.2f}, "
          f"step {med(lambda rd: rd['prim']['step']):.2f} (without reusing g_S "
          f"{med(lambda rd: rd['prim']['step without g_S']):.2f}{chain}), "
          f"checkpoint save {med(lambda rd: rd['prim']['checkpoint']):.2f} gradients")


def _print_breakdown(rounds, iteration: float, med) -> None:
    """Where one iteration goes: the timed parts, the rest (the body's own work) and its floor."""
    per = {p: med(lambda rd, p=p: rd["per"][p]) for p in _Timers.PARTS}
    rest = iteration - sum(per.values())
    print("  breakdown of one iteration (gradients, share): " + "; ".join(
        f"{p} {v:.2f} ({100 * v / iteration:.0f}%)"
        for p, v in list(per.items()) + [("rest", rest)]))
    # the same iterations' mean against the mean of their timed parts: no drift between two
    # measurements
    in_run = [rd["mean"] / sum(rd["per"][p] for p in _Timers.PARTS) for rd in rounds]
    print(f"  in the run: one iteration / its timed parts (the bound's primitives as the run took "
          f"them, the segment whole) = {statistics.median(in_run):.3f} "
          f"(rounds {_rounds_list(in_run)})")
    sub = {p: med(lambda rd, p=p: rd["per"][p]) for p in _Timers.REST_PARTS}
    print(f"  rest, the body's own work (gradients): store {sub['store']:.2f} (parks and fetches "
          f"of the carried vectors), float64 sums {sub['float64 sums']:.2f} (outside the parts "
          f"above), vector algebra and records {rest - sum(sub.values()):.2f}")
    remainders = med(lambda rd: rd["prim"]["S step remainder"] + rd["prim"]["JC step remainder"])
    parks = statistics.median(rd["per"]["parks"] for rd in rounds)
    park = med(lambda rd: rd["prim"]["park"])
    reductions = statistics.median(rd["per"]["reductions"] for rd in rounds)
    reduction = med(lambda rd: rd["prim"]["reduction"])
    floor = remainders + parks * park + reductions * reduction
    print(f"  floor of the rest (what the body cannot skip, each timed alone): the two float64 "
          f"step remainders {remainders:.2f} + {parks:.1f} parks of a parameter-sized vector x "
          f"{park:.3f} + {reductions:.1f} float32 reductions over the parameters x "
          f"{reduction:.3f} = {floor:.2f} gradients; the rest above it {rest - floor:.2f}")


def _bench_task(name: str, args) -> None:
    """Every round of one task, then the medians over the rounds."""
    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.theory.patterns import parse_pattern

    task, settings = load_task(name, args.preset)
    pattern = parse_pattern(str(settings.get("pattern") or task.default_pattern), task.n_blocks,
                            task.block_names)
    lr = settings["lr"]
    print(f"\n{name} ({args.preset}, {task.num_params()} parameters, pattern {pattern.name})")
    rounds = [_round(task, pattern, lr, args, r) for r in range(args.rounds)]
    unit = statistics.median(rd["unit"] for rd in rounds)
    iteration = statistics.median(rd["iteration"] / rd["unit"] for rd in rounds)
    print(f"  median: one iteration {iteration:.2f} gradients (gradient {unit * 1e3:.1f} ms)")

    def med(get):
        return statistics.median(get(rd) / rd["unit"] for rd in rounds)

    _print_bounds(task, pattern, rounds, med)
    _print_breakdown(rounds, iteration, med)


def main(argv=None) -> int:
    global OFFLOAD
    args = _parse(argv)
    OFFLOAD = {"auto": None, "on": True, "off": False}[args.offload]

    import torch

    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count

    print(f"crosscurv at {HERE}; {args.threads} thread(s), CPU time, medians of {args.repeats}; "
          f"iterations 2..{args.iters - 1} of a {args.iters}-iteration run; {args.rounds} "
          f"round(s), each a run, its unit and its primitives; offload {args.offload}")
    for name in args.tasks.split(","):
        _bench_task(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
