"""``reports/certificates.md``: the certificates measured on the problem zoo, old against new.

From the zoo's runs (:mod:`crosscurv.experiments.studies.zoo_runs`: advice rows and every
candidate's record columns) each certificate is recomputed, so the report depends on the runs'
measured quantities only:

* advise, new: :func:`crosscurv.numeric.certificate.certify_best` with
  :func:`crosscurv.numeric.certificate.advice_next_orders` as the first dropped order, inside while
  ``eta * sharpness_j < 2`` for every ``j <= k``;
* advise, old: the margin to the runner-up above the sum of the two embedded errors, the one-step
  check at ``theta^0`` converging, inside the same regime;
* records, new: :func:`crosscurv.numeric.certificate.record_certificates` (what ``crosscurv run``
  now records);
* records, old: ``|estimate| > *_err`` (the a-posteriori bound) with ``eta * max(lambda_max,
  sharpness) < 2`` at that record.

Counts (:mod:`crosscurv.numeric.regret`): an advice iteration is *decided* when the measurement
orders some candidate below the measured best; it is *right* when the advised scheme ties the
measured best within the measurement's error (or both are full GS orders the certificate could not
tell apart); a record is decided when ``|gap| > gap_err``
(:func:`crosscurv.numeric.metrics.certified_metrics`). Precision: right among the certified;
coverage: certified among the decided; regret: :func:`crosscurv.numeric.regret.regret`.

The safety factor (:func:`choose_factor`) is the smallest of :data:`FACTORS` whose precision is at
least :data:`TARGET` on every problem of the halves it is chosen on, for advise and for every record
estimate. The report gives the tuning half's choice, whose precision the other halves measure, and
the code's: the choice over every half but ``fresh`` (:data:`SEEN`); the fresh problems were added
after it, only to test it.
"""

from __future__ import annotations

import math
from collections import defaultdict

__all__ = [
    "FACTORS",
    "TARGET",
    "WINDOWS",
    "advice_counts",
    "record_counts",
    "records_decided_inside",
    "choose_factor",
    "choose_window",
]

#: safety factors tried (:func:`choose_factor`)
FACTORS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: the precision (percent) every problem a choice is made on must reach: ten times fewer wrong
#: certificates than the promised 99%, so that the halves it is not made on have room
TARGET = 99.9
_EST = ("jc_only", "cumulative", "recursive")
#: the records' look-backs tried on the tuning half
#: (:data:`crosscurv.numeric.certificate.RECORD_WINDOW`)
WINDOWS = (3, 5, 8, 12, 20)


def _f(x) -> float:
    return math.nan if x is None else float(x)


def _checks_converge(adv) -> bool:
    for chk in adv.get("one_step_checks") or []:
        for c in (chk or {}).values():
            m, p2, p3 = _f(c["measured"]), _f(c["eta2"]), _f(c["eta3"])
            if math.isfinite(m) and abs(m - p3) > max(abs(p3 - p2), _f(c["floor"])):
                return False
    return True


#: the first-step terms of advise's certificate compared on the tuning half (:func:`first_step`)
FIRST_STEP_RULES = ("prediction", "theorem1", "no withdrawal")
#: why a decided iteration inside the regime goes uncertified (:func:`advice_counts`), in the order
#: they are tested
CAUSES = (
    "below rounding",
    "first-step withdrawal",
    "first-step term",
    "look-back",
    "edge amplification",
    "safety factor",
    "embedded error",
)


def _checks(adv) -> list:
    return [
        {n: {k: _f(v) for k, v in c.items()} for n, c in (chk or {}).items()}
        for chk in adv.get("one_step_checks") or []
    ]


def first_step(run: dict, rule: str = "prediction") -> dict:
    """``{candidate: N_S^1}`` of one run's advice: ``prediction`` the code's
    (:func:`crosscurv.numeric.certificate.first_step_orders`: the JC-only estimate's measured error
    at the first step, ``inf`` where the expansion does not describe that step); ``theorem1`` the
    previous term, the remainder of ``eta^2 C_S`` (:func:`crosscurv.numeric.advice.
    first_step_remainders`); ``no withdrawal``: ``prediction`` without the ``inf``."""
    from crosscurv.numeric.certificate import first_step_remainders
    from crosscurv.numeric.certificate import first_step_orders

    adv = run["advice"]
    checks, rows = _checks(adv), adv["per_iteration"]
    p1 = {n: _f(x) for n, x in rows[0]["estimates"].items()} if rows else {}
    if rule == "theorem1":
        return first_step_remainders(checks)
    out = first_step_orders(checks, p1)
    if rule == "no withdrawal":
        out = {n: abs(_f(c["measured"]) - p1.get(n, math.nan)) if math.isinf(v) else v
               for n, v in out.items() for c in [checks[0][n]]}
    return out


def _cause(est, window, first, k, gs, factor, kw, spread) -> str:
    """The first of :data:`CAUSES` that, removed, certifies the iteration: ``below rounding``, the
    measured gaps' ``spread`` within ``kw["floor"]`` (a loss difference's rounding), which no
    certificate separates; ``embedded error``: none does. ``kw``: the row's ``floor``,
    ``amplification`` and ``exact`` of :func:`crosscurv.numeric.certificate.advice_next_orders`."""
    from crosscurv.numeric.certificate import advice_next_orders, certify_best

    if spread <= kw["floor"]:
        return CAUSES[0]
    if any(math.isinf(v) for v in first.values()):
        return CAUSES[1]
    flat = {**kw, "amplification": 1.0}
    for cause, nxt, f in (
        (CAUSES[2], advice_next_orders(window, {}, k, **kw), factor),
        (CAUSES[3], advice_next_orders(window[-1:], {}, k, window=1, **kw), factor),
        (CAUSES[4], advice_next_orders(window, first, k, **flat), factor),
        (CAUSES[5], advice_next_orders(window, first, k, **kw), 1.0),
    ):
        if certify_best(est, nxt, True, gs, f)["certified"]:
            return cause
    return CAUSES[6]


def _measured(recs: dict, cands, i: int) -> tuple[dict, dict]:
    """``({candidate: gap}, {candidate: gap_err})`` of iteration ``i`` from the candidates' records
    (JC: 0; ``nan`` past a candidate's last record)."""
    def col(n, key):
        if n == cands[0]:
            return 0.0
        return _f(recs[n][key][i]) if i < len(recs[n]["gap"]) else math.nan

    return {n: col(n, "gap") for n in cands}, {n: col(n, "gap_err") for n in cands}


def advice_counts(
    run: dict,
    factor: float | None,
    first_rule: str = "prediction",
    certify=None,
    pairwise=None,
) -> dict:
    """``{"right", "certified", "decided", "decided_inside", "regret_sum", "regret_n",
    "regret_cert_sum", "wrong_k", "causes", "error_ratios"}`` of one run's advice under the new
    certificate with ``factor`` (``None``: the old rule) and the first-step term ``first_rule``
    (:func:`first_step`); ``decided_inside``: decided while the JC run stayed below the edge;
    ``causes``: ``{cause: n}`` of the decided iterations inside the regime left uncertified
    (:data:`CAUSES`); ``error_ratios``: ``|gap - estimate| / error`` of every candidate at those
    iterations (the embedded error's calibration); ``certify``: the rule, default
    :func:`crosscurv.numeric.certificate.certify_best`; ``pairwise``: ``pairwise(run)`` returns the
    rule ``at(i, row, estimates, inside, gs, factor) -> verdict`` that replaces it, with the
    embedded error of each difference (:func:`crosscurv.experiments.studies.certificates_levers.
    pairwise_rule`)."""
    from crosscurv.numeric.advice import decide
    from crosscurv.numeric.certificate import (REMAINDER_WINDOW, advice_next_orders,
                                               certify_best, edge_amplification, rounding_floor)
    from crosscurv.numeric.error_estimates import regime_so_far
    from crosscurv.numeric.regret import advice_right, regret
    from crosscurv.theory.patterns import as_pattern

    adv, recs, lr = run["advice"], run["records"], run["lr"]
    dtype = adv["settings"].get("dtype", "float64")
    rows, cands = adv["per_iteration"], adv["candidates"]
    names = list(run["advice"]["settings"]["blocks"])
    n_blocks = len(names)
    gs = [n for n in cands if n_blocks > 1 and as_pattern(n, n_blocks, names).is_full_gs()]
    inside = regime_so_far([lr * _f(r["sharpness"]) for r in rows])
    converges = _checks_converge(adv)
    first = first_step(run, first_rule)
    certify = certify or certify_best
    errors = [{n: _f(x) for n, x in r["errors"].items()} for r in rows]
    at = pairwise(run) if pairwise else None
    out = {
        "right": 0,
        "certified": 0,
        "decided": 0,
        "decided_inside": 0,
        "regret_sum": 0.0,
        "regret_n": 0,
        "regret_cert_sum": 0.0,
        "wrong_k": [],
        "causes": dict.fromkeys(CAUSES, 0),
        "error_ratios": [],
    }
    for i, r in enumerate(rows):
        gaps, errs = _measured(recs, cands, i)
        if any(not math.isfinite(g) for g in gaps.values()):
            continue
        est = {n: _f(r["estimates"][n]) for n in cands}
        kw = {"floor": rounding_floor(_f(r["loss_jc"]), dtype), "exact": cands[:1],
              "amplification": edge_amplification(lr * _f(r["sharpness"]))}
        nxt = {n: _f(r["errors"][n]) for n in cands}
        window = errors[max(0, i + 1 - REMAINDER_WINDOW) : i + 1]
        if at:
            v = at(i, r, est, inside[i], gs, factor)
            best, tied, cert = v["best"], v["tied"], v["certified"]
        elif factor is None:
            d = decide(est, {n: nxt[n] if math.isfinite(nxt[n]) else math.inf for n in cands})
            best, tied, cert = d["best"], [d["best"]], d["certified"] and converges and inside[i]
        else:
            v = certify(est, advice_next_orders(window, first, r["k"], **kw), inside[i], gs,
                        factor)
            best, tied, cert = v["best"], v["tied"], v["certified"]
        theory = [n for n in tied if n in gs] if best in gs else []
        reg = regret(best, gaps, errs, theory)
        if not math.isfinite(reg):
            continue
        right = advice_right(best, gaps, errs, theory)
        out["decided"] += 1
        out["decided_inside"] += bool(inside[i])
        out["regret_sum"] += reg
        out["regret_n"] += 1
        if cert:
            out["certified"] += 1
            out["right"] += right
            out["regret_cert_sum"] += reg
            if not right:
                out["wrong_k"].append(r["k"])
        elif factor is not None and inside[i] and not at:
            spread = max(gaps.values()) - min(gaps.values())
            out["causes"][_cause(est, window, first, r["k"], gs, factor, kw, spread)] += 1
            out["error_ratios"] += [
                abs(gaps[n] - est[n]) / nxt[n] for n in cands[1:] if nxt[n] > 0
            ]
    return out


def record_counts(run: dict, factor: float | None, window=None, withdraw: bool = True) -> dict:
    """``{estimate: [right, certified, decided]}`` over every candidate's records of one run
    (``factor`` ``None``: the old rule, ``|estimate| > *_err`` at a record below the edge;
    ``window``, ``withdraw``: :func:`crosscurv.numeric.certificate.record_certificates`'s, default
    the code's)."""
    from crosscurv.numeric.certificate import record_certificates
    from crosscurv.numeric.error_estimates import certify, in_regime
    from crosscurv.numeric.metrics import certified_metrics

    out = {e: [0, 0, 0] for e in _EST}
    for cols in run["records"].values():
        cols = {c: [_f(x) for x in v] for c, v in cols.items()}
        if factor is None:
            top = [
                max((x for x in (a, b) if math.isfinite(x)), default=math.nan)
                for a, b in zip(cols["sharpness"], cols["lambda_max"])
            ]
            certs = {
                e: [
                    certify(x, err, in_regime(run["lr"], t))
                    for x, err, t in zip(cols[e], cols[f"{e}_err"], top)
                ]
                for e in _EST
            }
        else:
            kw = {} if window is None else {"window": window}
            dtype = run["advice"]["settings"].get("dtype", "float64")
            certs = record_certificates(cols, run["lr"], factor, withdraw=withdraw, dtype=dtype,
                                        **kw)
        for e in _EST:
            m = certified_metrics(cols["gap"], cols[e], certs[e], cols["gap_err"])
            out[e][0] += m["correct"]
            out[e][1] += m["certified"]
            out[e][2] += m["decided"]
    return out


def records_decided_inside(run: dict) -> int:
    """The decided records (``|gap| > gap_err``) of one run's candidates while its JC run has stayed
    inside the regime, ``eta * max(lambda_max, sharpness_j) < 2`` for every ``j <= k`` (the
    records' certificates are withdrawn outside it), summed over the candidates."""
    from crosscurv.numeric.error_estimates import in_regime
    from crosscurv.numeric.metrics import GS, JC, undecided, winner

    out = 0
    for cols in run["records"].values():
        inside = True
        lam = cols.get("lambda_max") or [None] * len(cols["gap"])
        for g, e, sh, lm in zip(cols["gap"], cols["gap_err"], cols["sharpness"], lam):
            tops = [x for x in (_f(sh), _f(lm)) if math.isfinite(x)]
            inside = inside and in_regime(run["lr"], max(tops, default=math.nan))
            g, e = _f(g), _f(e)
            out += bool(inside and not undecided(g, e) and winner(g) in (JC, GS))
    return out


def _pct(a, b) -> float:
    return 100.0 * a / b if b else math.nan


#: the zoo's halves in report order (the problems beyond the zoo, then the fresh ones, last)
HALVES = ("tune", "held-out", "beyond", "fresh")
#: the halves the code's safety factor is chosen on (``fresh`` only tests it)
SEEN = HALVES[:3]


def half_cells(cells: dict) -> list[str]:
    """Per half of :data:`HALVES`, ``"precision / coverage"`` inside the regime pooled over its
    problems, from ``{(half, problem): {"right", "certified", "decided_inside"}}``."""
    out = []
    for h in HALVES:
        sel = [v for (hh, _), v in cells.items() if hh == h]
        right, cert = sum(v["right"] for v in sel), sum(v["certified"] for v in sel)
        dec = sum(v["decided_inside"] for v in sel)
        out.append(f"{_pct(right, cert):.2f}% / {_pct(cert, dec):.1f}%")
    return out


def problems_below(cells: dict, goal: float) -> list[str]:
    """``"problem coverage%"`` of every cell whose coverage inside the regime is below ``goal``."""
    return [
        f"{p} {_pct(v['certified'], v['decided_inside']):.1f}%"
        for (_, p), v in cells.items()
        if _pct(v["certified"], v["decided_inside"]) < goal
    ]


def _cell(right, cert, dec) -> str:
    p, c = _pct(right, cert), _pct(cert, dec)
    ps, cs = ("n/a" if math.isnan(x) else f"{x:.1f}%" for x in (p, c))
    return f"{ps} / {cs}"


def _pool(runs, factor):
    """Per run: ``(advice counts, record counts)``."""
    return [(advice_counts(r, factor), record_counts(r, factor)) for r in runs]


def _precisions(runs, factor) -> dict:
    """``{(problem, kind): [right, certified, decided]}``, ``kind`` ``advise`` or an estimate."""
    out: dict = defaultdict(lambda: [0, 0, 0])
    for run, (a, rc) in zip(runs, _pool(runs, factor)):
        t = out[(run["problem"], "advise")]
        t[0] += a["right"]
        t[1] += a["certified"]
        t[2] += a["decided"]
        for e in _EST:
            t = out[(run["problem"], e)]
            for j in range(3):
                t[j] += rc[e][j]
    return out


def choose_factor(runs, halves=("tune",)) -> tuple[float, list]:
    """The smallest factor of :data:`FACTORS` with precision >= :data:`TARGET` on every problem of
    ``halves`` (advise and each record estimate), from those halves only; ``(factor, [(factor,
    worst precision, coverages)])``, coverages pooled over ``halves``."""
    sel = [r for r in runs if r["half"] in halves]
    table, chosen = [], None
    for f in FACTORS:
        prec = _precisions(sel, f)
        worst = min((_pct(v[0], v[1]) for v in prec.values() if v[1]), default=math.nan)
        cov = {}
        for kind in ("advise",) + _EST:
            tot = [sum(v[j] for (p, k), v in prec.items() if k == kind) for j in range(3)]
            cov[kind] = _pct(tot[1], tot[2])
        table.append((f, worst, cov))
        if chosen is None and worst >= TARGET:
            chosen = f
    return (chosen if chosen is not None else FACTORS[-1]), table


def _record_cells(runs, window, withdraw=True) -> dict:
    """``{(half, problem, c, estimate): [right, certified, decided]}`` of the records' certificate
    with the code's factor, look-back ``window``."""
    from crosscurv.numeric.certificate import SAFETY

    out: dict = defaultdict(lambda: [0, 0, 0])
    for run in runs:
        rc = record_counts(run, SAFETY, window, withdraw)
        for e in _EST:
            t = out[(run["half"], run["problem"], run["c"], e)]
            for j in range(3):
                t[j] += rc[e][j]
    return out


def choose_window(runs) -> tuple[int, list]:
    """The smallest look-back of :data:`WINDOWS` whose records' certificates reach
    :data:`TARGET` precision on every tuning problem *and learning rate*, from the tuning half
    only; ``(window, [(window, worst tuning cell, {half: coverage})])``."""
    table, chosen = [], None
    for w in WINDOWS:
        cells = _record_cells(runs, w)
        worst = min(
            (_pct(v[0], v[1]) for k, v in cells.items() if k[0] == "tune" and v[1]),
            default=math.nan,
        )
        cov = {}
        for half in HALVES:
            tot = [sum(v[j] for k, v in cells.items() if k[0] == half) for j in range(3)]
            cov[half] = _pct(tot[1], tot[2])
        table.append((w, worst, cov))
        if chosen is None and worst >= TARGET:
            chosen = w
    return (chosen if chosen is not None else WINDOWS[-1]), table


def _window_lines(runs) -> list:
    """The look-back section: its choice on the tuning half, and every problem's records under the
    previous rule (look-back 3, nothing withdrawn) against the code's."""
    from crosscurv.numeric.certificate import RECORD_WINDOW

    window, table = choose_window(runs)
    lines = [
        "",
        "## The records' look-back, chosen on the tuning half",
        "",
        "The records' first dropped order is the largest measured one-step remainder of the last "
        "`W` records, withdrawn while one of them exceeds the gap it corrects (module docstring of "
        "`crosscurv.numeric.certificate`). `W` is the smallest look-back whose records' "
        f"certificates reach {TARGET:g}% precision on every tuning problem and learning rate; the "
        f"held-out half and the problems beyond the zoo are measured with it. Chosen here: "
        f"**{window}**; the code's `crosscurv.numeric.certificate.RECORD_WINDOW` is "
        f"**{RECORD_WINDOW}**. Coverage pooled over the three estimates.",
        "",
        "| W | worst precision over the tuning problems and rates | coverage: "
        + " | ".join(HALVES) + " |",
        "| " + " | ".join(["---"] * (2 + len(HALVES))) + " |",
    ]
    for w, worst, cov in table:
        lines.append(
            f"| {w} | {worst:.2f}% | "
            + " | ".join(f"{cov[h]:.1f}%" for h in HALVES)
            + " |"
        )
    before, after = _record_cells(runs, 3, withdraw=False), _record_cells(runs, RECORD_WINDOW)
    lines += [
        "",
        "Per problem, the records' certificate before (look-back 3, nothing withdrawn) and after "
        "(the code's), precision / coverage, with the worst learning rate's precision after:",
        "",
        "| half | problem | "
        + " | ".join(f"{e} before | {e} after | {e} worst rate" for e in _EST)
        + " |",
        "| " + " | ".join(["---"] * (2 + 3 * len(_EST))) + " |",
    ]
    probs = list(dict.fromkeys((k[0], k[1]) for k in after))
    for half, prob in probs:
        cells = [half, prob]
        for e in _EST:
            keys = [k for k in after if k[:2] == (half, prob) and k[3] == e]
            b = [sum(before[k][j] for k in keys) for j in range(3)]
            a = [sum(after[k][j] for k in keys) for j in range(3)]
            worst = min((_pct(after[k][0], after[k][1]) for k in keys if after[k][1]),
                        default=math.nan)
            cells += [_cell(*b), _cell(*a), "n/a" if math.isnan(worst) else f"{worst:.1f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def fresh_modules(runs) -> str:
    """The modules that define the fresh runs' problems, in the runs' order: the first in full,
    then the last parts."""
    from crosscurv.experiments.problems.zoo import zoo_problem

    modules = dict.fromkeys(zoo_problem(r["problem"]).factory.__module__
                            for r in runs if r["half"] == "fresh")
    if not modules:
        return "none"
    first, *rest = modules
    return ", ".join([f"`{first}`"] + [f"`{m.rsplit('.', 1)[-1]}`" for m in rest])


def _intro_lines(runs, command: str) -> list:
    """The title, the generating command, what is measured and how it is counted."""
    return [
        f"Generated by `{command}` (`crosscurv.experiments.studies.certificates`; runs cached in "
        f"`runs/certificates/zoo-runs/`). Causes of an uncertified iteration: `embedded error`, "
        "the JC-only estimate's estimated error exceeds the predicted margins (and measures its "
        "real error: table below); `safety factor`, certified at F = 1 only. Where coverage at "
        "F = 1 stays below the goal, safety forbids it with this prediction. The opening's "
        "problems below the goal give the main cause's share of the uncertified iterations and "
        "the coverage at F = 1.",
        "",
        "Every zoo problem (`crosscurv.experiments.problems.zoo`) at learning rates "
        "`c / lambda_max(H^0)`, seeds "
        + ", ".join(sorted({str(r["seed"]) for r in runs}))
        + ": `crosscurv advise` with its default candidates, and every candidate's trajectory run "
          "beside JC by the protocol. Half `beyond`: the problems outside the zoo (`BEYOND`: "
        + ", ".join(dict.fromkeys(r["problem"] for r in runs if r["half"] == "beyond"))
        + "; seeds "
        + ", ".join(sorted({str(r["seed"]) for r in runs if r["half"] == "beyond"}))
        + "; `crosscurv.experiments.problems.beyond` for all but the first two), in "
          "neither half. Half `fresh`: kinds added after the code's safety factor was chosen, "
          "only to test it (`FRESH`: "
        + ", ".join(dict.fromkeys(r["problem"] for r in runs if r["half"] == "fresh"))
        + "; " + fresh_modules(runs) + "; float32 where the name ends in 32). "
          "Cells: precision / coverage. Advise: an "
          "iteration is decided when the measurement orders some candidate below the measured "
          "best; the advice is right when it ties the measured best within the measurement's "
          "error (or both are full GS orders the "
          "certificate names as a set). Records: summed over every candidate's run, decided where "
          "`|gap| > gap_err`. Regret: what the advised scheme gives up against the measured best, "
          "relative to the spread between the best and the worst candidate, mean over the decided "
          "iterations (all of them, and the certified ones under the new certificate).",
        "",
        f"{len(runs)} runs, {sum(float(r.get('cpu_s', 0.0)) for r in runs) / 60:.1f} CPU-minutes "
        f"in all (advise and every candidate's protocol run).",
    ]


_HEAD = (
    "| half | problem | c | decided | advise old | advise new | advise new, coverage inside the "
    "regime | wrong (new) | regret | regret, certified | jc_only old | jc_only new | cumulative "
    "old | cumulative new | recursive old | recursive new |"
)
_SEP = "| " + " | ".join(["---"] * 16) + " |"


def _aggregate(new, old, idx):
    """Old and new counts of the runs ``idx`` (:func:`_pool`'s), pooled."""
    a_new = [sum(new[i][0][k] for i in idx) for k in ("right", "certified", "decided")]
    a_old = [sum(old[i][0][k] for i in idx) for k in ("right", "certified", "decided")]
    rn = sum(new[i][0]["regret_n"] for i in idx)
    reg = sum(new[i][0]["regret_sum"] for i in idx) / rn if rn else math.nan
    rc = sum(new[i][0]["regret_cert_sum"] for i in idx)
    reg_c = rc / a_new[1] if a_new[1] else math.nan
    rec = {
        e: (
            [sum(old[i][1][e][j] for i in idx) for j in range(3)],
            [sum(new[i][1][e][j] for i in idx) for j in range(3)],
        )
        for e in _EST
    }
    wrong = sum(len(new[i][0]["wrong_k"]) for i in idx)
    a_new.append(sum(new[i][0]["decided_inside"] for i in idx))
    return a_old, a_new, reg, reg_c, rec, wrong


def _table_row(label, new, old, idx) -> str:
    a_old, a_new, reg, reg_c, rec, wrong = _aggregate(new, old, idx)
    cells = [
        *label,
        str(a_new[2]),
        _cell(*a_old),
        _cell(*a_new[:3]),
        "n/a" if not a_new[3] else f"{100.0 * a_new[1] / a_new[3]:.1f}%",
        str(wrong),
        *("n/a" if math.isnan(x) else f"{x:.3g}" for x in (reg, reg_c)),
    ]
    for e in _EST:
        cells += [_cell(*rec[e][0]), _cell(*rec[e][1])]
    return "| " + " | ".join(cells) + " |"


def _problem_lines(runs, new, old) -> list:
    """Per problem (pooled over rates and seeds) and per problem and rate, old against new."""
    from crosscurv.numeric.certificate import SAFETY

    groups: dict = defaultdict(list)
    for i, r in enumerate(runs):
        groups[(r["half"], r["problem"], r["c"])].append(i)
    lines = [
        "",
        "## Per problem (pooled over learning rates and seeds)",
        "",
        f"New: the certificate of `crosscurv.numeric.certificate` with factor {SAFETY:g}; old: the "
        f"rules it "
        "replaces (module docstring of `crosscurv.experiments.studies.certificates_report`).",
        "",
        _HEAD,
        _SEP,
    ]
    by_problem: dict = defaultdict(list)
    for (half, prob, c), idx in groups.items():
        by_problem[(half, prob)] += idx
    for half in HALVES:
        for (h, prob), idx in by_problem.items():
            if h == half:
                lines.append(_table_row((half, prob, "all"), new, old, idx))
        every = [i for (h, _), idx in by_problem.items() if h == half for i in idx]
        lines.append(_table_row((half, "**all**", "all"), new, old, every))
    lines += ["", "## Per problem and learning rate (pooled over seeds)", "", _HEAD, _SEP]
    for (half, prob, c), idx in groups.items():
        lines.append(_table_row((half, prob, f"{c:g}"), new, old, [*idx]))
    return lines


def _wrong_lines(runs, new) -> list:
    """Every certified advice iteration that was wrong under the new certificate."""
    wrong = [
        (runs[i]["problem"], runs[i]["c"], runs[i]["seed"], new[i][0]["wrong_k"])
        for i in range(len(runs))
        if new[i][0]["wrong_k"]
    ]
    lines = ["", "## Certified advice that was wrong (new certificate)", ""]
    return lines + (
        [f"* {p} c={c:g} seed {s}: k = {', '.join(map(str, ks))}" for p, c, s, ks in wrong]
        or ["None."]
    )
