"""``crosscurv advise``: which block scheme to use at budget ``K``, predicted from one JC run.

Runs the JC trajectory once and, for every candidate pattern and every ``k <= K``, predicts ``L_S^k
- L_JC^k`` (the JC-only estimate of Theorem 3) with an embedded-pair error, the best scheme per
``k`` with a certified flag and a recommendation (:mod:`crosscurv.numeric.advice`). Writes
``advice.csv`` (streamed), ``checkpoint.pt`` and ``advice.json`` into ``--out``; ``--resume``
continues (or extends) a run. ``--validate`` also runs every candidate's trajectory
(:func:`crosscurv.numeric.protocol.run_protocol`) and prints the advice's regret
(:mod:`crosscurv.numeric.regret`), how often it named the measured best and which certified
iterations were wrong (``validation.json``). Exit codes: 0, 2 bad input (one line), 3 the JC run
diverged, 130 interrupted.

``--optimizer`` and ``--block-lr`` are ``crosscurv run``'s flags (the same definitions): the JC run
takes the optimizer's steps and the predictions are the optimizer-aware JC-only estimate.

``python -m crosscurv.experiments.cli.commands.advise study --tasks mlp,fl,lora --seeds 0,1,2
--iters mlp=150,fl=30,lora=60 --lrs mlp=0.007/3.0,... --out reports/advise`` writes the validation
report over tasks, seeds and learning rates (``reports/advise/validation.md``; resumable).
"""

from __future__ import annotations

import json
import math
import os
import sys

HELP = (
    "Predict which block scheme (jc, gs, other GS orders, chain, partial patterns) gives the "
    "lowest loss at each budget K <= --iters from one JC trajectory (JC-only estimate of Theorem 3 "
    "with an embedded error estimate), and recommend one. TASK is a built-in task (mlp, fl, lora), "
    "module:factory or path/to/file.py:factory."
)


def add_arguments(p) -> None:
    from crosscurv.experiments.cli.commands.run import add_optimizer_arguments, add_task_arguments

    add_task_arguments(p, iters_help="budget K >= 1 (default: the preset's)")
    p.add_argument("--patterns", "--pattern", dest="patterns", default=None, metavar="P1;P2;...",
                   help="candidates separated by ';' (jc, gs, gs:ORDER, chain, chain:ORDER, "
                        "i<-j,...); default: jc, gs, gs reversed, every GS order when N <= 4, "
                        "chain; jc is always the reference")
    add_optimizer_arguments(p)
    p.add_argument("--out", default=None, help="run directory (default: runs/advise-<task>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its checkpoint; with a larger --iters, "
                        "extend it")
    p.add_argument("--json", action="store_true",
                   help="print {recommendation, per_iteration: [{k, estimates, errors, best, "
                        "certified}]} on stdout")
    p.add_argument("--hvp", choices=("auto", "forward", "reverse"), default="auto",
                   help="Hessian-vector products (as crosscurv run)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="iterations between checkpoints (default: one a minute at most, and one "
                        "before the last)")
    p.add_argument("--figure", default=None, metavar="PATH",
                   help="also draw the predicted gaps with error bands and the recommended "
                        "scheme over K")
    p.add_argument("--search", default=None, metavar="SPACE",
                   help="search a whole space of patterns from one JC run: orders (every GS "
                        "order), stages[:D] (every arrangement into at most D sequential stages), "
                        "all (every acyclic pattern, N <= 5, else stage arrangements then "
                        "single-pair descent); names the best pattern per number of sequential "
                        "stages, with errors and certificates for that front (writes search.json "
                        "and pair_records.npz into --out, default runs/search-TASK)")
    p.add_argument("--no-certify", dest="certify", action="store_false",
                   help="with --search: skip the certification run of the front (errors NaN, "
                        "nothing certified)")
    p.add_argument("--final-only", action="store_true",
                   help="with --search: predict at K only, by an adjoint sweep (N + 1 "
                        "Hessian-vector products per iteration instead of N^2; per-iteration "
                        "predictions of the certified patterns only; --resume continues a killed "
                        "run of the same --iters)")
    p.add_argument("--validate", action="store_true",
                   help="also run every candidate's trajectory: the advice's regret, how often it "
                        "named the measured best, which certified iterations were wrong (writes "
                        "validation.json; costs the runs the advice saves)")


def execute(args):
    """Load the task and advise; returns ``(Advice, run folder, validation or None)``."""
    from crosscurv.experiments.cli.commands.run import _Progress, _slug, load

    # checks every flag before the task is built (and torch imported)
    if args.final_only and args.search is None:
        from crosscurv.theory.errors import InputError

        raise InputError("--final-only needs --search")
    task, settings, lr, iters = load(args)
    import torch

    from crosscurv.experiments.cli import threads as thread_choice
    from crosscurv.experiments.runs import auto_threads
    from crosscurv.experiments.thread_count import AUTO, AUTO_SOURCE
    from crosscurv.numeric.advice import advise, validate
    from crosscurv.numeric.optimizers import optimizer_setup

    setup = optimizer_setup(task, args.optimizer, args.block_lr)
    out = args.out or f"runs/advise-{_slug(task.name)}" + ("" if setup.plain else "-" + _slug(
        setup.describe()))
    if args.threads == AUTO:  # measured now, or on --resume the count the run recorded
        n, settings["threads_auto_seconds"] = auto_threads(task, out, args.resume)
        thread_choice.apply(n, source=AUTO_SOURCE)
    settings.update(lr=lr, iters=iters, seed=args.seed, dtype=str(task.dtype).replace("torch.", ""),
                    device=str(task.device), data_path=args.data, model_path=args.model,
                    threads=torch.get_num_threads())
    settings.pop("pattern", None)
    if args.search is not None:
        return _search(args, task, lr, iters, setup)
    progress = _Progress(int(iters), f"advise {task.name}")
    import time

    t0 = time.process_time()
    try:
        adv = advise(task, lr, iters, args.patterns, out_dir=out, resume=args.resume,
                     hvp_method=args.hvp, seed=args.seed, settings=settings,
                     checkpoint_every=args.checkpoint_every, progress=progress,
                     optimizer=setup.spec, block_lr=setup.named)
    finally:
        progress.close()
    if not args.resume and setup.plain and adv.per_iteration:  # priced against trying them
        from crosscurv.numeric.advice_cost import trying_note

        adv.timing["trying"] = trying_note(task, adv.candidates, lr, len(adv.per_iteration),
                                           time.process_time() - t0)
    val = None
    if args.validate:
        val = validate(task, adv, hvp_method=args.hvp, seed=args.seed)
        from crosscurv.numeric.records import write_summary

        write_summary(os.path.join(out, "validation.json"), val)
    if args.figure:
        adv.figure(args.figure, val)
    return adv, out, val


def _search(args, task, lr, iters, setup):
    """``--search``: :func:`crosscurv.numeric.pattern_search.search`; returns ``(SearchResult,
    folder, None)``."""
    from crosscurv.theory.errors import InputError
    from crosscurv.experiments.cli.commands.run import _Progress, _slug
    from crosscurv.numeric.advice import advise

    bad = [flag for flag, on in (("--patterns", args.patterns), ("--validate", args.validate),
                                 ("--figure", args.figure),
                                 ("--optimizer/--block-lr", not setup.plain)) if on]
    if bad:
        raise InputError(f"--search cannot be combined with {', '.join(bad)}")
    out = args.out or f"runs/search-{_slug(task.name)}"
    progress = _Progress(int(iters), f"search {task.name}")
    try:
        res = advise(task, lr, iters, search=args.search, hvp_method=args.hvp, seed=args.seed,
                     progress=progress, checks=args.certify, out_dir=out, resume=args.resume,
                     checkpoint_every=args.checkpoint_every, final_only=args.final_only)
    finally:
        progress.close()
    return res, out, None


def _print_search(res, out) -> None:
    print(f"{res.status}: {res.records.iters} iterations of JC, {res.to_json()['n_patterns']:,} "
          f"patterns ({res.space.spec}); summary in {out}/search.json")
    if res.status == "diverged" and not any(r.get("certified") for r in res.front):
        print(res.recommendation)  # no table of predictions running into the divergence
        return
    print("| stages | best pattern | arrangement | predicted L_S - L_JC at K | error | runner-up "
          "| margin | certified |")
    for r in res.front:
        if r["stages"] > 1 and not r["on_front"]:
            continue
        cert = {True: "yes", False: "no", None: "-"}[r.get("certified")]
        print(f"| {r['stages']} | {r['best']} | {r['stages_text']} | {r['estimate']:.4g} "
              f"| {r['error']:.2g} | {r['runner_up'] or '-'} | {r['margin']:.2g} | {cert} |")
    print(res.recommendation)


def run(args) -> int:
    adv, out, val = execute(args)
    if args.search is not None:
        if args.json:
            print(json.dumps(adv.to_json(), indent=2, allow_nan=False))
        else:
            _print_search(adv, out)
        if adv.status == "diverged":
            from crosscurv.numeric.protocol import DIVERGED_EXIT_CODE

            print(f"crosscurv: {adv.message}", file=sys.stderr)
            return DIVERGED_EXIT_CODE
        return 0
    if args.json:
        obj = adv.to_json()
        if val is not None:
            from crosscurv.numeric.records import json_safe

            obj["validation"] = json_safe({k: v for k, v in val.items() if k != "per_iteration"})
        print(json.dumps(obj, indent=2, allow_nan=False))
    else:
        print(f"{adv.status}: {len(adv.per_iteration)} iterations of {adv.settings.get('task')}, "
              f"{len(adv.candidates)} candidates ({', '.join(adv.candidates)}); records in {out}")
        print(adv.recommendation)
        if adv.timing.get("trying"):
            print(adv.timing["trying"])
        if val is not None:
            print(validation_text(val))
    if adv.status == "diverged":
        from crosscurv.numeric.protocol import DIVERGED_EXIT_CODE

        print(f"crosscurv: {adv.message}", file=sys.stderr)
        return DIVERGED_EXIT_CODE
    return 0


def validation_text(val) -> str:
    """The validation's lines: regret first, then agreement and the certified iterations that were
    wrong."""
    from crosscurv.numeric.advice import k_ranges

    s = val["summary"]
    a = s["agree"]
    lines = [f"validation: regret {s['regret_mean']:.3g} of the spread between the best and the "
             f"worst candidate (mean over {s['decided']} decided iterations, largest "
             f"{s['regret_max']:.3g}; {s['regret_certified']:.3g} over the certified)",
             f"validation: the advised scheme was the measured best (or tied with it) at {a[0]} of "
             f"{a[1]} decided iterations"]
    wrong = s["wrong_k"]
    text = f"validation: {len(wrong)} of {s['certified']} certified iterations were wrong"
    lines.append(text + (f" (k = {k_ranges(wrong, 10)})" if wrong else ""))
    return "\n".join(lines)


# -- the validation study (reports/advise) ------------------------------------------------------
def _one_step_ratio(adv) -> float:
    """The largest ``|measured - (eta^2 C_S + eta^3 c3)| / |eta^3 c3|`` of the one-step checks
    (remainders above the steps' rounding only; 0: none)."""
    return max((abs(c["measured"] - c["eta3"]) / abs(c["eta3"] - c["eta2"])
                for chk in adv.one_step_checks for c in chk.values()
                if abs(c["measured"] - c["eta3"]) > c["floor"] and c["eta3"] != c["eta2"]),
               default=0.0)


def _config_path(out, name, seed, lr, iters) -> str:
    return os.path.join(out, "validation-runs", f"{name}-seed{seed}-lr{lr!r}-K{iters}.json")


def study_config(name, seed, lr, iters, preset, out) -> dict:
    """Advise and validate one task x seed x learning rate (cached in ``OUT/validation-runs/``: a
    finished configuration is read back, so an interrupted study resumes where it stopped)."""
    import time

    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.advice import advise, validate
    from crosscurv.numeric.records import read_summary, write_summary

    path = _config_path(out, name, seed, lr, iters)
    if os.path.exists(path):
        row = read_summary(path)
        if "summary" in row:  # a configuration finished before regret was measured is run again
            return row
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.process_time()
    task, _ = load_task(name, preset, device=torch.device("cpu"), seed=seed)
    adv = advise(task, lr, iters, seed=seed)
    val = validate(task, adv, seed=seed)
    row = {"task": name, "preset": preset, "seed": seed, "lr": lr, "iters": iters,
           "candidates": adv.candidates, "recommendation": adv.recommendation,
           "advice_status": adv.status,
           "agree_all": val["agree_all"], "agree_certified": val["agree_certified"],
           "agree_decided": val["agree_decided"], "status": val["status"],
           "eta_sharpness_max": val["eta_sharpness_max"], "one_step_ratio": _one_step_ratio(adv),
           "covered_embedded": val["covered_embedded"], "covered_certified": val[
           "covered_certified"],
           "cpu_s": time.process_time() - t0, "summary": val["summary"],
           "per_iteration": [{k: t[k] for k in ("k", "advised", "certified", "measured", "decided",
                                                "right", "regret")}
                             for t in val["per_iteration"]]}
    write_summary(path, row)
    return row


def _pct(a) -> str:
    return f"{a[0]}/{a[1]}" + (f" ({100 * a[0] / a[1]:.0f}%)" if a[1] else "")


def _pairs(r) -> int:
    """(iteration, candidate) pairs of a configuration: advised iterations x non-JC candidates."""
    return r["pairs"] if "pairs" in r else len(r["per_iteration"]) * (len(r["candidates"]) - 1)


def _within(r, key) -> str:
    """``n/m, finite on m of T``: pairs within the error among the ``m`` where it (and the gap) is
    finite."""
    c = r[key]
    if not c[1]:
        return f"0/0, finite on 0 of {_pairs(r)}"
    return f"{c[0]}/{c[1]} ({100 * c[0] / c[1]:.0f}%), finite on {c[1]} of {_pairs(r)}"


def _study_findings(rows) -> list:
    """At most five lines: the mean regret over the decided iterations and the certified iterations
    that were wrong, then per task how often the advice named the measured best scheme (decided
    iterations) inside the regime and past the edge of stability."""
    out = []
    for name in dict.fromkeys(r["task"] for r in rows):
        parts = []
        for past in (False, True):
            rs = [r for r in rows
                  if r["task"] == name and ((r["eta_sharpness_max"] or 0) > 2) == past]
            if rs:
                ok = sum(r["agree_decided"][0] for r in rs)
                n = sum(r["agree_decided"][1] for r in rs)
                lrs = ", ".join(sorted({f"{r['lr']:g}" for r in rs}))
                where = "past the edge" if past else "inside the regime"
                parts.append(f"{_pct([ok, n])} {where} (eta = {lrs})")
        out.append(f"- {name}: the advice named the measured best scheme in " + "; ".join(parts)
                   + " of the decided iterations.")
    sms = [r["summary"] for r in rows if r.get("summary") and r["summary"].get("decided")]
    dec = sum(m["decided"] for m in sms)
    if dec:
        reg = sum(m["regret_mean"] * m["decided"] for m in sms if m["regret_mean"] == m[
            "regret_mean"])
        reg /= dec
        wrong = sum(len(m["wrong_k"]) for m in sms)
        cert = sum(m["certified"] for m in sms)
        out.insert(0, f"- Regret {reg:.3g} of the best-to-worst spread (mean over {dec} decided "
                      f"iterations); {wrong} of {cert} certified iterations were wrong.")
    return out[:5]


def _regret(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.3g}"


def study_report(rows, configs, preset, command) -> str:
    """The markdown of ``reports/advise/validation.md`` from the finished rows (pending
    configurations named)."""
    import torch

    lines = ["# `crosscurv advise`: advised best scheme vs measured best", "",
             *_study_findings(rows), "",
             f"Generated by `{command}` (preset {preset}, CPU, {torch.get_num_threads()} "
             f"thread(s)). Candidates: the defaults of "
             f"`crosscurv.numeric.advice.default_candidates`; each candidate's trajectory measured "
             f"with `crosscurv.numeric.protocol.run_protocol`. 'regret' (the headline): the loss "
             f"the advised scheme gives up against the measured best, relative to the spread "
             f"between the best and the worst candidate (`crosscurv.numeric.regret`; the full GS "
             f"orders the certificate could not tell apart count as ties), mean over the decided "
             f"iterations and over the certified ones; 'certified wrong': certified iterations "
             f"whose advised scheme did not tie the measured best within the measurement's error, "
             f"of the certified. 'agree': iterations where the advised best scheme (lowest JC-only "
             f"prediction) was the measured best (lowest measured `L_S^k - L_JC^k`, JC 0); "
             f"'certified': among the iterations where the advice was certified; 'decided': among "
             f"the iterations where the measured margin exceeds the measurements' gap_err. 'max "
             f"eta*lambda_max': eta times the largest `lambda_max(H_JC^k)` along the run (the "
             f"records' converged value or the power iteration, whichever is larger; above 2: past "
             f"the edge of stability). 'one-step remainder / eta^3 term': the largest |measured - "
             f"(eta^2 C_S + eta^3 c3)| / |eta^3 c3| of the one-step checks at theta^0, counting "
             f"only remainders above the steps' rounding (0: none; above 1 the advice warns that "
             f"the expansion does not converge). 'actual error within': share of (iteration, "
             f"candidate) pairs whose actual |jc_only - gap| is within the advice's error (the "
             f"embedded pair completed by the carried local errors), and within the protocol's "
             f"certified `jc_only_err` "
             f"(`crosscurv.numeric.error_estimates`, which needs the candidate's own run), each "
             f"counted over the pairs where that error and the measured gap are finite ('finite on "
             f"m of T': m of the T pairs; `jc_only_err` is a magnitude bound that grows "
             f"geometrically and overflows float64 after a few iterations).",
             "",
             "| task | seed | lr | K | regret (decided) | regret (certified) | certified wrong | "
             "max eta*lambda_max | one-step remainder / eta^3 term | agree (all) | agree "
             "(certified) | agree (decided) | actual error within the error (completed pair) "
             "| within jc_only_err | advice at K | CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = r["recommendation"].split(".")[0]
        es = r["eta_sharpness_max"]
        regime = "" if es is None or es != es else (f"{es:.2f}" + (" (past the edge)" if es > 2
                                                                   else ""))
        sm = r["summary"]
        lines.append(f"| {r['task']} | {r['seed']} | {r['lr']} | {r['iters']} | "
                     f"{_regret(sm['regret_mean'])} | {_regret(sm['regret_certified'])} | "
                     f"{len(sm['wrong_k'])}/{sm['certified']} | {regime} | "
                     f"{r['one_step_ratio']:.2g} | {_pct(r['agree_all'])} | "
                     f"{_pct(r['agree_certified'])} | {_pct(r['agree_decided'])} | "
                     f"{_within(r, 'covered_embedded')} | {_within(r, 'covered_certified')} | "
                     f"{head} | {r['cpu_s']:.0f} |")
    lines += ["", "Over the seeds, per task and learning rate:", "",
              "| task | lr | seeds | regret (decided) | regret (certified) | certified wrong "
              "| past the edge (seeds) | agree (all) | agree (certified) | agree (decided) "
              "| within the error (completed pair) | within jc_only_err |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["task"], r["lr"]), []).append(r)
    for (name, lr), rs in groups.items():
        tot = {key: [sum(r[key][0] for r in rs), sum(r[key][1] for r in rs)]
               for key in ("agree_all", "agree_certified", "agree_decided", "covered_embedded",
                           "covered_certified")}
        tot["pairs"] = sum(_pairs(r) for r in rs)
        past = sum(1 for r in rs if (r["eta_sharpness_max"] or 0) > 2)
        sms = [r["summary"] for r in rs]
        dec, cer = sum(m["decided"] for m in sms), sum(m["certified"] for m in sms)
        reg = sum(m["regret_mean"] * m["decided"] for m in sms if m[
            "decided"]) / dec if dec else math.nan
        reg_c = (sum(m["regret_certified"] * m["certified"] for m in sms if m["certified"])
                 / cer if cer else math.nan)
        wrong = sum(len(m["wrong_k"]) for m in sms)
        lines.append(f"| {name} | {lr} | {len(rs)} | {_regret(reg)} | {_regret(reg_c)} | "
                     f"{wrong}/{cer} | {past} | {_pct(tot['agree_all'])} | "
                     f"{_pct(tot['agree_certified'])} | {_pct(tot['agree_decided'])} | "
                     f"{_within(tot, 'covered_embedded')} | {_within(tot, 'covered_certified')} |")
    cpu = sum(r["cpu_s"] for r in rows)
    lines += ["", f"CPU time of the finished configurations: {cpu / 60:.1f} core-minutes."]
    done = {(r["task"], r["seed"], r["lr"]) for r in rows}
    pending = [c for c in configs if (c[0], c[1], c[2]) not in done]
    if pending:
        lines.append("Pending (not run yet): " + ", ".join(f"{t} seed {s} lr {lr} K {k}" for t, s,
                                                           lr, k in pending)
                     + ".")
    return "\n".join(lines) + "\n"


def study(tasks, seeds, iters, out, preset="smoke", lrs=None, command=None) -> str:
    """Advise and validate every task x seed x learning rate and write ``OUT/validation.md`` and
    ``.json``.

    ``iters``: ``K`` (int) or ``{task: K}``; ``lrs``: ``{task: [lr, ...]}`` (default: the preset's
    learning rate). Configurations run seed by seed (every task at each seed before the next seed)
    and are cached (:func:`study_config`), the report rewritten after each. Returns the markdown
    text.
    """
    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.records import atomic_write_text, write_summary

    os.makedirs(out, exist_ok=True)
    configs = []
    for seed in seeds:
        for name in tasks:
            k = iters[name] if isinstance(iters, dict) else iters
            task_lrs = (lrs or {}).get(name)
            if not task_lrs:
                task_lrs = [load_task(name, preset, device=torch.device("cpu"), seed=seed)[1]["lr"]]
            configs += [(name, seed, lr, k) for lr in task_lrs]
    command = command or "python -m crosscurv.experiments.cli.commands.advise study"
    rows, text = [], ""
    for name, seed, lr, k in configs:
        row = study_config(name, seed, lr, k, preset, out)
        rows.append(row)
        print(f"advise study: {name} seed {seed} lr {lr} K {k}: {row['agree_all']} "
              f"({row['cpu_s']:.0f} CPU s)",
              file=sys.stderr, flush=True)
        ordered = sorted(rows, key=lambda r: (tasks.index(r["task"]), r["lr"], r["seed"]))
        write_summary(os.path.join(out, "validation.json"),
                      {"command": command, "rows": [{k2: v for k2, v in r.items() if k2
                                                     != "per_iteration"}
                                                    for r in ordered]})
        text = study_report(ordered, configs, preset, command)
        atomic_write_text(os.path.join(out, "validation.md"), text)
    return text


def _study_main(argv) -> int:
    import argparse
    import shlex

    p = argparse.ArgumentParser(prog="python -m crosscurv.experiments.cli.commands.advise study")
    p.add_argument("--tasks", default="mlp,fl,lora")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iters", default="20", help="K, or TASK=K,... (one K per task)")
    p.add_argument("--preset", default="smoke")
    p.add_argument("--lrs", default=None, help="TASK=LR1/LR2,... (default: the preset's)")
    p.add_argument("--out", default="reports/advise")
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads (default: crosscurv's default, one; two on two busy "
                        "cores are slower)")
    a = p.parse_args(argv)
    import torch

    from crosscurv.experiments import runs

    torch.set_num_threads(a.threads or runs.DEFAULT_THREADS)
    lrs = None
    if a.lrs:
        lrs = {t: [float(x) for x in v.split("/")] for t, v in (item.split("=")
                                                                for item in a.lrs.split(","))}
    iters = ({t: int(v) for t, v in (item.split("=") for item in a.iters.split(","))}
             if "=" in a.iters
             else int(a.iters))
    command = "python -m crosscurv.experiments.cli.commands.advise study " + " ".join(shlex.quote(
        x) for x in argv)
    print(study(a.tasks.split(","), [int(s) for s in a.seeds.split(",")], iters, a.out, a.preset,
                lrs, command))
    return 0


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:2] == ["study"]:
        sys.exit(_study_main(sys.argv[2:]))
    sys.exit("usage: python -m crosscurv.experiments.cli.commands.advise study [--tasks ...] "
             "[--seeds ...] [--iters K|TASK=K,...] [--lrs TASK=LR1/LR2,...] [--out DIR]")
