"""Cost of ``crosscurv advise`` against running the candidates' trajectories with the protocol.

For each built-in task (a preset, CPU, the thread count of the process; run it with
``OMP_NUM_THREADS=1``) and ``P`` candidates (JC and up to ``P - 1`` others, the first of ``gs``, GS
reversed, ``chain``, ``2<-1`` that are distinct schemes for the task), times in one process,
alternating, ``rounds`` times:

* ``advise``: :func:`crosscurv.numeric.advice.advise` over the ``P`` candidates (one JC trajectory),
  and its one-step check at ``theta^0`` timed alone (a cost independent of ``K``; advise without it
  is the difference);
* ``protocol``: :func:`crosscurv.numeric.protocol.run_protocol` once per non-JC candidate (each run
  is the JC and the candidate's trajectory with the protocol's estimates and measured gap), in
  memory;
* ``plain``: the bare alternative to advising: every candidate's trajectory by
  :func:`crosscurv.numeric.steps.scheme_step` with its loss at each ``k`` (JC once), nothing else.

and, for ``--search-tasks`` (default ``mlp``), the pattern search over each of ``--spaces`` (default
``orders,stages``): :func:`crosscurv.numeric.pattern_search.search` without its certification (the
JC run with the per-pair states and the evaluation of every pattern of the space), its certification
run alone, the search with ``final_only`` (the adjoint sweep, predictions at ``K`` only), and the
plain training of 8 patterns of the space drawn at random (seeded), alternating
in the same way; the ratio ``search / plain 8`` is what a user pays for the whole space against
trying 8 of its patterns. ``--search-at PRESET=K,K`` adds the search rows of another preset (a model
whose gradient is compute-bound, where batching the products helps least).

Prints per task the median CPU seconds of each (``time.process_time``: the machine may be shared;
after one warm-up of each, so that first-call costs land in neither), the one-step check's own
seconds, ``advise / protocol`` (the target is <= 0.5) and ``advise / plain``; ``--out`` also writes
the table.

    OMP_NUM_THREADS=1 python benchmarks/bench_advise.py --iters 20 --rounds 2 --search-iters 20,100
    --search-at default=5,20 --out reports/advise/bench.md
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def candidates(task, p: int) -> list[str]:
    from crosscurv.theory.patterns import as_pattern

    n = task.n_blocks
    out, seen = ["jc"], {frozenset()}
    for s in ["gs", "gs:" + ",".join(str(b) for b in range(n, 0, -1)), "chain", "2<-1"]:
        pairs = as_pattern(s, n).pairs
        if pairs not in seen and len(out) < p:
            seen.add(pairs)
            out.append(s)
    return out


def plain(task, cands, lr, iters) -> dict:
    """Each candidate's losses ``L(theta_S^k)``, ``k = 0..iters``, by exact scheme steps (no
    estimates)."""
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.steps import scheme_step
    from crosscurv.theory.patterns import as_pattern

    out = {}
    for c in cands:
        pat = as_pattern(c, task.n_blocks, task.block_names)
        theta, losses = dict(task.params), []
        for k in range(iters + 1):
            value, g = grad(task.loss, theta)
            losses.append(float(value))
            if k < iters:
                theta = scheme_step(task, theta, pat, lr, grad_at_params=g)
        out[c] = losses
    return out


def search_budgets(a) -> list[tuple[str, list[int]]]:
    """``[(preset, [K, ...])]``: ``--preset`` at ``--search-iters`` (default ``--iters``), then each
    ``--search-at PRESET=K,K``."""
    out = [(a.preset, [int(k) for k in (a.search_iters or str(a.iters)).split(",")])]
    for spec in getattr(a, "search_at", None) or []:
        preset, _, ks = spec.partition("=")
        out.append((preset, [int(k) for k in ks.split(",")]))
    return out


def search_rows(a, timed: list) -> list[str]:
    """The pattern-search table: search, certification, plain training of 8 of the patterns; each
    row's median seconds appended to ``timed`` as ``{"task", "preset", "space", "iters", "search",
    "final_only", "certify", "plain8"}``, one row per preset and budget (:func:`search_budgets`)."""
    import numpy as np

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.pattern_search import search
    from crosscurv.numeric.pattern_search_certify import certify_front
    from crosscurv.theory.pattern_spaces import parse_space

    tasks = [t for t in a.search_tasks.split(",") if t]
    if not tasks:
        return []
    budgets = "; ".join(f"{p} at K = {', '.join(map(str, ks))}" for p, ks in search_budgets(a))
    lines = ["", f"Pattern search, {budgets}: `search` is what `advise --search SPACE "
                 "--no-certify` computes: the space built from its spelling, the JC run with one "
                 "state per ordered pair of blocks (N^2 Hessian-vector products per iteration, "
             "batched), the evaluation of every pattern of the space at K and the pricing of plain "
                 "steps; `final-only` is the same with `--final-only` (the per-pair terms at K "
                 "by an adjoint sweep: N + 1 products per iteration); `certify` is the "
                 "certification of the front's patterns and runners-up "
                 "along the same JC trajectory (their embedded-pair errors, the regime gate, and "
                 "the one-step check where some margin exceeds the errors); `plain 8` trains 8 "
                 "patterns of the space drawn at random (seed 0) for K steps each.", "",
             "| task | preset | parameters | blocks | space | patterns | K | search s "
             "| final-only s | certify s | plain 8 s | search/plain 8 | final-only/plain 8 "
             "| search+certify/plain 8 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, preset, ks in [(n, p, ks) for n in tasks for p, ks in search_budgets(a)]:
        task, settings = load_task(name, preset, device=torch.device("cpu"))
        lr = settings["lr"]
        for spec in a.spaces.split(","):
            sp = parse_space(spec, task.n_blocks)
            rng = np.random.default_rng(0)
            eight = [sp.name(int(r)) for r in rng.choice(len(sp), min(8, len(sp)), replace=False)]
            warm = search(task, lr, 2, spec, certify=False)  # warm-up, certification included
            search(task, lr, 2, spec, certify=False, final_only=True)
            certify_front(task, lr, warm.records, warm.front)
            plain(task, eight, lr, 2)
            for K in ks:
                ts, tf, tc, tq = [], [], [], []
                for _ in range(a.rounds):
                    t = time.process_time()  # from the spelling, as the command: the space too
                    res = search(task, lr, K, spec, certify=False)
                    ts.append(time.process_time() - t)
                    t = time.process_time()
                    search(task, lr, K, spec, certify=False, final_only=True)
                    tf.append(time.process_time() - t)
                    t = time.process_time()
                    plain(task, eight, lr, K)
                    tq.append(time.process_time() - t)
                    t = time.process_time()
                    certify_front(task, lr, res.records, res.front)
                    tc.append(time.process_time() - t)
                ms, mf, mc, mq = (statistics.median(x) for x in (ts, tf, tc, tq))
                row = (f"| {name} | {preset} | {task.num_params():,} | {task.n_blocks} | {sp.spec} "
                       f"| {len(sp):,} | {K} | {ms:.2f} | {mf:.2f} "
                       f"| {mc:.2f} | {mq:.2f} | {ms / mq:.2f} | {mf / mq:.2f} "
                       f"| {(ms + mc) / mq:.2f} |")
                print(row, flush=True)
                lines.append(row)
                timed.append({"task": name, "preset": preset, "space": sp.spec, "iters": K,
                              "search": ms, "final_only": mf, "certify": mc, "plain8": mq})
    return lines


def _span(xs, spec=".2f") -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:{spec}}" if f"{lo:{spec}}" == f"{hi:{spec}}" else f"{lo:{spec}}-{hi:{spec}}"


def findings(timed: list, searched: list) -> list[str]:
    """The report's opening, at most five lines, from the median seconds: ``timed`` per task
    ``{"task", "advise", "without_check", "check", "protocol", "plain"}``, ``searched`` per search
    row ``{"task", "space", "iters", "search", "certify", "plain8"}``."""
    out = ["Found:"]
    if timed:
        ratio = [t["advise"] / t["protocol"] for t in timed]
        within = sum(r <= 0.5 for r in ratio)
        out.append(f"- advise / protocol: {_span(ratio)} ({within}/{len(timed)} tasks within the "
                   "target 0.5).")
        out.append(f"- advise / plain training of the candidates: "
                   f"{_span([t['advise'] / t['plain'] for t in timed])}; the one-step check: "
                   f"{_span([100 * t['check'] / t['advise'] for t in timed], '.0f')}"
                   "% of advise's time.")
    if searched:  # one line: per preset and budget K of the search rows
        keys = list(dict.fromkeys((r.get("preset"), r.get("iters")) for r in searched))
        name = {key: " ".join(x for x in (key[0] and f"({key[0]})", key[1] and f"at K = {key[1]}")
                              if x) for key in keys}

        def per_k(ratio) -> str:
            return ", ".join(
                _span([ratio(r) for r in searched if (r.get("preset"), r.get("iters")) == key])
                + (f" {name[key]}" if len(keys) > 1 and name[key] else "") for key in keys)

        at = f" {name[keys[0]]}" if len(keys) == 1 and name[keys[0]] else ""
        out.append(f"- search / plain 8{at}: {per_k(lambda r: r['search'] / r['plain8'])}; with "
                   f"certification {per_k(lambda r: (r['search'] + r['certify']) / r['plain8'])}.")
        out.append(f"- final-only search / plain 8{at}: "
                   f"{per_k(lambda r: r['final_only'] / r['plain8'])}.")
    return out


def main(argv=None) -> str:
    import platform
    import sys

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.advice import advise
    from crosscurv.numeric.engine import choose_engine
    from crosscurv.numeric.one_step_check import one_step_check
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.theory.patterns import as_pattern

    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--p", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--search-tasks", default="mlp",
                    help="tasks whose pattern search is timed ('' for none)")
    ap.add_argument("--spaces", default="orders,stages")
    ap.add_argument("--search-iters", default=None, metavar="K,K",
                    help="budgets of the search rows (default: --iters)")
    ap.add_argument("--search-at", action="append", default=[], metavar="PRESET=K,K",
                    help="also time the search on PRESET at these budgets (repeatable)")
    ap.add_argument("--out", default=None, metavar="PATH", help="also write the markdown to PATH")
    a = ap.parse_args(argv)
    args = " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Cost of `crosscurv advise` against running the candidates", "",
             f"Generated by `OMP_NUM_THREADS={torch.get_num_threads()} python "
             f"benchmarks/bench_advise.py {args}` on {platform.machine()} "
             f"({platform.processor() or 'cpu'}), a shared machine: median CPU seconds (process "
             f"time, one thread) over {a.rounds} rounds, the measurements alternating in one "
             f"process after one warm-up of each (first-call costs of imports and kernels "
             f"excluded).", "",
             f"threads {torch.get_num_threads()}, preset {a.preset}, K = {a.iters}, P = {a.p} "
             f"(fewer where the task has fewer distinct schemes among the first candidates)", "",
             "| task | blocks | candidates | advise s | advise without the one-step check s (the "
             "difference) | one-step check s "
             "| protocol s | plain s | advise/protocol | without check/protocol | advise/plain |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    timed: list = []
    for name in a.tasks.split(","):
        task, settings = load_task(name, a.preset, device=torch.device("cpu"))
        cands = candidates(task, a.p)
        named = [(c, as_pattern(c, task.n_blocks, task.block_names)) for c in cands]
        method = choose_engine(task).method  # as advise resolves it, before its check
        lr = settings["lr"]
        advise(task, lr, 2, cands)  # warm-up
        for c in cands[1:]:
            run_protocol(task, c, lr, 2)
        plain(task, cands, lr, 2)
        one_step_check(task, named, dict(task.params), lr, 0, method)
        ta, tp, tq, tn, tc = [], [], [], [], []
        for _ in range(a.rounds):
            t = time.process_time()
            advise(task, lr, a.iters, cands)
            ta.append(time.process_time() - t)
            t = time.process_time()
            for c in cands[1:]:
                run_protocol(task, c, lr, a.iters)
            tp.append(time.process_time() - t)
            t = time.process_time()
            plain(task, cands, lr, a.iters)
            tq.append(time.process_time() - t)
            t = time.process_time()  # the check alone (advise's own timing is wall-clock)
            one_step_check(task, named, dict(task.params), lr, 0, method)
            tc.append(time.process_time() - t)
            tn.append(ta[-1] - tc[-1])
        ma, mp, mq, mn, mc = (statistics.median(x) for x in (ta, tp, tq, tn, tc))
        row = (f"| {name} | {task.n_blocks} | {';'.join(cands)} | {ma:.2f} | {mn:.2f} | {mc:.2f} | "
               f"{mp:.2f} | {mq:.2f} | {ma / mp:.2f} | {mn / mp:.2f} | {ma / mq:.2f} |")
        print(row, flush=True)
        lines.append(row)
        timed.append({"task": name, "advise": ma, "without_check": mn, "check": mc, "protocol": mp,
                      "plain": mq})
    searched: list = []
    lines += search_rows(a, searched)
    lines[2:2] = findings(timed, searched) + [""]
    text = "\n".join(lines) + "\n"
    if a.out:
        from crosscurv.numeric.records import atomic_write_text

        atomic_write_text(a.out, text)
    return text


if __name__ == "__main__":
    main()
