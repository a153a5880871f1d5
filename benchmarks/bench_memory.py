"""Peak memory of the protocol vs one gradient step on a CIFAR ResNet-18, at several widths (target
<= 3x).

Each measurement runs in its own subprocess: build the task (``fl`` at a base width, or ``--task
mlp``) and evaluate the loss; take ``VmRSS`` as the baseline and reset ``VmHWM``
(``/proc/self/clear_refs``); run the workload (``grad``: one gradient step; ``point``: one protocol
point and one product by the run's engine; ``protocol``: ``run_protocol`` for ``--iters``
iterations, its peak also reset at the first record so that the iterations after ``k = 0``'s
eigen-solve show apart); report ``VmHWM - baseline`` (CUDA: ``torch.cuda.max_memory_allocated``).
The figure of merit is protocol/grad per width (default 16, 32, 64: 0.8M, 3.1M, 12.5M parameters);
``--offload auto`` is :func:`crosscurv.numeric.offload.should_offload`. Exit code 1 when a width
misses the target.

Usage::

    .venv/bin/python benchmarks/bench_memory.py [--width 16 32 64] [--preset default] [--iters 3]
        [--chunk N] [--hvp auto|forward|reverse] [--offload auto|on|off] [--device cpu|cuda]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TARGET = 3.0


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _child(args) -> dict:
    import torch

    from crosscurv.experiments.tasks import build_task
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.protocol import choose_engine, run_protocol
    from crosscurv.theory.patterns import parse_pattern

    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    overrides = {}
    task, settings = build_task(args.task, args.preset, device=args.device, dtype=torch.float32)
    if args.task == "fl" and args.width is not None and args.width != settings.get("width"):
        from crosscurv.experiments.tasks import TASKS

        s = dict(TASKS["fl"].presets[args.preset])
        s["width"] = args.width
        task = TASKS["fl"].build(s, device=torch.device(args.device), dtype=torch.float32, seed=0,
                                 data_path=None, model_path=None)
        overrides["width"] = args.width
    task.check_loss()
    cuda = args.device.startswith("cuda")
    lr = settings["lr"]
    pattern = parse_pattern("gs", task.n_blocks, task.block_names)

    offloaded, marks, points = [], {}, []
    engine = choose_engine(task, args.hvp, args.chunk) if args.mode == "point" else None

    def peak_now() -> int:
        if cuda:
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated()
        return _status_kb("VmHWM") * 1024

    # the peak so far (iteration 0 with its eigensolve), then a fresh peak
    def first_record(k, total):
        if "first" not in marks and measuring:
            marks["first"] = peak_now()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            else:
                _reset_peak()

    measuring = False

    def workload():
        if args.mode == "grad":
            _, g = grad(task.loss, task.params)
            new = {k: task.params[k] - lr * g[k] for k in task.params}
            del new, g
        elif args.mode == "point":  # one protocol point and one product at it, by the run's engine
            points.append(engine.point(task.loss, task.params))
            points[-1].hvp(points[-1].grad)
            points.pop().release()
        else:
            with tempfile.TemporaryDirectory() as tmp:
                res = run_protocol(task, pattern, lr, args.iters, out_dir=os.path.join(tmp, "run"),
                                   hvp_method=args.hvp, chunk_size=args.chunk,
                                   progress=first_record,
                                   offload={"auto": None, "on": True, "off": False}[args.offload])
            assert res.status == "complete", res.message
            offloaded.append(bool(res.summary["settings"]["offload"]))

    # warm-up: lazily loaded kernels and one-time functorch set-up are not the workload's
    workload()
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _status_kb("VmRSS") * 1024
        reset = _reset_peak()
    measuring = True
    workload()
    after = peak_now()
    if cuda:
        how = "torch.cuda.max_memory_allocated"
    else:
        how = "VmHWM after clear_refs" if reset else "VmHWM (peak not reset: includes set-up)"
    peak = max(after, marks.get("first", 0))
    return {
        "mode": args.mode,
        "extra_bytes": peak - base,
        "later_bytes": after - base if "first" in marks and (cuda or reset) else None,
        "baseline_bytes": base,
        "peak_bytes": peak,
        "how": how,
        "n_params": task.num_params(),
        "blocks": dict(zip(task.block_names, task.block_sizes())),
        "width": overrides.get("width", settings.get("width")),
        "offloaded": offloaded[-1] if offloaded else None,
        "examples": settings.get("client_examples") or settings.get("examples"),
        "engine": engine.name if engine is not None else None,
    }


def _measure(mode: str, args, width: int | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--task", args.task,
           "--preset", args.preset,
           "--iters", str(args.iters), "--hvp", args.hvp, "--device", args.device, "--threads", str(
           args.threads),
           "--offload", args.offload]
    if width is not None:
        cmd += ["--width", str(width)]
    if args.chunk is not None:
        cmd += ["--chunk", str(args.chunk)]
    # large blocks straight from mmap and back to the OS on free, so RSS follows live tensors
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} measurement failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(args, width: int | None) -> dict:
    """One table row: the gradient step's and the protocol's extra peak memory at ``width``."""
    g = _measure("grad", args, width)
    pt = _measure("point", args, width)
    p = _measure("protocol", args, width)
    later = p.get("later_bytes")
    return {"width": g["width"], "n_params": g["n_params"], "offloaded": p["offloaded"], "how": g[
        "how"],
            "grad_mib": g["extra_bytes"] / 2 ** 20, "protocol_mib": p["extra_bytes"] / 2 ** 20,
            "point_ratio": pt["extra_bytes"] / g["extra_bytes"], "engine": pt["engine"],
            "ratio": p["extra_bytes"] / g["extra_bytes"], "examples": g["examples"],
            "later_mib": None if later is None else later / 2 ** 20,
            "later_ratio": None if later is None else later / g["extra_bytes"]}


def table(rows: list[dict], args) -> str:
    """The rows as a Markdown table, with a line saying what was measured and how."""
    what = ("fl ResNet-18, client examples" if args.task == "fl"
            else "mlp (8-layer MNIST MLP), examples")
    head = (f"{what} {rows[0]['examples']}, float32, {args.device}, hvp {args.hvp} (engine "
            f"{rows[0]['engine']}), chunk {args.chunk}, offload {args.offload}, K = {args.iters}, "
            f"{args.threads} thread(s); measured as {rows[0]['how']}, above the baseline after "
            f"set-up")
    lines = [head, "", f"| width | parameters | offloaded | gradient step (MiB) | protocol (MiB) | "
                       f"protocol / gradient step (target <= {TARGET:g}) | after the first record "
                       f"(MiB) | after the first record / gradient step | one point and one "
                       f"product / gradient step |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        later = ("| n/a | n/a |" if r.get("later_mib") is None
                 else f"| {r['later_mib']:.1f} | {r['later_ratio']:.2f} |")
        later += f" {r['point_ratio']:.2f} |"
        lines.append(f"| {r['width'] if r['width'] is not None else '-'} | {r['n_params']:,} | "
                     f"{'yes' if r['offloaded'] else 'no'} | {r['grad_mib']:.1f} "
                     f"| {r['protocol_mib']:.1f} | {r['ratio']:.2f} {later}")
    lines += ["", "The whole run includes iteration 0's eigensolve from scratch "
                  "(crosscurv.numeric.estimates.solve_extremes); after the first record, the "
                  "iterations without a solve (the iteration body). The target applies to the "
                  "whole run: exit code 1 when a width misses it. One point and one product: the "
                  "run's engine (crosscurv.numeric.protocol.choose_engine) at the parameters, its "
                  "gradient and one Hessian-vector product, the floor under the body's peak before "
                  "any carried vector."]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog=f"Each width gives two ratios: the whole run (iteration 0 solves for the Hessian's "
               f"extreme eigenpairs from scratch, the solver of "
               f"crosscurv.numeric.estimates.solve_extremes) and the iterations after the first "
               f"record. Exit code 1 when a width's whole-run ratio is above {TARGET:g}.")
    ap.add_argument("--task", default="fl", choices=("fl", "mlp"),
                    help="fl (default: the ResNet-18 at each --width) or mlp (the 8-layer MNIST "
                         "MLP, one row)")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--width", type=int, nargs="+", default=[16, 32, 64],
                    help="ResNet-18 base widths, one row each (default: 16 32 64)")
    ap.add_argument("--iters", type=int, default=3, help="protocol iterations K (default 3)")
    ap.add_argument("--chunk", type=int, default=None,
                    help="HVPs per vmap chunk (default: all at once)")
    ap.add_argument("--hvp", default="auto", choices=("auto", "forward", "reverse"))
    ap.add_argument("--offload", default="auto", choices=("auto", "on", "off"),
                    help="park carried vectors between uses (default auto: "
                         "crosscurv.numeric.offload.should_offload, on once the 7 carried vectors "
                         "reach 16 MiB, about 600,000 float32 parameters, or under memory "
                         "pressure)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", choices=("grad", "point", "protocol"), default=None,
                    help=argparse.SUPPRESS)
    ap.add_argument("--mode", default=None, help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.child:
        args.mode = args.child
        args.width = args.width[0]
        print(json.dumps(_child(args)))
        return 0
    rows = []
    widths = args.width if args.task == "fl" else [None]  # the MLP has no width to vary: one row
    for w in widths:  # each row on stderr as soon as it is measured: a long run shows its progress
        rows.append(measure(args, w))
        r = rows[-1]
        later = "" if r[
            "later_ratio"] is None else f", after the first record {r['later_ratio']:.2f}x"
        print(f"bench_memory: {args.task} width {r['width']}: protocol {r['ratio']:.2f}x one "
              f"gradient step{later}",
              file=sys.stderr, flush=True)
    print(table(rows, args))
    return 0 if all(r["ratio"] <= TARGET for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
