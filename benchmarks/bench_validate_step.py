"""Time ``crosscurv validate-step`` on a peft LoRA model of T5-small's size (random weights, CPU).

T5-small's shape (d_model 512, d_ff 2048, 8 heads of 64, 6 encoder and 6
decoder layers, vocabulary 32128; about 60 M parameters) with LoRA adapters
of rank 8 on every attention's q and v (peft), built from a ``T5Config``
with random weights (no download), in float64, Hugging Face's default
``sdpa`` attention (so the curvature products go by differences of
gradients).  The step is examples/peft_lora_t5.py's ``alternating`` (B, a
fresh forward pass, A: GS in order B, A; ``size="t5-small"``) on one batch of ``--batch``
sequences of ``--seq`` tokens, wrapped by :func:`crosscurv.numeric.step_from_training_code`,
and identified with the command's defaults (3 seeds, 5 step sizes, the fit).

Prints the wall time of the identification (the model build excluded and
reported separately), the number of gradient evaluations by kind, and the
verdict.  Target: under 5 minutes on 2 cores.  Not a test: run by hand::

    .venv/bin/python benchmarks/bench_validate_step.py [--threads 1] [--seq 16] [--batch 2] [--out FILE.md]

``--out`` also writes the lines into a Markdown report (``reports/validate_step.md`` is written so),
headed by the command, the date, the CPU and the torch version.

Exit code 0 when the verdict is the expected GS(B, A) and the time is within
the target, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

TARGET_S = 300.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--out", default=None, help="also write the result as a Markdown report to this file")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    import peft_lora_t5 as ex

    from crosscurv.numeric import hvp_differences
    from crosscurv.numeric.validation import factors, freshness, identify_step, states

    harness = (hvp_differences, states, freshness, factors)  # the modules whose gradients count

    t0 = time.perf_counter()
    ex.SIZES["t5-small"].update(rank=args.rank, batch_size=args.batch, seq=args.seq)
    user = ex.alternating(size="t5-small")
    build_s = time.perf_counter() - t0

    counts = {"gradients (harness)": 0, "user step calls": 0}
    real_grad = hvp_differences.grad

    def counting_grad(loss, params):
        counts["gradients (harness)"] += 1
        return real_grad(loss, params)

    for mod in harness:
        mod.grad = counting_grad
    real_step = user.step

    def counting_step(p, lr):
        counts["user step calls"] += 1
        return real_step(p, lr)

    user.step = counting_step
    t1 = time.perf_counter()
    report = identify_step(user)
    run_s = time.perf_counter() - t1
    for mod in harness:
        mod.grad = real_grad
    lines = []

    def say(line: str) -> None:
        print(line)
        lines.append(line)

    say(f"model: T5-small shape (about 60 M parameters), LoRA rank {args.rank} on q,v: "
          f"{user.task.num_params()} trainable; batch {args.batch} x {args.seq} tokens; float64; "
          f"{args.threads} thread(s)")
    say(f"build: {build_s:.1f} s; load average during the run: {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores (others' processes slow a shared machine down)")
    say(f"validate-step (identify_step, defaults): {run_s:.1f} s  (target < {TARGET_S:.0f} s)")
    say("counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    say(report.route.describe() if report.route else "no curvature products")
    say("verdict: " + report.verdict())
    if args.out:
        import platform
        import sys

        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                   platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
        head = ["# validate-step on a T5-small-sized peft LoRA model", "",
                f"Written by `python benchmarks/bench_validate_step.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
                f" on {time.strftime('%Y-%m-%d')}: {cpu}, {os.cpu_count()} cores, torch {torch.__version__}."
                " Wall time of one process; others' processes on a shared machine slow it down (the load is stated).", ""]
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(head + [f"- {ln}" for ln in lines]) + "\n")
    return 0 if (report.matches == ["gs:B,A"] and run_s < TARGET_S) else 1


if __name__ == "__main__":
    raise SystemExit(main())
