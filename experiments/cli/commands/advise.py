"""``crosscurv advise``: which block scheme to use at budget ``K``, predicted from one JC run.

Runs the JC trajectory once and, for every candidate pattern and every
``k <= K``, predicts ``L_S^k - L_JC^k`` (the JC-only estimate of Theorem 3)
with an embedded-pair error, the best scheme per ``k`` with a certified flag
and a recommendation (:mod:`crosscurv.numeric.advice`).  Writes ``advice.csv``
(streamed), ``checkpoint.pt`` and ``advice.json`` into ``--out``; ``--resume``
continues (or extends) a run.  ``--validate`` also runs every candidate's
trajectory (:func:`crosscurv.numeric.protocol.run_protocol`) and counts how often the
advice named the measured best (``validation.json``).  Exit codes: 0, 2 bad
input (one line), 3 the JC run diverged, 130 interrupted.

``python -m crosscurv.experiments.cli.commands.advise study --tasks mlp,fl,lora --seeds 0,1
--iters 20 --out reports/advise`` writes the validation report over tasks and
seeds (``reports/advise/validation.md``).
"""

from __future__ import annotations

import json
import os
import sys

HELP = (
    "Predict which block scheme (jc, gs, other GS orders, chain, partial patterns) gives the lowest loss at each "
    "budget K <= --iters from one JC trajectory (JC-only estimate of Theorem 3 with an embedded error "
    "estimate), and recommend one. TASK is a built-in task (mlp, fl, lora), module:factory or "
    "path/to/file.py:factory."
)


def add_arguments(p) -> None:
    from crosscurv.experiments.cli.commands.run import add_task_arguments

    add_task_arguments(p, iters_help="budget K >= 1 (default: the preset's)")
    p.add_argument("--patterns", "--pattern", dest="patterns", default=None, metavar="P1;P2;...",
                   help="candidates separated by ';' (jc, gs, gs:ORDER, chain, chain:ORDER, i<-j,...); default: jc, "
                        "gs, gs reversed, every GS order when N <= 4, chain; jc is always the reference")
    p.add_argument("--optimizer", default="sgd", metavar="SPEC",
                   help="only sgd (plain steps) is supported by advise")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step sizes: not supported by advise (factors of 1 only)")
    p.add_argument("--out", default=None, help="run directory (default: runs/advise-<task>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its checkpoint; with a larger --iters, extend it")
    p.add_argument("--json", action="store_true",
                   help="print {recommendation, per_iteration: [{k, estimates, errors, best, certified}]} on stdout")
    p.add_argument("--hvp", choices=("auto", "forward", "reverse"), default="auto",
                   help="Hessian-vector products (as crosscurv run)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="iterations between checkpoints (default: one a minute at most, and one before the last)")
    p.add_argument("--figure", default=None, metavar="PATH",
                   help="also draw the predicted gaps with error bands and the recommended scheme over K")
    p.add_argument("--validate", action="store_true",
                   help="also run every candidate's trajectory and count how often the advice named the measured "
                        "best (writes validation.json; costs the runs the advice saves)")


def _plain_only(task, args) -> None:
    from crosscurv.numeric.advice import AdviceError
    from crosscurv.numeric.optimizers import optimizer_setup

    setup = optimizer_setup(task, args.optimizer, args.block_lr)
    if not setup.plain:
        raise AdviceError(f"advise supports plain steps only (--optimizer sgd, no --block-lr factors), got "
                          f"{setup.describe()}")


def execute(args):
    """Load the task and advise; returns ``(Advice, run folder, validation or None)``."""
    import torch

    from crosscurv.experiments.cli.commands.run import _Progress, _slug, load
    from crosscurv.numeric.advice import advise, validate
    from crosscurv.numeric.optimizers import parse_optimizer

    parse_optimizer(args.optimizer)
    task, settings, lr, iters = load(args)
    _plain_only(task, args)
    settings.update(lr=lr, iters=iters, seed=args.seed, dtype=str(task.dtype).replace("torch.", ""),
                    device=str(task.device), data_path=args.data, model_path=args.model,
                    threads=torch.get_num_threads())
    settings.pop("pattern", None)
    out = args.out or f"runs/advise-{_slug(task.name)}"
    progress = _Progress(int(iters), f"advise {task.name}")
    try:
        adv = advise(task, lr, iters, args.patterns, out_dir=out, resume=args.resume, hvp_method=args.hvp,
                     seed=args.seed, settings=settings, checkpoint_every=args.checkpoint_every, progress=progress)
    finally:
        progress.close()
    if args.figure:
        adv.figure(args.figure)
    val = None
    if args.validate:
        val = validate(task, adv, hvp_method=args.hvp, seed=args.seed)
        from crosscurv.numeric.records import write_summary

        write_summary(os.path.join(out, "validation.json"), val)
    return adv, out, val


def run(args) -> int:
    from crosscurv.numeric.protocol import DIVERGED_EXIT_CODE

    adv, out, val = execute(args)
    if args.json:
        obj = adv.to_json()
        if val is not None:
            obj["validation"] = {k: v for k, v in val.items() if k != "per_iteration"}
        print(json.dumps(obj, indent=2, allow_nan=False))
    else:
        print(f"{adv.status}: {len(adv.per_iteration)} iterations of {adv.settings.get('task')}, "
              f"{len(adv.candidates)} candidates ({', '.join(adv.candidates)}); records in {out}")
        print(adv.recommendation)
        if val is not None:
            a, c, d = val["agree_all"], val["agree_certified"], val["agree_decided"]
            print(f"validation: advised best = measured best at {a[0]}/{a[1]} iterations, {c[0]}/{c[1]} certified, "
                  f"{d[0]}/{d[1]} where the measurement decides")
    if adv.status == "diverged":
        print(f"crosscurv: {adv.message}", file=sys.stderr)
        return DIVERGED_EXIT_CODE
    return 0


# -- the validation study (reports/advise) ------------------------------------------------------
def study(tasks, seeds, iters, out, preset="smoke", lrs=None) -> str:
    """Advise and validate every task x seed (x learning rate) and write ``OUT/validation.md`` and ``.json``.

    ``lrs``: ``{task: [lr, ...]}`` (default: the preset's learning rate).  Returns the markdown text.
    """
    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.advice import advise, validate
    from crosscurv.numeric.records import atomic_write_text, write_summary

    os.makedirs(out, exist_ok=True)
    rows = []
    for name in tasks:
        for seed in seeds:
            task, settings = load_task(name, preset, device=torch.device("cpu"), seed=seed)
            for lr in (lrs or {}).get(name) or [settings["lr"]]:
                adv = advise(task, lr, iters, seed=seed)
                val = validate(task, adv, seed=seed)
                rows.append({"task": name, "preset": preset, "seed": seed, "lr": lr, "iters": iters,
                             "candidates": adv.candidates, "recommendation": adv.recommendation,
                             "agree_all": val["agree_all"], "agree_certified": val["agree_certified"],
                             "agree_decided": val["agree_decided"], "status": val["status"],
                             "eta_sharpness_max": val["eta_sharpness_max"],
                             "one_step_ratio": max((abs(c["measured"] - c["eta3"]) / abs(c["eta3"] - c["eta2"])
                                                    for chk in adv.one_step_checks for c in chk.values()
                                                    if abs(c["measured"] - c["eta3"]) > c["floor"]
                                                    and c["eta3"] != c["eta2"]), default=0.0)})
                print(f"advise study: {name} seed {seed} lr {lr}: {val['agree_all']}", file=sys.stderr, flush=True)
    write_summary(os.path.join(out, "validation.json"), {"rows": rows})

    def pct(a):
        return f"{a[0]}/{a[1]}" + (f" ({100 * a[0] / a[1]:.0f}%)" if a[1] else "")

    lines = ["# `crosscurv advise`: advised best scheme vs measured best",
             "",
             f"Generated by `python -m crosscurv.experiments.cli.commands.advise study` (preset {preset}, K = {iters}, CPU, "
             f"{torch.get_num_threads()} thread(s)). Candidates: the defaults of `crosscurv.numeric.advice.default_candidates`; "
             "each candidate's trajectory measured with `crosscurv.numeric.protocol.run_protocol`. 'certified': iterations "
             "where the advice was certified; 'decided': iterations where the measured margin exceeds the "
             "measurements' gap_err. 'max eta*sharpness': eta times the largest power-iteration estimate of "
             "||H_JC^k|| along the run (above 2: past the edge of stability). 'one-step remainder / eta^3 term': the largest |measured - "
             "(eta^2 C_S + eta^3 c3)| / |eta^3 c3| of the one-step checks at theta^0, counting only "
             "remainders above the steps' rounding (0: none; above 1 the advice warns that the expansion does not "
             "converge).",
             "",
             "| task | seed | lr | max eta*sharpness | one-step remainder / eta^3 term | agree (all) | agree (certified) | agree (decided) "
             "| advice at K |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = r["recommendation"].split(".")[0]
        es = r["eta_sharpness_max"]
        regime = "" if es != es else (f"{es:.2f}" + (" (past the edge)" if es > 2 else ""))
        lines.append(f"| {r['task']} | {r['seed']} | {r['lr']} | {regime} | {r['one_step_ratio']:.2g} | {pct(r['agree_all'])} "
                     f"| {pct(r['agree_certified'])} "
                     f"| {pct(r['agree_decided'])} | {head} |")
    text = "\n".join(lines) + "\n"
    atomic_write_text(os.path.join(out, "validation.md"), text)
    return text


def _study_main(argv) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m crosscurv.experiments.cli.commands.advise study")
    p.add_argument("--tasks", default="mlp,fl,lora")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--preset", default="smoke")
    p.add_argument("--lrs", default=None, help="TASK=LR1/LR2,... (default: the preset's)")
    p.add_argument("--out", default="reports/advise")
    a = p.parse_args(argv)
    lrs = None
    if a.lrs:
        lrs = {t: [float(x) for x in v.split("/")] for t, v in (item.split("=") for item in a.lrs.split(","))}
    print(study(a.tasks.split(","), [int(s) for s in a.seeds.split(",")], a.iters, a.out, a.preset, lrs))
    return 0


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:2] == ["study"]:
        sys.exit(_study_main(sys.argv[2:]))
    sys.exit("usage: python -m crosscurv.experiments.cli.commands.advise study [--tasks ...] [--seeds ...] [--iters K] [--out DIR]")
