"""HVP time / gradient time on the CPU for the three studies' model shapes (reports/performance.md).

Models (random data, float32, eval mode): ``mlp`` (the paper's 8-layer ReLU MLP, 256 examples),
``resnet18`` (CIFAR ResNet-18, fixed BatchNorm statistics, 24 images) and ``t5lora`` (T5-small
shape, eager attention, peft LoRA ``r = 8`` on ``q`` and ``v``, 8 sequences of 128 tokens). Per
model, interleaved repeat by repeat, medians and ratios to ``grad``
(:func:`crosscurv.numeric.hvp.grad`) of: ``hvp forward`` / ``reverse`` / ``rof``
(:func:`crosscurv.numeric.hvp.hvp`), ``grad+hvp`` in one pass
(:func:`crosscurv.numeric.hvp.grad_and_hvp`, with the product's marginal cost), the protocol's
``point`` (gradient with graph, then one product on it:
:class:`crosscurv.numeric.point.PointCurvature`), ``linearize+jvp`` (``--linearize``) and
``batch xM`` (:func:`crosscurv.numeric.hvp.hvp_batch`, per product).

Run: ``.venv/bin/python benchmarks/bench_hvp.py [--models mlp,resnet18,t5lora] [--repeats 5]
[--threads N] [--batch 4] [--clock wall|cpu] [--linearize] [--json FILE]``; ``--threads 1 --clock
cpu`` measures this process's CPU time on a shared machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crosscurv.numeric.hvp import grad, grad_and_hvp, hvp, hvp_batch  # noqa: E402
from crosscurv.numeric.point import PointCurvature  # noqa: E402


# -- models --------------------------------------------------------------------
def mlp_problem(gen: torch.Generator):
    widths = (784, 512, 384, 256, 192, 128, 64, 32, 10)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1]).eval()
    x = torch.randn(256, 784, generator=gen)
    y = torch.randint(0, 10, (256,), generator=gen)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p):
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    return params, loss, "8-layer MLP 784-...-10, 256 examples"


class _Basic(nn.Module):
    def __init__(self, cin, cout, stride, conv=nn.Conv2d):
        super().__init__()
        self.conv1 = conv(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(conv(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class ResNet18(nn.Module):
    """CIFAR ResNet-18: 3x3 stem (no max-pool), 4 stages of 2 BasicBlocks, widths 64-512."""

    def __init__(self, num_classes=10, conv=nn.Conv2d):
        super().__init__()
        self.conv = conv(3, 64, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(64)
        stages, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(_Basic(cin, cout, stride, conv), _Basic(cout, cout, 1,
                                                                                conv)))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        h = self.stages(F.relu(self.bn(self.conv(x))))
        # global average pool; vmap has a batching rule for mean (not for adaptive_avg_pool2d)
        return self.fc(h.mean(dim=(2, 3)))


def resnet_problem(gen: torch.Generator):
    model = ResNet18().eval()  # fixed BatchNorm statistics
    x = torch.randn(24, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (24,), generator=gen)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p):
        return F.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    return params, loss, "CIFAR ResNet-18, 24 images, torch.nn.Conv2d"


def t5lora_problem(gen: torch.Generator):
    import transformers
    from peft import LoraConfig, get_peft_model

    transformers.logging.set_verbosity_error()
    cfg = transformers.T5Config(
        vocab_size=384, d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6,
        num_decoder_layers=6, dropout_rate=0.0, feed_forward_proj="relu",
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    base = transformers.T5ForConditionalGeneration(cfg)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=[
        "q", "v"])).eval()
    params = {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}
    for k, v in params.items():  # non-zero B so no product vanishes structurally
        v.normal_(0.0, 0.02, generator=gen)
    n, seq, tgt = 8, 128, 4
    ids = torch.randint(3, 384, (n, seq), generator=gen)
    mask = torch.ones(n, seq, dtype=torch.long)
    labels = torch.randint(3, 384, (n, tgt), generator=gen)
    dec = torch.cat([torch.zeros(n, 1, dtype=torch.long), labels[:, :-1]], dim=1)

    def loss(p):
        out = torch.func.functional_call(
            model, p, (), {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec,
                           "use_cache": False},
            strict=False,
        )
        return F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), labels.reshape(-1))

    return params, loss, f"T5-small-shaped + LoRA r=8 on q,v ({len(params)} tensors), 8x128 tokens"


PROBLEMS = {"mlp": mlp_problem, "resnet18": resnet_problem, "t5lora": t5lora_problem}


# -- timing --------------------------------------------------------------------
def variants(loss, params, vs, batch, linearize=False):
    v = vs[0]
    out = {
        "grad": lambda: grad(loss, params),
        "hvp forward": lambda: hvp(loss, params, v, "forward"),
        "hvp reverse": lambda: hvp(loss, params, v, "reverse"),
        "hvp rof": lambda: hvp(loss, params, v, "rof"),
        "grad+hvp forward (one pass)": lambda: grad_and_hvp(loss, params, v, "forward"),
        "grad+hvp reverse (one pass)": lambda: grad_and_hvp(loss, params, v, "reverse"),
    }
    point = {}

    def point_build():
        point["at"] = PointCurvature(loss, params)

    out["point: gradient with graph (once per point)"] = point_build
    out["point: hvp on the retained graph"] = lambda: point["at"].hvp(v)
    if linearize:
        state = {}

        def lin_build():
            state["fn"] = torch.func.linearize(torch.func.grad(loss), params)[1]

        out["linearize (once per point)"] = lin_build
        out["linearized jvp"] = lambda: state["fn"](v)
    if batch > 1:
        out[f"batch x{batch} forward (per product)"] = lambda: hvp_batch(loss, params, vs[:batch],
                                                                         "forward")
        out[f"batch x{batch} reverse (per product)"] = lambda: hvp_batch(loss, params, vs[:batch],
                                                                         "reverse")
        out[f"batch x{batch} rof (per product)"] = lambda: hvp_batch(loss, params, vs[:batch],
                                                                     "rof")
    return out


def check(loss, params, v) -> float:
    """Largest relative difference between the HVP variants (they must agree)."""
    ref = hvp(loss, params, v, "reverse")
    others = [PointCurvature(loss, params).hvp(v)]
    for fn in (lambda: hvp(loss, params, v, "forward"), lambda: hvp(loss, params, v, "rof"),
               lambda: grad_and_hvp(loss, params, v, "forward")[2]):
        try:
            others.append(fn())
        except Exception:  # no forward mode for this model
            pass
    num = max(max(float((o[k] - ref[k]).abs().max()) for k in ref) for o in others)
    den = max(float(ref[k].abs().max()) for k in ref)
    return num / den


def bench(name: str, repeats: int, batch: int, seed: int = 0, clock=time.perf_counter,
          linearize=False) -> dict:
    gen = torch.Generator().manual_seed(seed)
    params, loss, desc = PROBLEMS[name](gen)
    vs = [{k: torch.randn(t.shape, generator=gen) for k, t in params.items()} for _ in range(max(
        batch, 1))]
    agree = check(loss, params, vs[0])
    fns = variants(loss, params, vs, batch, linearize)
    failed = {}
    for label, fn in list(fns.items()):  # warm-up (and drop what this model cannot run)
        try:
            fn()
        except Exception as exc:  # pragma: no cover - depends on the model
            failed[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            del fns[label]
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for label, fn in fns.items():
            gc.collect()
            t0 = clock()
            fn()
            times[label].append(clock() - t0)
    med = {k: statistics.median(t) for k, t in times.items()}
    for k in med:
        if k.startswith("batch"):
            med[k] /= batch
    g = med["grad"]
    rows = []
    for k in med:
        best = min(times[k]) / (min(times["grad"]) * (batch if k.startswith("batch") else 1))
        marginal = (med[k] - g) / g if k.startswith("grad+hvp") else None
        rows.append([k, med[k] * 1e3, med[k] / g, best, marginal])
    return {
        "model": name,
        "description": desc,
        "n_params": sum(t.numel() for t in params.values()),
        "rows": rows,
        "failed": failed,
        "max_rel_disagreement": agree,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--models", default="mlp,resnet18,t5lora")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: all the machine gives)")
    ap.add_argument("--batch", type=int, default=4,
                    help="directions per hvp_batch call (0/1: skip)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: perf_counter; cpu: this process's CPU time (robust on a loaded "
                         "machine, best with --threads 1)")
    ap.add_argument("--linearize", action="store_true",
                    help="also time torch.func.linearize of the gradient map (slow to trace on "
                         "large models)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    from tabulate import tabulate

    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    results = []
    print(f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads, float32, "
          f"{args.repeats} repeats (median), {args.clock} clock, load average "
          f"{os.getloadavg()[0]:.1f}")
    for name in args.models.split(","):
        clock = time.perf_counter if args.clock == "wall" else time.process_time
        r = bench(name.strip(), args.repeats, args.batch, clock=clock, linearize=args.linearize)
        results.append(r)
        print(f"\n{name}: {r['description']}, {r['n_params']:,} trainable parameters; "
              f"HVP variants agree to {r['max_rel_disagreement']:.1e} (relative)")
        print(tabulate(r["rows"], headers=["variant", "median ms", "/ grad (median)",
                                           "/ grad (best)", "(t - grad) / grad"],
                       floatfmt=(".0f", ".1f", ".2f", ".2f", ".2f"), tablefmt="github",
                       missingval=""))
        for k, why in r["failed"].items():
            print(f"  {k}: not available ({why})")
    if args.json:
        meta = {"threads": threads, "torch": torch.__version__, "clock": args.clock,
                "repeats": args.repeats}
        Path(args.json).write_text(json.dumps({**meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
