"""Validation of ``crosscurv advise --search``: the patterns it names against plain training.

For each problem the search (:func:`crosscurv.numeric.pattern_search.search`, certified) names the
best pattern for each number ``D`` of sequential stages; the patterns are then trained plainly
(``K`` exact scheme steps each, :func:`crosscurv.numeric.advice_cost.plain_losses`) and the measured
gap ``L_S^K - L_JC^K`` of the named pattern is compared with the best measured one among the
patterns with at most ``D`` stages:

* the zoo (3-4 blocks, float64; none of them used while building the search): random coupled block
  quadratics, random quartic polynomials, a tanh MLP, deep matrix factorisations; the space ``all``
  is trained exhaustively (25 or 543 patterns), so the best measured is the true best;
* an 8-block tanh MLP (float64, a smooth loss: :func:`eight_blocks`) and the built-in ``mlp`` task
  (8 blocks, smoke preset, float32, ReLU: its steps cross kinks, which the expansions do not
  describe): the stage arrangements (545,835) and the GS orders (40,320); trained: the named front,
  the 5 best predicted patterns of the largest budget and a seeded random sample of the space, so
  "best measured" is the best of those. Their cost is also given against plain training of 8
  patterns (the trained patterns' mean cost per pattern, times 8).

Per budget ``D`` (every number of stages the space reaches; the named pattern is JC where nothing
with at most ``D`` stages is predicted below it): ``regret`` = measured gap of the named pattern
minus the best measured gap (0: the named pattern is the best), ``rank`` of the named pattern among
the measured ones, ``spread`` = worst minus best measured gap in the class (what a random choice
risks), and whether the choice was certified and right.

    python -m crosscurv.experiments.studies.pattern_search --out reports/advise

``--report-only`` writes ``search.md`` again from the saved ``search.json``.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
import torch

__all__ = ["zoo", "eight_blocks", "validate_problem", "findings", "report", "rewrite_report",
           "write_outputs", "search_study"]

#: lr = factor / lam (lam: the curvature scale of crosscurv.experiments.problems)
ZOO_FACTORS = (0.25, 1.0)
#: (lr, K) of the mlp rows: the smoke preset's rate, and the default preset's (below the edge)
MLP_RUNS = ((0.05, 50), (0.007, 100))
ZOO_ITERS = 30
#: K of the 8-block tanh MLP's rows (at each of :data:`ZOO_FACTORS`)
EIGHT_ITERS = 50


def zoo() -> list[tuple[str, object]]:
    """``[(label, task)]``: the problems the search is validated on (float64, 3-4 blocks)."""
    from crosscurv.experiments.problems import quartic_problem, tanh_mlp_problem
    from crosscurv.experiments.problems.curvature_scale import curvature_scale
    from crosscurv.experiments.problems.factorisation import factorisation_problem
    from crosscurv.experiments.problems.toys import coupled_quadratic

    out = []
    for seed in (0, 1):
        for sizes in ((2, 3, 2), (2, 2, 3, 2)):
            task = coupled_quadratic(sizes, seed=seed, shift=0.5, name=f"quadratic{len(sizes)}")[0]
            out.append((f"quadratic N={len(sizes)} seed {seed}", task, curvature_scale(task)))
        for dims in ((2, 2, 2), (2, 1, 2, 2)):
            p = quartic_problem(seed, dims)
            out.append((f"quartic N={len(dims)} seed {seed}", p.task, p.scale))
        for nb in (3, 4):
            p = tanh_mlp_problem(seed, widths=(3, 5, 4, 2), n_blocks=nb)
            out.append((f"tanh MLP N={nb} seed {seed}", p.task, p.scale))
        for nf in (3, 4):
            p = factorisation_problem(seed, n_factors=nf)
            out.append((f"factorisation N={nf} seed {seed}", p.task, p.scale))
    return out


def eight_blocks() -> list[tuple[str, object, float]]:
    """``[(label, task, lam)]``: 8-block tanh MLPs (widths 4-6-...-6-2, eight layers of weights and
    biases in 8 random blocks, 16 examples, float64), seeds 0 and 1."""
    from crosscurv.experiments.problems import tanh_mlp_problem

    out = []
    for seed in (0, 1):
        p = tanh_mlp_problem(seed, widths=(4, 6, 6, 6, 6, 6, 6, 6, 2), n_blocks=8, n_examples=16)
        out.append((f"tanh MLP N=8 seed {seed}", p.task, p.scale))
    return out


def _class_rows(front, measured: dict, depth_of: dict) -> list[dict]:
    """Per budget of the front: the named pattern against the measured ones with at most that many
    stages."""
    rows = []
    for f in front:
        if f["stages"] == 1:
            continue
        d = f["stages"]
        cls = {n: g for n, g in measured.items() if depth_of[n] <= d and math.isfinite(g)}
        if f["best"] not in cls:
            continue
        best = min(cls, key=cls.get)
        ranked = sorted(cls.values())
        rows.append(
            {
                "stages": d,
                "named": f["best"],
                "predicted": f["estimate"],
                "measured": cls[f["best"]],
                "best": best,
                "best_measured": cls[best],
                "regret": cls[f["best"]] - cls[best],
                "spread": ranked[-1] - ranked[0],
                "rank": ranked.index(cls[f["best"]]) + 1,
                "of": len(cls),
                "certified": f["certified"],
                "right": f["best"] == best,
                "error": f["error"],
                "margin": f["margin"],
                "runner_up_error": f["runner_up_error"],
                "rankable": f.get("rankable"),
            }
        )
    return rows


def _final_only(fast, front: list[dict], measured: dict, depth: dict) -> dict:
    """The final-only search's front (predictions at ``K`` without the quadratic term) against the
    full search's and the measured gaps: ``{"classes", "same", "of", "search_s"}`` (``same``: the
    budgets where it names the full search's pattern)."""
    full = {f["stages"]: f["best"] for f in front}
    named = [f for f in fast.front if f["stages"] > 1 and f["stages"] in full]
    return {"classes": _class_rows(fast.front, measured, depth),
            "same": sum(f["best"] == full[f["stages"]] for f in named), "of": len(named),
            "search_s": fast.cost["pair_run_s"] + fast.cost["evaluate_s"]}


def validate_problem(
    label: str, task, lr: float, iters: int, space: str, sample: int = 0, seed: int = 0,
    group: str | None = None
) -> dict:
    """Search ``space``, train the named patterns (and every pattern, or ``sample`` others) and
    compare; ``group``: the row's group of :data:`GROUPS` (default: by ``sample``)."""
    from crosscurv.numeric.advice_cost import plain_losses
    from crosscurv.numeric.pattern_search import search

    t0 = time.process_time()
    res = search(task, lr, iters, space, seed=seed)
    search_s = res.cost["pair_run_s"] + res.cost["evaluate_s"]
    sp = res.space
    K = res.records.iters
    vals = res.records.predict(sp.members, K)
    if sample:
        rng = np.random.default_rng(seed)
        rows = set(rng.choice(len(sp), min(sample, len(sp)), replace=False).tolist())
        rows |= set(np.argsort(vals, kind="stable")[:5].tolist())
    else:
        rows = set(range(len(sp)))
    fast = search(task, lr, iters, space, seed=seed, certify=False, final_only=True)
    names = {sp.name(int(r)): int(r) for r in rows}
    for f in res.front + fast.front:
        for n in (f["best"], f["runner_up"]):
            if n is not None and n != "jc" and n not in names:
                from crosscurv.theory.pattern_spaces import pair_list
                from crosscurv.theory.patterns import as_pattern

                pairs = as_pattern(n, sp.n_blocks).pairs
                key = np.array([p in pairs for p in pair_list(sp.n_blocks)])
                names[n] = int(np.flatnonzero((sp.members == key).all(axis=1))[0])
    t1 = time.process_time()
    jc = plain_losses(task, "jc", lr, K)[-1]
    in_space = bool((~sp.members.any(axis=1)).any())  # JC is a member (stages, all), not of orders
    measured = {"jc": 0.0} if in_space else {}
    depth = {"jc": 1}
    for n, r in names.items():
        if n == "jc":
            continue
        measured[n] = plain_losses(task, n, lr, K)[-1] - jc
        depth[n] = int(sp.depth[r])
    plain_s = time.process_time() - t1
    pred = {n: float(vals[r]) for n, r in names.items()}
    both = [n for n in measured if n != "jc" and math.isfinite(measured[n])]
    corr = (
        float(
            np.corrcoef(
                np.argsort(np.argsort([pred[n] for n in both])),
                np.argsort(np.argsort([measured[n] for n in both])),
            )[0, 1]
        )
        if len(both) > 2
        else math.nan
    )
    return {
        "problem": label,
        "group": group or (GROUPS[0] if not sample else GROUPS[-1]),
        "blocks": sp.n_blocks,
        "space": sp.spec,
        "patterns": len(sp),
        "lr": lr,
        "iters": K,
        "trained": len(measured),
        "exhaustive": not sample,
        "rank_correlation": corr,
        "classes": _class_rows(res.front, measured, depth),
        "final_only": _final_only(fast, res.front, measured, depth),
        "search_s": search_s,
        "certify_s": res.cost["certify_s"],
        "plain_s": plain_s,
        "cpu_s": time.process_time() - t0,
        "status": res.status,
    }


def _fmt(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


#: the groups of rows of the report: the zoo's exhaustive spaces, the 8-block tanh MLP's and the
#: mlp's sampled ones
GROUPS = ("zoo (exhaustive)", "tanh N=8 (sampled)", "mlp (sampled)")


def _group(r: dict) -> str:
    """The row's group (rows saved without one: by whether the space was trained exhaustively)."""
    return r.get("group") or (GROUPS[0] if r["exhaustive"] else GROUPS[-1])


def patterns_trained(r: dict) -> int:
    """The patterns other than JC a row trained: ``trained`` counts JC's gap (0) where JC is a
    pattern of the space (``stages``, ``all``), not in ``orders``."""
    return r["trained"] - (r["space"] != "orders")


def plain8_ratio(r: dict, final_only: bool = False) -> float:
    """A sampled row's search seconds (``final_only``: the final-only search's) over plain training
    of 8 of its patterns: ``plain_s`` times the JC run and every trained pattern's, so 8 times its
    mean over those runs (JC's steps are the cheapest: the ratio errs high); NaN without a trained
    pattern or final-only search."""
    runs = patterns_trained(r) + 1
    sec = r.get("final_only", {}).get("search_s", math.nan) if final_only else r["search_s"]
    return sec / (8 * r["plain_s"] / runs) if runs > 1 and r["plain_s"] > 0 else math.nan


def _classes(r: dict, final_only: bool) -> list[dict]:
    """A row's budgets: the full search's, or the final-only search's (``[]`` for rows saved
    without one)."""
    return r.get("final_only", {}).get("classes", []) if final_only else r["classes"]


def _tally(rows: list[dict], final_only: bool = False) -> dict:
    """Per group of :data:`GROUPS`, over the budgets of the problems whose JC run completed:
    ``{"right", "regret", "certified", "same"}``, each ``[hits, of]`` (named = best measured; regret
    within 5% of the class's spread; certified choices right; the final-only search naming the full
    search's pattern), of the full search or of the final-only one."""
    tally = {g: {"right": [0, 0], "regret": [0, 0], "certified": [0, 0], "same": [0, 0]}
             for g in GROUPS}
    for r in rows:
        if r["status"] != "complete":
            continue  # a diverged JC run: listed, not counted
        t = tally[_group(r)]
        if "final_only" in r:
            t["same"][0] += r["final_only"]["same"]
            t["same"][1] += r["final_only"]["of"]
        for c in _classes(r, final_only):
            t["right"][0] += int(c["right"])
            t["right"][1] += 1
            t["regret"][0] += int(c["regret"] <= 0.05 * c["spread"])
            t["regret"][1] += 1
            if c["certified"]:
                t["certified"][0] += int(c["right"])
                t["certified"][1] += 1
    return tally


def findings(rows: list[dict]) -> list[str]:
    """The report's opening, at most five lines: per group, how often the named pattern was the best
    measured, its regret small and its certificate right; the rank correlation of predicted and
    measured gaps; the problems whose JC run diverged."""
    tally = _tally(rows)
    out = ["Found:"]
    for g, t in tally.items():
        if not t["right"][1]:
            continue
        n, of = t["certified"]
        ends = _ratio_span(rows, g, False)
        cost = f"; search {ends} x plain training of 8 patterns" if ends else ""
        if t["same"][1]:
            fast = _ratio_span(rows, g, True)
            cost += (f"; final-only: same pattern at {t['same'][0]}/{t['same'][1]}"
                     + (f", {fast} x" if fast else ""))
        out.append(f"- {g}: named = best measured at {t['right'][0]}/{t['right'][1]} budgets; "
                   f"regret < 5% of the spread at {t['regret'][0]}/{t['regret'][1]}; "
                   + (f"certified right {n}/{of}" if of else "none certified") + cost + ".")
    corr = {g: [r["rank_correlation"] for r in rows if r["status"] == "complete"
                and _group(r) == g and r["rank_correlation"] is not None
                and math.isfinite(r["rank_correlation"])] for g in GROUPS}
    shown = [f"{g.split()[0]} {np.median(c):.3g}" for g, c in corr.items() if c]
    if shown:
        out.append("- Median rank correlation, predicted vs measured gap: " + ", ".join(shown)
                   + _scale_note(rows) + ".")
    bad = [r for r in rows if r["status"] != "complete"]
    if bad:
        how = "/".join(sorted({r["status"] for r in bad}))
        out.append(f"- {len(bad)} of {len(rows)} JC runs {how}: listed, not counted.")
    return out


def _ratio_span(rows: list[dict], group: str, final_only: bool) -> str:
    """The span of :func:`plain8_ratio` over a group's completed sampled rows (``""``: none)."""
    ratio = [plain8_ratio(r, final_only) for r in rows if _group(r) == group
             and not r["exhaustive"] and r["status"] == "complete"]
    ratio = [x for x in ratio if math.isfinite(x)]
    return "-".join(sorted({f"{min(ratio):.2g}", f"{max(ratio):.2g}"}, key=float)) if ratio else ""


def _scale_note(rows: list[dict]) -> str:
    """For the sampled group: how many times the predictions the measured gaps of the named patterns
    are, and at how many budgets the margin to the runner-up is within the errors (``rankable``
    false: advise says it cannot rank them); ``""`` when no row tells."""
    cls = [c for r in rows if r["status"] == "complete" and _group(r) == GROUPS[-1]
           for c in r["classes"]]
    ratio = [c["measured"] / c["predicted"] for c in cls
             if c["predicted"] and math.isfinite(c["predicted"]) and math.isfinite(c["measured"])]
    told = [c for c in cls if c.get("rankable") is not None]
    if not ratio:
        return ""
    note = (f" (mlp: the named patterns' measured gaps are {min(ratio):.2g}-{max(ratio):.2g} x "
            "their predictions")
    if told:
        no = sum(not c["rankable"] for c in told)
        note += (f"; the margin to the runner-up within the errors at {no}/{len(told)} budgets, "
                 "where advise says it cannot rank them")
    return note + ")"


#: the study's figure, relative to its report (:mod:`crosscurv.experiments.studies.
#: pattern_search_figure`)
FIGURE = "../figures/advise_search.png"


def report(rows: list[dict], command: str) -> str:
    """The markdown of ``reports/advise/search.md`` (it links :data:`FIGURE`, which
    :func:`write_outputs` draws)."""
    lines = [
        "# `crosscurv advise --search`: the named patterns against plain training",
        "",
        *findings(rows),
        "",
        f"Generated by `{command}` (CPU, {torch.get_num_threads()} thread(s)). For each problem "
        "the search names, per number D of sequential stages, the pattern with the lowest JC-only "
        "prediction among those with at most D stages (certified as single candidates are, "
        "`crosscurv.numeric.pattern_search`); each pattern is then trained plainly for K steps "
        "and its measured gap `L_S^K - L_JC^K` compared with the best measured one among the "
        "trained patterns with at most D stages. Zoo rows: the space `all`, trained exhaustively "
        "(the best measured is the true best); lr = f / lam with lam the curvature scale of "
        f"`crosscurv.experiments.problems` and f in {ZOO_FACTORS} (the label's 'eta lam'), "
        f"K = {ZOO_ITERS}. Sampled rows (the 8-block tanh MLP of `eight_blocks`, float64, at the "
        f"same lr = f / lam, K = {EIGHT_ITERS}; the built-in mlp, float32 with ReLU "
        "activations): the named front, the 5 best predicted and a seeded random "
        "sample trained, so 'best' is the best of those. 'regret': measured gap of the named "
        "pattern minus the best one (0: the named one is the best); 'spread': worst minus best "
        "measured gap of the class (what an arbitrary choice risks); 'rank': of the named pattern "
        "among the trained ones of its class; 'rank corr.': Spearman correlation "
        "of predicted and measured gaps over the trained patterns.",
        "",
        f"![predicted against measured gaps of the named patterns, per group]({FIGURE})",
        "",
        "| problem | space (patterns) | trained | rank corr. | D | named | predicted | measured | "
        "best measured | regret | spread | rank | certified | right |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for i, c in enumerate(r["classes"]):
            label = r["problem"] + ("" if r["status"] == "complete" else
                                    f" (JC run {r['status']}: K = {r['iters']})")
            head = (f"| {label} | {r['space']} ({r['patterns']:,}) | {r['trained']} "
                    f"| {_fmt(r['rank_correlation'])} " if i == 0 else "| | | | ")
            cert = {True: "yes", False: "no", None: "-"}[c["certified"]]
            lines.append(head + f"| {c['stages']} | {c['named']} | {_fmt(c['predicted'])} "
                                f"| {_fmt(c['measured'])} | {_fmt(c['best_measured'])} "
                         f"| {_fmt(c['regret'])} | {_fmt(c['spread'])} | {c['rank']}/{c['of']} "
                                f"| {cert} | {'yes' if c['right'] else 'no'} |")
    tally = _tally(rows)
    cpu = sum(r["cpu_s"] for r in rows)
    lines += ["", "Over the budgets of the problems whose JC run completed:", "",
              "| rows | named = best measured (budgets) | regret within 5% of the spread "
              "| certified choices right |", "|---|---|---|---|"]
    for g, t in tally.items():
        lines.append(f"| {g} | {t['right'][0]}/{t['right'][1]} | {t['regret'][0]}/{t['regret'][1]} "
                     f"| {t['certified'][0]}/{t['certified'][1]} |")
    lines += _final_only_section(rows)
    lines += ["", "Cost per problem (CPU s): the search (JC run with the per-pair states and the "
                  "evaluation of the space), the final-only search (the adjoint sweep and the "
              "evaluation), the certification (the embedded pair of the front's "
              "patterns and runners-up along the JC run, and the gates) and the plain training of "
                  "the trained patterns.", "",
              "| problem | search s | final-only s | certify s | plain training s (patterns, and "
              "JC) | search / plain 8 | final-only / plain 8 |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "-" if r["exhaustive"] else _fmt(plain8_ratio(r))
        fast = "-" if r["exhaustive"] else _fmt(plain8_ratio(r, True))
        lines.append(f"| {r['problem']} ({r['space']}) | {r['search_s']:.2f} "
                     f"| {_fmt(r.get('final_only', {}).get('search_s'))} "
                     f"| {r['certify_s']:.2f} | {r['plain_s']:.2f} ({patterns_trained(r)}) "
                     f"| {ratio} | {fast} |")
    lines += ["", f"CPU time in all: {cpu / 60:.1f} core-minutes."]
    return "\n".join(lines) + "\n"


def _final_only_section(rows: list[dict]) -> list[str]:
    """The final-only search (``--final-only``: the per-pair terms at ``K`` by the adjoint sweep,
    the quadratic term left out) against the full search and the measured gaps, per group."""
    full, fast = _tally(rows), _tally(rows, final_only=True)
    if not any(t["same"][1] for t in full.values()):
        return []
    out = ["", "The final-only search (`advise --search SPACE --final-only`: the per-pair terms at "
           "K by an adjoint sweep, N + 1 Hessian-vector products per iteration instead of N^2, "
           "without the quadratic term of the prediction), on the same runs, uncertified: the "
           "budgets where it names the full search's pattern, and its named patterns against the "
           "measured gaps.", "",
           "| rows | same pattern as the full search | named = best measured | regret within 5% "
           "of the spread | search / plain 8 |", "|---|---|---|---|---|"]
    for g, t in fast.items():
        if not full[g]["same"][1]:
            continue
        same = full[g]["same"]
        out.append(f"| {g} | {same[0]}/{same[1]} | {t['right'][0]}/{t['right'][1]} "
                   f"| {t['regret'][0]}/{t['regret'][1]} | {_ratio_span(rows, g, True) or '-'} |")
    return out


def rewrite_report(out: str) -> None:
    """Write ``OUT/search.md`` again from ``OUT/search.json`` (its runs and command), running
    nothing.

    Raises:
        crosscurv.numeric.records.RecordsError: no readable ``OUT/search.json``.
    """
    from crosscurv.numeric.records import read_summary

    saved = read_summary(os.path.join(out, "search.json"))
    write_outputs(out, saved["rows"], saved["command"])


def write_outputs(out: str, rows: list[dict], command: str) -> str:
    """Write ``OUT/search.md`` and its figure (:data:`FIGURE`, relative to ``OUT``); return the
    report's text."""
    from crosscurv.experiments.studies.pattern_search_figure import search_figure
    from crosscurv.numeric.records import atomic_write_text

    text = report(rows, command)
    grouped = {g: [r for r in rows if _group(r) == g] for g in GROUPS}
    search_figure(grouped, os.path.normpath(os.path.join(out, FIGURE)))
    atomic_write_text(os.path.join(out, "search.md"), text)
    return text


def search_study(out: str, sample: int = 40, zoo_problems: bool = True, command: str = "") -> str:
    """The study: every zoo problem at each of :data:`ZOO_FACTORS` (``zoo_problems``), the 8-block
    tanh MLPs (:func:`eight_blocks`) at each of :data:`ZOO_FACTORS` and the smoke MLP at each of
    :data:`MLP_RUNS`, both in both spaces (``sample`` random patterns trained per space), one
    intra-op thread; writes ``OUT/search.json`` and ``OUT/search.md`` (``command``: the command
    line named in it) and returns the report's text."""
    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.records import write_summary

    torch.set_num_threads(1)
    rows = []

    def done(what):
        got = [(c["stages"], c["right"]) for c in rows[-1]["classes"]]
        print(f"search study: {what}: {got}", file=sys.stderr, flush=True)

    if zoo_problems:
        for factor in ZOO_FACTORS:
            for label, task, lam in zoo():
                name = f"{label}, eta lam {factor}"
                rows.append(validate_problem(name, task, factor / lam, ZOO_ITERS, "all"))
                done(name)
    for factor in ZOO_FACTORS:
        for label, task, lam in eight_blocks():
            name = f"{label}, eta lam {factor}"
            for space in ("stages", "orders"):
                rows.append(validate_problem(name, task, factor / lam, EIGHT_ITERS, space,
                                             sample=sample, group=GROUPS[1]))
                done(f"{name} {space}")
    task, _ = load_task("mlp", "smoke", device=torch.device("cpu"))
    for lr, iters in MLP_RUNS:
        for space in ("stages", "orders"):
            name = f"mlp smoke lr {lr} K {iters}"
            rows.append(validate_problem(name, task, lr, iters, space, sample=sample,
                                         group=GROUPS[-1]))
            done(f"{name} {space}")
    os.makedirs(out, exist_ok=True)
    write_summary(os.path.join(out, "search.json"), {"command": command, "rows": rows})
    return write_outputs(out, rows, command)


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import pattern_search

    sys.exit(pattern_search())
