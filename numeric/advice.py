"""Which block scheme to use at budget ``K``, predicted from one JC trajectory (paper, Theorems 1-3).

For every candidate delay pattern ``S`` and every ``k <= K`` the predicted gap
``L_S^k - L_JC^k`` is Theorem 3's estimate with ``g_S``, ``M_S`` evaluated on the
JC trajectory (the *JC-only* estimate of :mod:`crosscurv.numeric.estimates`)::

    y_0 = 0,   y_{k+1} = (I - eta H_JC^k) y_k + eta^2 M_S(theta_JC^k) g_JC^k,
    estimate_S^k = g_JC^k . y_k + 1/2 y_k . H_JC^k y_k            (JC: 0).

A-posteriori error (an embedded pair): the same kind of prediction from a
state ``yhat`` whose forcing keeps what the JC-only estimate drops to first
order, evaluated at ``theta_hat^k = theta_JC^k + yhat_k`` (the approximate
``theta_S^k``)::

    yhat_0 = 0,
    yhat_{k+1} = yhat_k - eta (g(theta_hat^k) - g_JC^k)
                 + eta^2 M_S(theta_hat^k) (g(theta_hat^k) - eta M_S(theta_JC^k) g_JC^k),
    corrected_S^k = 1/2 (g_JC^k + g(theta_hat^k)) . yhat_k,
    error_S^k = |corrected_S^k - estimate_S^k|.

Against the JC-only state this keeps the full gradient difference
``g_S - g_JC`` (``H Delta`` and its third-derivative part), ``M_S`` at the
``S`` point (Lemma 3's ``M_S g_S``) and Lemma 1's ``-eta M_S^2 g`` term; the
loss difference is the trapezoid rule along ``theta_JC^k -> theta_hat^k``.
Not kept: Lemma 1's third-derivative term ``t/2`` (``crosscurv.numeric.one_step``), of
order ``eta^3`` per step like the kept ones.  On a quadratic loss (no third
derivative) ``corrected`` is exact up to ``O(eta^3)`` per step and ``error``
is the error of the JC-only estimate to leading order
(``tests/numeric/test_advice.py``); on non-quadratic losses the dropped term
can dominate and ``error`` then *underestimates* the actual error
(docs/advise.md): an estimate of the first neglected terms, not a bound.

One-step check (Theorem 1 and the next order): at ``theta^0`` each candidate's exact one-step gap from the JC point
(:func:`crosscurv.numeric.steps.scheme_step`, :func:`crosscurv.numeric.gap.loss_gap`) is compared
with ``eta^2 C_S + eta^3 c3`` (:func:`crosscurv.numeric.one_step.one_step_coefficients`);
when the remainder exceeds the ``eta^3`` term itself (and the steps' rounding)
the series does not converge at this learning rate and the recommendation
warns that it is outside the expansions' regime (or that the loss is not
smooth there, e.g. a ReLU network whose steps cross kinks); the measured gap less the JC-only
estimate at ``k = 1`` is the first dropped order of the first three iterations' certificates.
The same ``c3`` ranks the full GS orders, which tie at ``O(eta^2)`` (Corollary 1).  Cost, once per
run (independent of ``K``): per candidate a scheme step, a 5-node loss gap and the
one-step coefficients (``3 n_F`` HVPs and ``n_F`` third derivatives).

The protocol's ``jc_only_err`` (:mod:`crosscurv.numeric.error_estimates`) bounds the same error, but from
quantities measured on the ``S`` run (``rho_hat`` from ``g_S - g_JC - H_JC Delta``, the ``S`` step's
remainder ``e_k``) and the converged extremes of ``H_JC``; advise has no ``S`` run, hence its own
estimate (docs/advise.md).  :func:`validate` counts how often each covers the actual error.

Optimizers (``optimizer`` / ``block_lr``, :mod:`crosscurv.numeric.optimizers`): the JC run takes the
optimizer's steps and each candidate's state ``(y, ys)`` (parameters and optimizer-state difference)
takes the tangent step of :class:`crosscurv.numeric.optimizer_estimates.TangentStep` forced by
``M_S F phi(g_JC^k, s_JC^k)`` (from the same shared columns, of ``F phi`` instead of ``g``)::

    (y, ys)_{k+1} = TangentStep_k((y, ys)_k, H_JC^k y_k - eta M_S F phi),
    estimate_S^k = g_JC^k . y_k + 1/2 y_k . H_JC^k y_k,

the protocol's optimizer-aware ``jc_only`` column; the one-step column is ``eta^2 C_S^phi``
(:func:`crosscurv.numeric.optimizer_estimates.optimizer_delay_curvature`).  There is no embedded pair
for optimizers (errors NaN, nothing certified) and no one-step check.

Per iteration the best scheme is the lowest estimate (ties: the earlier
candidate); whether it is *certified* is :func:`crosscurv.numeric.certificate.certify_best`, the rule
``crosscurv run``'s records use too: every other candidate separated from it by ``SAFETY`` times the
first dropped orders (:func:`crosscurv.numeric.certificate.advice_next_orders`: the largest embedded
error of the last three iterations and, for the first three, the prediction's measured error at the
first step ``|L_S^1 - L_JC^1 - estimate_S^1|``), full GS orders it cannot separate certified as a
set, while the JC run has stayed below the edge of stability so far (``eta * sharpness_j < 2`` for
every ``j <= k``; ``sharpness`` is the larger of ``lambda_max(H_JC^0)``, converged by
:func:`crosscurv.numeric.estimates.solve_extremes`, and the Rayleigh quotient ``p_k^T H_JC^k p_k`` of
the power iteration started from its eigenvector, one product per iteration: a lower bound of
``lambda_max(H_JC^k)`` that follows it while the top eigenvector turns slowly).  Past the edge the
embedded error is no estimate of the real one (``reports/advise/validation.md``); the precision and
coverage of the certificate are measured on the problem zoo (``reports/certificates.md``).

Cost per JC iteration (``P'`` non-JC candidates, ``B`` the blocks that are
fresh for some block in some candidate, ``n_S`` the fresh blocks of
candidate ``S``): at ``theta_JC^k`` one gradient (with its graph), ``B``
products ``H (E_j g)`` shared by every candidate (each gives the rows
``(M_S g)_i`` of every ``S`` with ``j in S(i)``), one product ``H y`` per
candidate; at each ``theta_hat^k`` one gradient and ``n_S`` restricted products.
In all ``1 + P'`` gradients and ``B + sum_S (1 + n_S)`` products, one more product for the power iteration
(and about 30 at ``k = 0`` for the extremes); the one-step
estimate ``eta^2 C_S = eta^2 g . M_S g`` (Theorem 1) comes for free.

Run folder (``out_dir``): ``advice.csv`` (one row per ``(k, candidate)``,
streamed and flushed), ``checkpoint.pt`` (the JC iterate and every ``y``,
``yhat``; written at ``k = 0``, on a cadence and before the last iteration)
and ``advice.json`` (settings, status, the table and the recommendation).
``resume=True`` continues a run from its checkpoint; the records are those of
an uninterrupted run bit for bit (on the CPU).  ``advice.csv`` is written by
:class:`crosscurv.numeric.records.RecordWriter` with its own columns (:data:`COLUMNS`; an advice row is keyed
by ``(k, candidate)`` and has a text column).

How the JC run steps and what it carries per update rule (plain steps with the embedded pair, or a
block-separable optimizer): :mod:`crosscurv.numeric.advice_steps`.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from crosscurv.theory.errors import AdviceError
from crosscurv.theory.patterns import DelayPattern, as_pattern, spelling

from . import tree
from .advice_steps import PatternCandidate, advice_steps
from .certificate import (REMAINDER_WINDOW, SAFETY, advice_next_orders, certify_best,
                          first_step_orders)
from .error_estimates import in_regime
from .estimates import solve_extremes, init_power_vector, power_step
from .optimizers import optimizer_setup
from .protocol import CHECKPOINT_SECONDS, jsonable, theta_digest, choose_engine
from .regret import advice_right, regret, summarise
from .records import (RecordWriter, atomic_torch_save, atomic_write_text, format_row, json_safe, read_text,
                      write_summary)
from .steps import block_keys
from .threads import computes_with_threads

__all__ = [
    "AdviceError",
    "Advice",
    "advise",
    "default_candidates",
    "parse_candidates",
    "decide",
    "recommendation",
    "ADVICE_FILE",
    "RECORDS_FILE",
    "CHECKPOINT_FILE",
    "COLUMNS",
]

RECORDS_FILE = "advice.csv"
ADVICE_FILE = "advice.json"
CHECKPOINT_FILE = "checkpoint.pt"
#: Columns of ``advice.csv`` (one row per iteration and candidate, the JC row all zeros).
COLUMNS = ("k", "pattern", "loss_jc", "sharpness", "estimate", "error", "corrected", "one_step")
#: The columns of an older crosscurv's ``advice.csv`` (no ``sharpness``): refused in one line.
_OLDER_COLUMNS = ("k", "pattern", "loss_jc", "estimate", "error", "corrected", "one_step")
_FORMAT = 2


# -- candidates -------------------------------------------------------------------------
def default_candidates(n_blocks: int) -> list[str]:
    """``jc``, ``gs`` in block order and reversed, every other GS order when ``N <= 4``, and ``chain``.

    Spellings are the command line's (``gs:3,2,1``); candidates with the same pairs are kept once
    (for ``N = 2`` the chain is GS).
    """
    n = n_blocks
    specs = ["jc"]
    if n >= 2:
        specs += ["gs", "gs:" + ",".join(str(b) for b in range(n, 0, -1))]
        if n <= 4:
            specs += ["gs:" + ",".join(str(b + 1) for b in o) for o in itertools.permutations(range(n))]
        specs.append("chain")
    out, seen = [], set()
    for s in specs:
        pairs = as_pattern(s, n).pairs
        if pairs not in seen:
            seen.add(pairs)
            out.append(s)
    return out


def parse_candidates(task, patterns=None) -> list[tuple[str, DelayPattern]]:
    """``[(spelling, pattern), ...]``: JC first (added when missing), the rest in the user's order.

    Args:
        patterns: ``None`` (:func:`default_candidates`, spelled with the task's block names where
            :func:`crosscurv.theory.patterns.spelling` can use them: ``gs:V,U``), a
            ``;``-separated string
            (``"jc;gs;gs:3,2,1;2<-1"``) or a sequence of spellings / :class:`DelayPattern`.

    Raises:
        AdviceError: an empty list or two candidates that are the same scheme;
        PatternError: a malformed pattern.
    """
    if patterns is None:
        items = default_candidates(task.n_blocks)
    elif isinstance(patterns, str):
        items = [p.strip() for p in patterns.split(";")]
        if any(not p for p in items):
            raise AdviceError(f"empty pattern in {patterns!r} (separate patterns with ';')")
    else:
        items = list(patterns)
    if not items:
        raise AdviceError("no candidate patterns")
    out: list[tuple[str, DelayPattern]] = []
    seen: dict = {}
    for item in items:
        pat = as_pattern(item, task.n_blocks, task.block_names)
        name = item.strip() if isinstance(item, str) else pat.name
        if patterns is None:  # the defaults spelled in the task's block names (gs:V,U, not gs:2,1)
            name = spelling(pat, task.block_names)
        if pat.pairs in seen:
            raise AdviceError(f"patterns {seen[pat.pairs]!r} and {name!r} are the same scheme {pat.describe()}")
        seen[pat.pairs] = name
        out.append((name, pat))
    if not any(p.is_jacobi for _, p in out):
        out.insert(0, ("jc", as_pattern("jc", task.n_blocks)))
    else:  # the reference first
        out.sort(key=lambda np_: not np_[1].is_jacobi)
    return out


# -- the decision ------------------------------------------------------------------------
def decide(estimates: Mapping[str, float], errors: Mapping[str, float]) -> dict:
    """The best candidate at one ``k`` (lowest estimate; ties: the first) and whether it is certified.

    Returns:
        ``{"best", "runner_up", "margin", "certified"}``: certified when
        ``estimate[runner_up] - estimate[best] > error[best] + error[runner_up]``
        (``False`` with a single candidate or a non-finite estimate).
    """
    names = list(estimates)
    if any(not math.isfinite(estimates[n]) for n in names):
        finite = [n for n in names if math.isfinite(estimates[n])]
        names = finite or names
    order = sorted(names, key=lambda n: (estimates[n], names.index(n)))
    best = order[0]
    if len(order) < 2:
        return {"best": best, "runner_up": None, "margin": math.nan, "certified": False}
    second = order[1]
    margin = estimates[second] - estimates[best]
    certified = bool(math.isfinite(margin) and margin > errors[best] + errors[second]
                     and len(names) == len(estimates))
    return {"best": best, "runner_up": second, "margin": margin, "certified": certified}


def _segments(rows: Sequence[Mapping]) -> list[dict]:
    """Maximal runs of iterations with the same best candidate: ``[{"best", "first", "last", "certified_ks"}]``."""
    segs: list[dict] = []
    for r in rows:
        if not segs or segs[-1]["best"] != r["best"]:
            segs.append({"best": r["best"], "first": r["k"], "last": r["k"], "certified_ks": []})
        s = segs[-1]
        s["last"] = r["k"]
        if r["certified"]:
            s["certified_ks"].append(r["k"])
            if len(r.get("tied", ())) > 1:
                s.setdefault("set_ks", []).append(r["k"])
    return segs


def k_ranges(ks: Sequence[int], max_ranges: int = 5) -> str:
    """``[3, 4, 5, 9]`` as ``"3..5, 9"``; past ``max_ranges`` ranges the rest is counted
    (``"..., and 12 more iterations in 4 ranges"``)."""
    runs: list[list[int]] = []
    for k in ks:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    text = ", ".join(f"{a}..{b}" if b > a else f"{a}" for a, b in runs[:max_ranges])
    rest = runs[max_ranges:]
    if rest:
        text += f", and {sum(b - a + 1 for a, b in rest)} more iterations in {len(rest)} ranges"
    return text


def recommendation(rows: Sequence[Mapping], max_segments: int = 6) -> str:
    """A sentence a person can act on, e.g. ``"jc for K <= 45, certified at K = 3..45; gs for K = 46..200,
    certified at K = 52..120"``.

    Built from the per-iteration ``best`` / ``certified`` of ``rows`` (ordered by ``k``): each range of budgets
    with the same predicted best names exactly the budgets where it is certified
    (:func:`crosscurv.numeric.certificate.certify_best`); with more than ``max_segments`` changes of the best
    scheme the last ones are named and the count of changes given.
    """
    if not rows:
        return "no iterations: nothing to advise"
    segs = _segments(rows)
    last = rows[-1]
    parts = []
    shown = segs if len(segs) <= max_segments else segs[-max_segments:]
    for s in shown:
        if s["first"] == rows[0]["k"]:
            where = f"for K <= {s['last']}" if s is not segs[-1] else f"for every K <= {s['last']}"
        elif s["first"] == s["last"]:
            where = f"at K = {s['first']}"
        else:
            where = f"for K = {s['first']}..{s['last']}"
        n = len(s["certified_ks"])
        if n == s["last"] - s["first"] + 1:
            cert = ", certified throughout"
        elif n:
            cert = f", certified at K = {k_ranges(s['certified_ks'])}"
        else:
            cert = ", not certified"
        set_ks = s.get("set_ks", [])
        if set_ks:
            at = "" if set_ks == s["certified_ks"] else f" at K = {k_ranges(set_ks)}"
            cert += f" (as one of the GS orders the errors cannot tell apart{at})"
        parts.append(f"{s['best']} {where}{cert}")
    parts[-1] += "."
    head = f"at K = {last['k']}: use {last['best']} ({'certified' if last['certified'] else 'not certified'})"
    if last["certified"] and len(last.get("tied", ())) > 1:
        head += f", as one of the GS orders {', '.join(last['tied'])}, which the errors cannot tell apart"
    if len(segs) > max_segments:
        head += f"; the best scheme changes {len(segs) - 1} times, the last {max_segments} runs"
    return head + ". " + "; ".join(parts)


# -- the result ---------------------------------------------------------------------------
@dataclass
class Advice:
    """Outcome of :func:`advise`.

    Attributes:
        candidates: candidate spellings, JC first.
        per_iteration: ``[{"k", "loss_jc", "sharpness", "estimates", "errors", "corrected", "one_step", "best",
            "runner_up", "margin", "next_order", "tied", "certified"}]`` for ``k = 1..K`` (dicts keyed by
            spelling, floats; ``sharpness``: ``lambda_max(H_JC^k)`` as the regime gate reads it; ``next_order``,
            ``tied``, ``certified``: :func:`crosscurv.numeric.certificate.certify_best`'s).
        recommendation: the sentence of :func:`recommendation` (plus the GS-order note).
        orders: for two or more full GS candidates: ``{"eta3": {spelling: {"k0"}}, "told_apart",
            "note"}`` (else ``None``).
        one_step_checks: ``[at theta^0]`` (:func:`_one_step_check`): the measured one-step
            gap of each candidate against ``eta^2 C_S`` and ``eta^2 C_S + eta^3 c3``; the recommendation warns
            where the remainder exceeds the ``eta^3`` term.
        status: ``"complete"`` or ``"diverged"``.
        settings: what the run used (JSON-able).
        timing: ``{"one_step_check_s"}``: seconds of this call's one-step check (0 when none ran).
        out_dir: the run folder or ``None``.
    """

    candidates: list
    per_iteration: list
    recommendation: str
    orders: dict | None = None
    status: str = "complete"
    message: str = ""
    settings: dict = field(default_factory=dict)
    out_dir: str | None = None
    one_step_checks: list = field(default_factory=list)
    timing: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The ``--json`` object: ``recommendation``, ``per_iteration`` (``k``, ``estimates``, ``errors``,
        ``best``, ``certified``) and the extras (``candidates``, ``status``, ``orders``, ``corrected``...)."""
        return json_safe({
            "recommendation": self.recommendation,
            "status": self.status,
            "message": self.message,
            "candidates": list(self.candidates),
            "orders": self.orders,
            "one_step_checks": self.one_step_checks,
            "per_iteration": [
                {"k": r["k"], "estimates": r["estimates"], "errors": r["errors"], "best": r["best"],
                 "certified": r["certified"], "tied": r["tied"], "next_order": r["next_order"],
                 "runner_up": r["runner_up"], "margin": r["margin"],
                 "corrected": r["corrected"], "one_step": r["one_step"], "loss_jc": r["loss_jc"],
                 "sharpness": r["sharpness"]}
                for r in self.per_iteration
            ],
            "settings": self.settings,
        })

    def figure(self, path: str, validation: Mapping | None = None) -> str:
        """Predicted gaps with the certificate's error bands (``SAFETY`` times the first dropped order,
        ``next_order``) per candidate (top) and the recommended scheme over ``K`` (bottom).

        Filled markers on the bottom panel: certified iterations.  With ``validation`` (:func:`validate`) the
        measured gaps are drawn as dashed lines of the candidate's colour, and the certified iterations that
        were wrong are marked in red on the bottom panel.  Returns ``path``.
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ks = [r["k"] for r in self.per_iteration]
        fig, (ax, bx) = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
        measured = (validation or {}).get("per_iteration") or []
        for i, name in enumerate(self.candidates):
            est = [r["estimates"][name] for r in self.per_iteration]
            err = [SAFETY * r["next_order"][name] for r in self.per_iteration]
            line, = ax.plot(ks, est, label=name, lw=1.2)
            ax.fill_between(ks, [e - d for e, d in zip(est, err)], [e + d for e, d in zip(est, err)],
                            color=line.get_color(), alpha=0.2, lw=0)
            if measured and name != self.candidates[0]:
                ax.plot([t["k"] for t in measured], [t["gaps"][name] for t in measured], ls="--", lw=1.0,
                        color=line.get_color(), label=f"{name} measured")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_ylabel("L_S - L_JC")
        ax.legend(fontsize=7, ncol=2)
        title = f"crosscurv advise: JC-only prediction +- {SAFETY:g} x its first dropped order"
        ax.set_title(title + (" (dashed: measured)" if measured else ""), fontsize=9)
        idx = {n: i for i, n in enumerate(self.candidates)}
        for certified, marker in ((True, "o"), (False, "x")):
            sel = [r for r in self.per_iteration if bool(r["certified"]) == certified]
            bx.scatter([r["k"] for r in sel], [idx[r["best"]] for r in sel], marker=marker, s=10,
                       label="certified" if certified else "not certified")
        wrong = [t for t in measured if t["certified"] and not t["right"] and t["regret"] == t["regret"]]
        if wrong:
            bx.scatter([t["k"] for t in wrong], [idx[t["advised"]] for t in wrong], marker="o", s=30,
                       facecolors="none", edgecolors="red", label="certified, wrong")
        bx.set_yticks(range(len(self.candidates)))
        bx.set_yticklabels(self.candidates, fontsize=7)
        bx.set_xlabel("K")
        bx.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


# -- records -------------------------------------------------------------------------------
def _rows(k: int, loss_jc: float, sharpness: float, vals: Mapping[str, tuple]) -> list[dict]:
    """The ``advice.csv`` rows of iteration ``k`` (:data:`COLUMNS`), one per candidate pattern."""
    return [dict(zip(COLUMNS, (k, name, loss_jc, sharpness, est, err, cor, one)))
            for name, (est, err, cor, one) in vals.items()]


def read_advice_records(path: str) -> list[dict]:
    """The complete rows of ``advice.csv`` as per-iteration dicts (``k`` ascending; a torn last line is ignored).

    Raises:
        AdviceError: not an advice records file, or a malformed row.
    """
    text = read_text(path, "advice records")
    lines = text.split("\n")[:-1]
    if lines and lines[0] == ",".join(_OLDER_COLUMNS):
        raise AdviceError(f"{path}: advice records of an older crosscurv (no sharpness column): advise again "
                          "into a new folder")
    if not lines or lines[0] != ",".join(COLUMNS):
        raise AdviceError(f"{path}: not a crosscurv advice records file")
    out: list[dict] = []
    try:
        for row in csv.reader(lines[1:]):
            k, name = int(row[0]), row[1]
            loss_jc, sharp, est, err, cor, one = (float(x) for x in row[2:8])
            if not out or out[-1]["k"] != k:
                if out and k != out[-1]["k"] + 1:
                    raise ValueError(f"k={k} after k={out[-1]['k']}")
                out.append({"k": k, "loss_jc": loss_jc, "sharpness": sharp, "estimates": {}, "errors": {},
                            "corrected": {}, "one_step": {}})
            r = out[-1]
            r["estimates"][name], r["errors"][name], r["corrected"][name], r["one_step"][name] = est, err, cor, one
    except (ValueError, IndexError) as exc:
        raise AdviceError(f"{path}: malformed row ({exc})") from None
    return out


def _complete(rows: list[dict], names: Sequence[str]) -> list[dict]:
    """Rows whose every candidate is present (a kill between a row's candidates leaves an incomplete one)."""
    return [r for r in rows if list(r["estimates"]) == list(names)]


def _with_decision(r: dict, trusted: bool = True, gs_orders: Sequence[str] = (), next_order=None) -> dict:
    """``r`` with :func:`decide`'s ``runner_up`` and ``margin`` and the certificate's ``next_order``, ``best``,
    ``tied`` and ``certified`` (:func:`crosscurv.numeric.certificate.certify_best` with ``next_order``, default
    ``r``'s embedded errors; inside while ``trusted``: the run's regime gate, :func:`_inside`)."""
    d = decide(r["estimates"], r["errors"])
    nxt = dict(r["errors"] if next_order is None else next_order)
    v = certify_best(r["estimates"], nxt, trusted, gs_orders)
    return {**r, **d, "next_order": nxt, "best": v["best"], "tied": v["tied"], "certified": v["certified"]}


def _decided_table(rows: Sequence[Mapping], gate: Sequence[bool], gs_orders: Sequence[str],
                   first_step: Mapping[str, float]) -> list[dict]:
    """Every row with its decision (:func:`_with_decision`), the first dropped order of
    :func:`crosscurv.numeric.certificate.advice_next_orders` over the rows up to it."""
    errs = [r["errors"] for r in rows]
    return [_with_decision(r, ok, gs_orders, advice_next_orders(errs[max(0, i + 1 - REMAINDER_WINDOW):i + 1],
                                                                first_step, r["k"]))
            for i, (r, ok) in enumerate(zip(rows, gate))]


def first_step_remainders(checks: Sequence[Mapping]) -> dict:
    """``{candidate: |L_S^1 - L_JC^1 - eta^2 C_S|}`` from the one-step check at ``theta^0`` (NaN measurements
    skipped; ``{}`` without a check); ``inf`` where the expansion does not describe the measured step,

        min(|m - p_2|, |m - p_3|) > max(|p_2|, |p_3|, floor)

    (``m`` the measured ``L_S^1 - L_JC^1``, ``p_2 = eta^2 C_S``, ``p_3`` with Lemma 1's ``eta^3`` term,
    ``floor`` the steps' rounding): what both kept orders leave out is larger than what they keep (the
    measured differences are made of something else, e.g. the rounding of float32 iterates), which
    withdraws the advice's certificate at every ``k``
    (:func:`crosscurv.numeric.certificate.advice_next_orders`)."""
    out = {}
    for chk in checks:
        for n, c in (chk or {}).items():
            m, p2 = c["measured"], c["eta2"]
            if math.isfinite(m):
                p3, floor = c.get("eta3", p2), c.get("floor", 0.0)
                dropped = min(abs(m - p2), abs(m - p3))
                r = math.inf if dropped > max(abs(p2), abs(p3), floor) else abs(m - p2)
                out[n] = max(out.get(n, 0.0), r)
    return out


def full_gs_orders(cands) -> list[str]:
    """The full GS orders among ``[(spelling, pattern)]`` (Corollary 1 ties them at ``O(eta^2)``)."""
    return [n for n, p in cands if p.n_blocks > 1 and p.is_full_gs()]


def _inside(rows: Sequence[Mapping], lr: float) -> list[bool]:
    """Per row: the JC run has stayed below the edge of stability so far (``eta * sharpness_j < 2`` for every
    ``j <= k``, :func:`crosscurv.numeric.error_estimates.regime_so_far`)."""
    from .error_estimates import regime_so_far

    return regime_so_far([lr * float(r["sharpness"]) for r in rows])


# -- the run ---------------------------------------------------------------------------------
def _settings(task, cands, lr, iters, seed, hvp_method, extra) -> dict:
    s = dict(jsonable(extra or {}))
    s.update(task=s.get("task", task.name), task_info=jsonable(task.info),
             blocks=dict(zip(task.block_names, task.block_sizes())), n_params=task.num_params(),
             candidates=[{"name": n, **p.to_dict()} for n, p in cands], lr=lr, iters=iters,
             dtype=str(task.dtype).replace("torch.", ""), device=str(task.device), seed=seed, hvp=hvp_method,
             theta0_sha256=theta_digest(task.params))
    s.setdefault("threads", torch.get_num_threads())  # the caller's, else the count used
    return jsonable(s)


def _check_settings(saved: Mapping, now: Mapping, path: str) -> None:
    for key in sorted(set(saved) | set(now)):
        if key in ("iters", "checkpoint_every") or (key == "threads" and key not in saved):
            continue
        if saved.get(key) != now.get(key):
            a, b = json.dumps(saved.get(key))[:60], json.dumps(now.get(key))[:60]
            raise AdviceError(f"cannot resume {path}: setting {key} differs (checkpoint {a}, now {b})")
    if now["iters"] < saved["iters"]:
        raise AdviceError(f"cannot resume {path} with {now['iters']} iterations: the run was set to "
                          f"{saved['iters']} (a run can be extended, not shortened)")


def _orders(cands, checks: Sequence[dict]) -> dict | None:
    """The ``eta^3`` one-step coefficients of the full GS candidates at ``theta^0``."""
    gs = [n for n, p in cands if p.n_blocks > 1 and p.is_full_gs()]
    if len(gs) < 2:
        return None
    return {"eta3": {n: {"k0": checks[0][n]["c3"]} for n in gs}}


def _one_step_check(task, cands, theta: Mapping, lr: float, k: int, method: str = "auto") -> dict:
    """Theorem 1 and the next order at ``theta``: ``{spelling: {"k", "measured", "eta2", "eta3", "c3", "floor"}}``.

    For every non-JC candidate: ``measured`` is ``L(S step) - L(JC step)`` from ``theta`` by exact steps
    (:func:`crosscurv.numeric.steps.scheme_step`) and :func:`crosscurv.numeric.gap.loss_gap` (no cancellation); ``eta2 = eta^2 C_S``
    (Theorem 1) and ``eta3 = eta2 + eta^3 c3`` (:func:`crosscurv.numeric.one_step.one_step_coefficients`); ``floor`` the
    rounding of the two steps' coordinates seen by the loss, ``2 eps sum_i |g_i| |theta_i|``.
    """
    from .gap import loss_gap
    from .hvp import grad
    from .one_step import one_step_coefficients
    from .steps import scheme_step

    _, g = grad(task.loss, theta)
    jc = {n: theta[n] - lr * g[n] for n in theta}
    eps = torch.finfo(next(iter(theta.values())).dtype).eps
    floor = 2 * eps * float(sum((g[n].double().abs() * theta[n].double().abs()).sum() for n in theta))
    out = {}
    for name, p in cands:
        if p.is_jacobi:
            continue
        with torch.no_grad():
            s_step = scheme_step(task, theta, p, lr, grad_at_params=g)
        coef = one_step_coefficients(task, theta, p, g=g, method=method)
        eta2 = lr * lr * coef[2]
        out[name] = {"k": k, "measured": loss_gap(task, s_step, jc), "eta2": eta2, "eta3": eta2 + lr ** 3 * coef[3],
                     "c3": coef[3], "floor": floor}
    return out


def _check_failures(checks: Sequence[dict]) -> list[str]:
    """The candidates whose one-step series does not converge: the measured one-step gap differs from
    ``eta^2 C_S + eta^3 c3`` by more than the ``eta^3`` term itself (and more than the steps' rounding)."""
    bad = []
    for check in checks:
        for name, c in (check or {}).items():
            m, p2, p3 = c["measured"], c["eta2"], c["eta3"]
            if math.isfinite(m) and abs(m - p3) > max(abs(p3 - p2), c["floor"]):
                bad.append(f"{name} at k = {c['k']}: measured {m:.3g}, eta^2 term {p2:.3g}, with eta^3 {p3:.3g}")
    return bad


def _check_note(checks: Sequence[dict]) -> str:
    """A warning where the one-step series does not converge (:func:`_check_failures`)."""
    bad = _check_failures(checks)
    if not bad:
        return ""
    return (" Warning: the one-step expansion does not converge at theta^0 (" + "; ".join(bad[:3])
            + ("; ..." if len(bad) > 3 else "") + "): the first step is outside the expansions' regime (or the "
            "loss is not smooth there); a certificate rests on the errors measured along the run, and the "
            "predictions before one are not reliable.")


def _edge_note(rows: Sequence[Mapping], inside: Sequence[bool], lr: float) -> str:
    """Where the JC run crossed the edge of stability, after which nothing is certified."""
    out = next((r for r, ok in zip(rows, inside) if not ok), None)
    if out is None:
        return ""
    return (f" The JC run crossed the edge of stability at K = {out['k']} (eta * sharpness = "
            f"{lr * out['sharpness']:.3g} >= 2): no prediction is certified from there.")


def _order_note(orders: dict | None, last: Mapping | None, lr: float) -> str:
    """Whether the full GS orders can be told apart at the last ``K`` (prediction differences vs errors)."""
    if orders is None or last is None:
        return ""
    names = list(orders["eta3"])
    est, err = last["estimates"], last["next_order"]
    ranked = sorted(names, key=lambda n: est[n])
    apart = all(est[b] - est[a] > SAFETY * (err[a] + err[b]) for a, b in zip(ranked, ranked[1:]))
    orders["told_apart"] = apart
    by3 = sorted(names, key=lambda n: orders["eta3"][n]["k0"])
    step = ", ".join(f"{n} {lr ** 3 * orders['eta3'][n]['k0']:.3g}" for n in by3)
    if apart:
        note = (f" GS orders at K = {last['k']}: {' < '.join(ranked)} (predicted, differences above "
                f"{SAFETY:g} times the errors); one-step eta^3 terms at theta^0 (all orders tie at eta^2, "
                f"Corollary 1): {step}.")
    elif last.get("certified") and last["best"] in names and len(last.get("tied", ())) == 1:
        note = (f" At K = {last['k']} {last['best']} is ahead of the other GS orders by more than {SAFETY:g} "
                f"times the errors; the others cannot be told apart; one-step eta^3 terms at theta^0: {step}.")
    else:
        spread = est[ranked[-1]] - est[ranked[0]]
        note = (f" The {len(names)} GS orders cannot be told apart at K = {last['k']}: their predictions differ "
                f"by {spread:.3g}, within {SAFETY:g} times their errors; at one step they tie at eta^2 "
                f"(Corollary 1) and the eta^3 terms at theta^0 rank them {' < '.join(by3)} ({step}).")
    orders["note"] = note.strip()
    return note


@computes_with_threads
def advise(
    task,
    lr: float,
    iters: int,
    patterns=None,
    *,
    out_dir: str | None = None,
    resume: bool = False,
    hvp_method: str = "auto",
    seed: int = 0,
    settings: Mapping | None = None,
    checkpoint_every: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
    checks: bool = True,
    optimizer=None,
    block_lr=None,
    search: str | None = None,
) -> Advice:
    """Predict the best scheme among ``patterns`` for every budget ``k <= iters`` from one JC run (module docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task`; ``task.params`` is ``theta^0``.
        lr: constant learning rate ``eta > 0``.
        iters: budget ``K >= 1``.
        patterns: candidates (:func:`parse_candidates`; default :func:`default_candidates`).
        out_dir: run folder (``None``: in memory only); ``resume``: continue it.
        hvp_method: as :func:`crosscurv.numeric.protocol.choose_engine`.
        seed: recorded (the prediction itself is deterministic).
        settings: extra JSON-able settings, recorded and checked on resume.
        checkpoint_every: iterations between checkpoints (default: at most one per
            :data:`crosscurv.numeric.protocol.CHECKPOINT_SECONDS`); one is always written before the last iteration.
        progress: ``progress(k, K)`` after each iteration's rows.
        on_record: ``on_record(row)`` after each iteration's rows are written (an exception interrupts).
        checks: the one-step check at ``theta^0`` (module docstring), which also rank the
            full GS orders by their ``eta^3`` coefficients (plain steps only).
        optimizer, block_lr: as :func:`crosscurv.numeric.protocol.run_protocol` (``"momentum:BETA"``,
            ``"adam[:B1,B2,EPS]"``, ``"NAME=FACTOR,..."``): the JC run takes the optimizer's steps and the
            predictions are the optimizer-aware JC-only estimate (module docstring); errors are NaN (the
            embedded pair is derived for plain steps), so nothing is certified.
        threads: intra-op threads of the call (``None``: ``OMP_NUM_THREADS`` if set, else 1, as the
            command line; :mod:`crosscurv.numeric.threads`); recorded as ``settings["threads"]``.
        search: ``"orders"``, ``"stages[:D]"`` or ``"all"``: instead of ``patterns``, search that
            whole space of patterns from one JC run and return a
            :class:`crosscurv.numeric.pattern_search.SearchResult`
            (:func:`crosscurv.numeric.pattern_search.search`; ``checks`` certifies its front,
            ``out_dir`` receives ``search.json`` and ``pair_records.npz``); plain steps only.

    Returns:
        :class:`Advice`.  A non-finite JC loss stops the run with status ``"diverged"``.
    """
    from .protocol import check_iters, check_lr

    if search is not None:
        if patterns is not None or optimizer is not None or block_lr is not None:
            raise AdviceError("search takes the whole space of patterns from one plain JC run: no "
                              "patterns, optimizer or block_lr with it")
        from .pattern_search import search as search_space

        return search_space(task, lr, iters, search, certify=checks, hvp_method=hvp_method,
                            seed=seed, progress=progress, out_dir=out_dir, resume=resume,
                            checkpoint_every=checkpoint_every)

    lr, iters = check_lr(lr), check_iters(iters)
    setup = optimizer_setup(task, optimizer, block_lr)
    rule = advice_steps(task, setup)
    cands = parse_candidates(task, patterns)
    names = [n for n, _ in cands]
    run_settings = _settings(task, cands, lr, iters, seed, hvp_method,
                             {**(settings or {}), **rule.settings()})
    keys = block_keys(task)
    active = [PatternCandidate(n, p, [(i, list(p.fresh(i))) for i in range(p.n_blocks) if p.fresh(i)])
              for n, p in cands if not p.is_jacobi]
    sources: dict = {}
    for c in active:
        for i, fresh in c.plan_rows:
            for j in fresh:
                rows = sources.setdefault(j, [])
                rows.extend(k for k in keys[i] if k not in rows)
    sources = dict(sorted(sources.items()))

    rec_path = ck_path = None
    rows: list[dict] = []
    if out_dir is not None:
        rec_path, ck_path = os.path.join(out_dir, RECORDS_FILE), os.path.join(out_dir, CHECKPOINT_FILE)
    if resume:
        if out_dir is None:
            raise AdviceError("resume needs an output directory")
        if not os.path.exists(ck_path):
            raise AdviceError(f"nothing to resume: {out_dir} has no {CHECKPOINT_FILE}")
        try:
            ck = torch.load(ck_path, map_location=task.device, weights_only=True)
            ck["settings"], ck["k"], ck["start"], ck["vectors"]  # noqa: B018 (presence)
        except Exception as exc:  # truncated, foreign
            raise AdviceError(f"{ck_path} is not a readable crosscurv advice checkpoint ({type(exc).__name__})") from None
        _check_settings(ck["settings"], run_settings, out_dir)
        done = bool(ck.get("done")) and iters == ck["settings"]["iters"]
        k0 = ck["settings"]["iters"] if done else int(ck["k"])
        start = int(ck["start"])
        rows = _complete(read_advice_records(rec_path), names) if os.path.exists(rec_path) else []
        if len(rows) < k0:
            raise AdviceError(f"{rec_path} holds {len(rows)} complete iterations, the checkpoint needs {k0}")
        rows = rows[:k0]
        vec = ck["vectors"]
        theta = vec["theta"]
        ys = {c.name: vec[f"y:{c.name}"] for c in active}
        rule.load(vec, start, [c.name for c in active])
        pvec, lam0 = vec.get("p"), ck.get("lambda_max0")
        check0 = ck.get("check_k0")
    else:
        if out_dir is not None:
            if os.path.exists(ck_path) or os.path.exists(rec_path):
                raise AdviceError(f"{out_dir} already holds an advice run; use --resume to continue it or choose "
                                  "another --out")
            try:
                os.makedirs(out_dir, exist_ok=True)
            except OSError as exc:
                raise AdviceError(f"cannot create output directory {out_dir}: {exc.strerror}") from None
        task.check_loss()
        done, start = False, 0
        theta = tree.clone(task.params)
        ys = {c.name: tree.zeros_like(task.params) for c in active}
        rule.start(task.params, [c.name for c in active])
        pvec, lam0 = None, None
    engine = choose_engine(task, hvp_method)
    theta0 = tree.clone(task.params)

    def rows_text(rs):
        return ",".join(COLUMNS) + "\n" + "".join(
            format_row(row, COLUMNS) + "\n" for r in rs
            for row in _rows(r["k"], r["loss_jc"], r["sharpness"], {n: (r["estimates"][n], r["errors"][n], r["corrected"][n],
                                                        r["one_step"][n]) for n in names}))

    writer = None
    if rec_path is not None:
        atomic_write_text(rec_path, rows_text(rows))  # truncated to the checkpoint's k on resume
        writer = RecordWriter(rec_path, append=True, fields=COLUMNS)
    last_save = time.perf_counter()

    def checkpoint(k: int, nxt: int, final: bool = False) -> None:
        nonlocal last_save
        vectors = {"theta": theta, **{f"y:{n}": v for n, v in ys.items()}, **rule.vectors()}
        if pvec is not None:
            vectors["p"] = pvec
        atomic_torch_save({"format": _FORMAT, "k": k, "start": nxt, "done": final, "settings": run_settings,
                           "vectors": vectors, "check_k0": check0,
                           "lambda_max0": lam0}, ck_path)
        last_save = time.perf_counter()

    status, message = "complete", ""
    check_s = 0.0
    try:
        if not resume:
            t_check = time.perf_counter()
            check0 = (_one_step_check(task, cands, theta0, lr, 0, engine.method)
                      if active and checks and rule.checks else {})
            check_s = time.perf_counter() - t_check
        if ck_path is not None and not resume:
            checkpoint(0, 0)
        gs = full_gs_orders(cands)
        inside = _inside(rows, lr)[-1] if rows else True
        for k in ([] if done else range(start, iters + 1)):
            last = k == iters
            point = engine.point(task.loss, theta)
            loss_jc = float(point.value)
            if not math.isfinite(loss_jc):
                status, message = "diverged", f"diverged at k={k}: loss_jc = {loss_jc}"
                break
            g = point.grad
            # the regime gate: lambda_max(H_JC^0) converged (solve_extremes), then the power iteration
            # started from its eigenvector, one product per iteration; the larger of the two
            if pvec is None:
                try:
                    ext = solve_extremes(point.hvp, theta, seed=int(seed or 0))
                    lam0, pvec = float(ext.lam_max), ext.v_max
                except (ValueError, RuntimeError, ArithmeticError):  # non-finite products: no extremes
                    lam0, pvec = math.nan, init_power_vector(theta, int(seed or 0))
            rq, pvec = power_step(pvec, point.hvp(pvec))
            sharp = max((x for x in (lam0, rq) if x is not None and math.isfinite(x)), default=math.nan)
            vals = rule.iteration(engine, task, point, keys, sources, active, names[0], g, ys, theta, lr, k, last)
            del point
            if not last:
                theta = rule.step(task, theta, g, lr)
            if k >= 1:
                inside = inside and in_regime(lr, sharp)
                row = {"k": k, "loss_jc": loss_jc, "sharpness": sharp, "estimates": {n: v[0] for n, v in vals.items()},
                       "errors": {n: v[1] for n, v in vals.items()}, "corrected": {n: v[2] for n, v in vals.items()},
                       "one_step": {n: v[3] for n, v in vals.items()}}
                rows.append(row)
                if writer is not None:
                    writer.write_rows(_rows(k, loss_jc, sharp, vals))
                if on_record is not None:
                    first = first_step_orders([check0 or {}], rows[0]["estimates"])
                    on_record(_decided_table(rows[-REMAINDER_WINDOW:], [inside] * len(rows[-REMAINDER_WINDOW:]), gs,
                                              first)[-1])
                if progress is not None:
                    progress(k, iters)
            if not last and ck_path is not None:
                due = (k % checkpoint_every == 0) if checkpoint_every else \
                    time.perf_counter() - last_save >= CHECKPOINT_SECONDS
                if due or k + 1 == iters:
                    checkpoint(k, k + 1)
        if status == "complete" and ck_path is not None and not done:
            ck = torch.load(ck_path, map_location=task.device, weights_only=True)
            ck["done"], ck["settings"] = True, run_settings
            atomic_torch_save(ck, ck_path)
    finally:
        if writer is not None:
            writer.close()
    gate = _inside(rows, lr)
    first = first_step_orders([check0 or {}], rows[0]["estimates"] if rows else {})
    table = _decided_table(rows, gate, gs, first)
    done_checks = [check0 or {}]
    orders = _orders(cands, done_checks) if checks and check0 else None
    text = (recommendation(table) + _order_note(orders, table[-1] if table else None, lr) + _check_note(done_checks)
            + _edge_note(rows, gate, lr))
    text += rule.note
    if status == "diverged":
        text = diverged_recommendation(message, rows, table, text)
    message = message or f"complete: {len(table)} iterations, {len(names)} candidates"
    adv = Advice(names, table, text, orders, status, message, run_settings, out_dir, done_checks,
                 {"one_step_check_s": check_s})
    if out_dir is not None:
        write_summary(os.path.join(out_dir, ADVICE_FILE), adv.to_json())
    return adv


def diverged_recommendation(message: str, rows: Sequence[Mapping], table: Sequence[Mapping],
                            text: str) -> str:
    """What advise says when its JC run diverged: the divergence and the last finite state first;
    then ``text`` (the advice over the iterations before it) only where some prediction there is
    certified, else no advice (every prediction would rest on values running into the divergence).
    ``rows``: the per-iteration rows (``k``, ``loss_jc``), ``table``: their decided rows."""
    head = f"the JC run diverged ({message}); "
    if rows:
        head += f"last finite state: k = {rows[-1]['k']}, L_JC = {rows[-1]['loss_jc']:.6g}; "
    else:
        head += "no finite iteration after theta^0; "
    if any(r.get("certified") for r in table):
        return head + text
    return head + ("no advice over a diverged run: no prediction before it is certified; a "
                   "smaller --lr keeps eta * sharpness below 2, inside the stable regime.")


# -- validation ---------------------------------------------------------------------------------
def measured_best(gaps: Mapping[str, float], gap_errs: Mapping[str, float]) -> dict:
    """The measured best candidate at one ``k`` (lowest measured ``L_S - L_JC``, JC ``0``) and whether the
    measurement decides it (margin to the runner-up above the sum of their ``gap_err``)."""
    d = decide(gaps, gap_errs)
    return {"best": d["best"], "decided": d["certified"]}


@computes_with_threads
def validate(task, advice: Advice, *, hvp_method: str = "auto", seed: int = 0) -> dict:
    """Run every non-JC candidate's trajectory beside JC (:func:`crosscurv.numeric.protocol.run_protocol`, in memory) and
    measure what the advice gives up (:mod:`crosscurv.numeric.regret`) and how often it was right.

    Returns:
        ``{"summary", "per_iteration": [{"k", "advised", "certified", "measured", "decided", "gaps", "gap_errs",
        "right", "regret"}],
        "agree_all": [n, of], "agree_certified": [n, of], "agree_decided": [n, of], "eta_sharpness_max",
        "covered_embedded": [n, of], "covered_certified": [n, of], "status"}``: ``covered_*`` count the
        (iteration, candidate) pairs whose actual error ``|jc_only - gap|`` is within this advice's embedded
        error and within the protocol's ``jc_only_err`` (:mod:`crosscurv.numeric.error_estimates`, computed from the
        ``S`` run), over the pairs where that error is finite; ``decided`` iterations are those where the measured margin exceeds the measurements'
        error (``gap_err``); ``eta_sharpness_max`` is ``eta`` times the largest ``lambda_max(H_JC^k)`` along the
        run (the records' converged ``lambda_max``, or the power iteration's ``sharpness`` where that is larger;
        above 2: past the edge of stability); ``summary``: :func:`crosscurv.numeric.regret.summarise` (regret
        relative to the spread of the candidates, the full GS orders the certificate could not tell apart
        counted as ties; precision and coverage of the certificate; the certified iterations that were wrong).
    """
    from .protocol import run_protocol

    lr, iters = advice.settings["lr"], len(advice.per_iteration)
    cands = parse_candidates(task, advice.candidates)
    gaps = {n: [0.0] * iters for n, _ in cands}
    errs = {n: [0.0] * iters for n, _ in cands}
    status, sharp = "complete", math.nan
    covered = {"embedded": [0, 0], "certified": [0, 0]}
    for n, p in cands:
        if p.is_jacobi or iters == 0:
            continue
        res = run_protocol(task, p, lr, iters, hvp_method=hvp_method, seed=seed,
                           optimizer=(advice.settings.get("optimizer") or {}).get("spec"),
                           block_lr=advice.settings.get("block_lr") or None)
        if res.status != "complete":
            status = f"{n}: {res.status}"
        if math.isnan(sharp):  # lambda_max(H_JC^k) along the JC run (the same in every run)
            sharp = max((x for r in res.records for x in (r["lambda_max"], r["sharpness"]) if math.isfinite(x)),
                        default=math.nan)
        for r in res.records:
            gaps[n][r["k"] - 1], errs[n][r["k"] - 1] = r["gap"], r["gap_err"]
            actual = abs(r["jc_only"] - r["gap"])
            for key, bound in (("embedded", advice.per_iteration[r["k"] - 1]["errors"][n]),
                               ("certified", r["jc_only_err"])):
                if math.isfinite(bound) and math.isfinite(actual):
                    covered[key][0] += int(actual <= bound)
                    covered[key][1] += 1
        for k in range(len(res.records), iters):
            gaps[n][k] = errs[n][k] = math.nan
    table = []
    gs = full_gs_orders(cands)
    for i, r in enumerate(advice.per_iteration):
        g, e = {n: gaps[n][i] for n in gaps}, {n: errs[n][i] for n in errs}
        m = measured_best(g, e)
        theory = [n for n in r.get("tied", [r["best"]]) if n in gs] if r["best"] in gs else []
        table.append({"k": r["k"], "advised": r["best"], "certified": r["certified"], "measured": m["best"],
                      "decided": m["decided"], "gaps": g, "gap_errs": e,
                      "right": advice_right(r["best"], g, e, theory), "regret": regret(r["best"], g, e, theory)})

    def count(rows):
        return [sum(1 for t in rows if t["advised"] == t["measured"]), len(rows)]

    return {"per_iteration": table, "agree_all": count(table), "eta_sharpness_max": lr * sharp,
            "agree_certified": count([t for t in table if t["certified"]]),
            "agree_decided": count([t for t in table if t["decided"]]), "status": status,
            "covered_embedded": covered["embedded"], "covered_certified": covered["certified"],
            "summary": summarise(table)}
