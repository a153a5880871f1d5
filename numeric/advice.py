"""Which block scheme to use at budget ``K``, predicted from one JC trajectory (paper, Theorems
1-3).

For every candidate delay pattern ``S`` and every ``k <= K`` the predicted gap ``L_S^k - L_JC^k`` is
Theorem 3's estimate with ``g_S``, ``M_S`` evaluated on the JC trajectory (the *JC-only* estimate of
:mod:`crosscurv.numeric.estimates`)::

    y_0 = 0,   y_{k+1} = (I - eta H_JC^k) y_k + eta^2 M_S(theta_JC^k) g_JC^k, estimate_S^k = g_JC^k
    . y_k + 1/2 y_k . H_JC^k y_k            (JC: 0).

A-posteriori error (an embedded pair): the same kind of prediction from a state ``yhat`` whose
forcing keeps what the JC-only estimate drops to first order, evaluated at ``theta_hat^k =
theta_JC^k + yhat_k`` (the approximate ``theta_S^k``)::

    yhat_0 = 0, yhat_{k+1} = yhat_k - eta (g(theta_hat^k) - g_JC^k)
                 + eta^2 M_S(theta_hat^k) (g(theta_hat^k) - eta M_S(theta_JC^k) g_JC^k),
    corrected_S^k = L(theta_hat^k) - L(theta_JC^k),
    trapezoid_S^k = 1/2 (g_JC^k + g(theta_hat^k)) . yhat_k,
    embedded_S^k = max(|corrected_S^k - estimate_S^k|, |trapezoid_S^k - estimate_S^k|).

Against the JC-only state this keeps the full gradient difference ``g_S - g_JC`` (``H Delta`` and
its third-derivative part), ``M_S`` at the ``S`` point (Lemma 3's ``M_S g_S``) and Lemma 1's ``-eta
M_S^2 g`` term. It reads the loss difference out twice, exactly and by the trapezoid rule along
``theta_JC^k -> theta_hat^k``: they agree to second order along the segment, and where the ``S`` run
moves far from the JC run either can miss the gap (docs/advise.md). Not kept: Lemma 1's
third-derivative term ``t/2`` (``crosscurv.numeric.one_step``), of order ``eta^3`` per step like the
kept ones, which on a loss with large third derivatives (an exponential link, a softplus) exceeds
everything the pair measures at every step, and adds up along the run. So the local error of the
pair's forcing is measured: at every iteration one exact scheme step of each candidate from
``theta_JC^k`` gives what the pair's forcing leaves out, ``r_k = (theta_S^+ - theta_JC^+) - eta^2
M_S g + eta^3 M_S^2 g`` (the third-derivative term, the orders above and a kink the step crosses),
carried by the JC-only recursion; it moves the pair's point::

    e_0 = 0,   e_{k+1} = (I - eta H_JC^k) e_k + r_k,
    corrected_S^k = L(theta_hat^k + e_k) - L(theta_JC^k),
    trapezoid_S^k = 1/2 (g_JC^k + g(theta_hat^k)) . yhat_k + P(y_k + e_k) - P(y_k),
    error_S^k = max(|corrected_S^k - estimate_S^k|, |trapezoid_S^k - estimate_S^k|)

with ``P(y + e) - P(y) = g_JC^k . e + y . H_JC^k e + 1/2 e . H_JC^k e`` (``pair_error``; per
candidate and iteration a scheme step, an ``M_S`` product per fresh block, a product, a loss).
``e`` is not carried where the one-step check finds the first step outside the expansion (nothing
is certified then), nor where every coordinate of ``r`` is within the rounding of the two steps'
coordinates (on a quadratic ``r`` is of order ``eta^4``). On a quadratic loss ``corrected`` is
exact up to ``O(eta^3)`` per step and ``error`` is the error of the JC-only estimate to leading
order (``tests/numeric/test_advice.py``); elsewhere it is an estimate of the first neglected terms,
not a bound (docs/advise.md).

One-step check (Theorem 1 and the next order): at ``theta^0`` each candidate's exact one-step gap
from the JC point (:func:`crosscurv.numeric.steps.scheme_step`,
:func:`crosscurv.numeric.gap.loss_gap`) is compared with ``eta^2 C_S + eta^3 c3``
(:func:`crosscurv.numeric.one_step.one_step_coefficients`); when the remainder exceeds the ``eta^3``
term itself (and the steps' rounding) the series does not converge at this learning rate and the
recommendation warns that it is outside the expansions' regime (or that the loss is not smooth
there, e.g. a ReLU network whose steps cross kinks); the measured gap less the JC-only estimate at
``k = 1`` is the first dropped order of the first three iterations' certificates. The same ``c3``
ranks the full GS orders, which tie at ``O(eta^2)`` (Corollary 1).  Cost, once per run (independent
of ``K``): per candidate a scheme step, a 5-node loss gap and the one-step coefficients (``3 n_F``
HVPs and ``n_F`` third derivatives).

The protocol's ``jc_only_err`` (:mod:`crosscurv.numeric.error_estimates`) bounds the same error, but
from quantities measured on the ``S`` run (``rho_hat`` from ``g_S - g_JC - H_JC Delta``, the ``S``
step's remainder ``e_k``) and the converged extremes of ``H_JC``; advise has no ``S`` run, hence its
own estimate (docs/advise.md). :func:`validate` counts how often each covers the actual error.

Optimizers (``optimizer`` / ``block_lr``, :mod:`crosscurv.numeric.optimizers`): the JC run takes the
optimizer's steps and each candidate's state ``(y, ys)`` (parameters and optimizer-state difference)
takes the tangent step of :class:`crosscurv.numeric.optimizer_estimates.TangentStep` forced by ``M_S
F phi(g_JC^k, s_JC^k)`` (from the same shared columns, of ``F phi`` instead of ``g``)::

    (y, ys)_{k+1} = TangentStep_k((y, ys)_k, H_JC^k y_k - eta M_S F phi), estimate_S^k = g_JC^k .
    y_k + 1/2 y_k . H_JC^k y_k,

the protocol's optimizer-aware ``jc_only`` column; the one-step column is ``eta^2 C_S^phi``
(:func:`crosscurv.numeric.optimizer_estimates.optimizer_delay_curvature`). There is no embedded pair
for optimizers (errors NaN, nothing certified) and no one-step check.

Per iteration the best scheme is the lowest estimate (ties: the earlier candidate); whether it is
*certified* is :func:`crosscurv.numeric.certificate.certify_best`, the rule ``crosscurv run``'s
records use too: every other candidate separated from it by ``SAFETY`` times the first dropped
orders (:func:`crosscurv.numeric.certificate.advice_next_orders`: the largest error of the last
three iterations and, for the first three, the prediction's measured error at the first step
``|L_S^1 - L_JC^1 - estimate_S^1|``), full GS orders it cannot separate certified as a set, while
the JC run has stayed below the edge of stability so far (``eta * sharpness_j < 2`` for every ``j <=
k``; ``sharpness`` is the larger of ``lambda_max(H_JC^0)``, converged by
:func:`crosscurv.numeric.estimates.solve_extremes`, and the Rayleigh quotient ``p_k^T H_JC^k p_k``
of the power iteration started from its eigenvector, one product per iteration: a lower bound of
``lambda_max(H_JC^k)`` that follows it while the top eigenvector turns slowly).  Past the edge the
embedded error is no estimate of the real one (``reports/advise/validation.md``); the precision and
coverage of the certificate are measured on the problem zoo (``reports/certificates.md``).

Cost per JC iteration (``P'`` non-JC candidates, ``B`` the blocks that are fresh for some block in
some candidate, ``n_S`` the fresh blocks of candidate ``S``): at ``theta_JC^k`` one gradient (with
its graph), ``B`` products ``H (E_j g)`` shared by every candidate (each gives the rows ``(M_S
g)_i`` of every ``S`` with ``j in S(i)``), the products ``H y`` and ``H e`` per candidate; at each
``theta_hat^k`` one gradient and ``n_S`` restricted products. In all ``1 + P'`` gradients and ``B +
sum_S (2 + n_S)`` products, one more product for the power iteration (and about 30 at ``k = 0`` for
the extremes, one exact scheme step per candidate); the one-step estimate ``eta^2 C_S = eta^2 g .
M_S g`` (Theorem 1) comes for free.

Run folder (``out_dir``): ``advice.csv`` (one row per ``(k, candidate)``, streamed and flushed,
:data:`COLUMNS`), ``checkpoint.pt`` (the JC iterate and every ``y``, ``yhat``, ``e``) and
``advice.json`` (settings, status, the table and the recommendation), kept by the trajectory runner
(:mod:`crosscurv.numeric.trajectory`; the run's body: :mod:`crosscurv.numeric.advice_run`).
``resume=True`` continues a run from its checkpoint, or extends it to a larger ``iters``; the
records are those of an uninterrupted run bit for bit (on the CPU).

How the JC run steps and what it carries per update rule (plain steps with the embedded pair, or a
block-separable optimizer): :mod:`crosscurv.numeric.advice_steps`.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence


from crosscurv.theory.errors import AdviceError
from crosscurv.theory.patterns import DelayPattern, as_pattern, spelling

from . import tree
from .advice_run import COLUMNS, AdviceRun, advice_records, inside_regime
from .advice_run import read_advice_records as _read_records
from .advice_steps import PatternCandidate, advice_steps, column_sources
from .advice_text import check_note as _check_note
from .advice_text import diverged_recommendation, k_ranges, recommendation
from .advice_text import edge_note as _edge_note
from .advice_text import order_note as _order_note
from .advice_text import rounding_note as _rounding_note
from .advice_text import uncoupled_note as _uncoupled_note
from .certificate import (REMAINDER_WINDOW, advice_next_orders, certify_best, edge_amplification,
                          first_step_orders, first_step_remainders, rounding_floor)
from .engine import choose_engine
from .one_step_check import one_step_check
from .optimizers import optimizer_setup
from .protocol_checks import ProtocolError
from .records import CHECKPOINT_FILE, json_safe, write_summary
from .regret import advice_right, regret, summarise
from .steps import block_keys
from .threads import computes_with_threads
from .trajectory import (Run, RunFolder, RunOptions, check_resume_settings, run_settings,
                         with_threads)

__all__ = [
    "AdviceError",
    "Advice",
    "advise",
    "default_candidates",
    "parse_candidates",
    "decide",
    "recommendation",
    "k_ranges",
    "ADVICE_FILE",
    "RECORDS_FILE",
    "CHECKPOINT_FILE",
    "COLUMNS",
    "RunOptions",
]

RECORDS_FILE = "advice.csv"
ADVICE_FILE = "advice.json"


# -- candidates -------------------------------------------------------------------------
def default_candidates(n_blocks: int) -> list[str]:
    """``jc``, ``gs`` in block order and reversed, every other GS order when ``N <= 4``, and
    ``chain``.

    Spellings are the command line's (``gs:3,2,1``); candidates with the same pairs are kept once
    (for ``N = 2`` the chain is GS).
    """
    n = n_blocks
    specs = ["jc"]
    if n >= 2:
        specs += ["gs", "gs:" + ",".join(str(b) for b in range(n, 0, -1))]
        if n <= 4:
            specs += ["gs:" + ",".join(str(b + 1) for b in o) for o in itertools.permutations(range(
                n))]
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
            raise AdviceError(f"patterns {seen[pat.pairs]!r} and {name!r} are the same scheme "
                              f"{pat.describe()}")
        seen[pat.pairs] = name
        out.append((name, pat))
    if not any(p.is_jacobi for _, p in out):
        out.insert(0, ("jc", as_pattern("jc", task.n_blocks)))
    else:  # the reference first
        out.sort(key=lambda np_: not np_[1].is_jacobi)
    return out


# -- the decision ------------------------------------------------------------------------
def decide(estimates: Mapping[str, float], errors: Mapping[str, float]) -> dict:
    """The best candidate at one ``k`` (lowest estimate; ties: the first) and whether it is
    certified.

    Returns:
        ``{"best", "runner_up", "margin", "certified"}``: certified when ``estimate[runner_up] -
        estimate[best] > error[best] + error[runner_up]`` (``False`` with a single candidate or a
        non-finite estimate).
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


# -- the result ---------------------------------------------------------------------------
@dataclass
class Advice:
    """Outcome of :func:`advise`.

    Attributes:
        candidates: candidate spellings, JC first. per_iteration: ``[{"k", "loss_jc", "sharpness",
        "estimates", "errors", "corrected", "one_step", "best",
            "runner_up", "margin", "next_order", "tied", "certified"}]`` for ``k = 1..K`` (dicts
            keyed by spelling, floats; ``sharpness``: ``lambda_max(H_JC^k)`` as the regime gate
            reads it; ``next_order``, ``tied``, ``certified``:
            :func:`crosscurv.numeric.certificate.certify_best`'s).
        recommendation: the sentence of :func:`recommendation` (plus the GS-order note). orders: for
        two or more full GS candidates: ``{"eta3": {spelling: {"k0"}}, "told_apart",
            "note"}`` (else ``None``).
        one_step_checks: ``[at theta^0]`` (:func:`crosscurv.numeric.one_step_check.one_step_check`):
            the measured one-step gap of each candidate against ``eta^2 C_S`` and ``eta^2 C_S +
            eta^3 c3``; the recommendation warns where the remainder exceeds the ``eta^3`` term.
        status: ``"complete"`` or ``"diverged"``. settings: what the run used (JSON-able). timing:
        ``{"one_step_check_s"}``: seconds of this call's one-step check (0 when none ran). out_dir:
        the run folder or ``None``.
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
        """The ``--json`` object: ``recommendation``, ``per_iteration`` (``k``, ``estimates``,
        ``errors``, ``best``, ``certified``) and the extras (``candidates``, ``status``, ``orders``,
        ``corrected``...)."""
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
                 "runner_up": r["runner_up"], "margin": r["margin"], "corrected": r["corrected"],
                 "one_step": r["one_step"], "loss_jc": r["loss_jc"], "sharpness": r["sharpness"]}
                for r in self.per_iteration
            ],
            "settings": self.settings,
        })

    def figure(self, path: str, validation: Mapping | None = None) -> str:
        """The advice's figure in ``path`` (PNG):
        :func:`crosscurv.experiments.reports.advice_figure.advice_figure`."""
        from crosscurv.experiments.reports.advice_figure import advice_figure

        return advice_figure(self, path, validation)


# -- records -------------------------------------------------------------------------------
def read_advice_records(path: str) -> list[dict]:
    """The complete rows of ``advice.csv`` as per-iteration dicts (``k`` ascending; a torn last line
    is ignored; :func:`crosscurv.numeric.advice_run.read_advice_records`).

    Raises:
        AdviceError: not an advice records file, or a malformed row.
    """
    return _read_records(path, AdviceError)


def _with_decision(r: dict, trusted: bool = True, gs_orders: Sequence[str] = (),
                   next_order=None) -> dict:
    """``r`` with :func:`decide`'s ``runner_up`` and ``margin`` and the certificate's
    ``next_order``, ``best``, ``tied`` and ``certified``
    (:func:`crosscurv.numeric.certificate.certify_best` with ``next_order``, default ``r``'s
    embedded errors; inside while ``trusted``: the run's regime gate, :func:`_inside`)."""
    d = decide(r["estimates"], r["errors"])
    nxt = dict(r["errors"] if next_order is None else next_order)
    v = certify_best(r["estimates"], nxt, trusted, gs_orders)
    return {**r, **d, "next_order": nxt, "best": v["best"], "tied": v["tied"], "certified": v[
        "certified"]}


def _decided_table(rows: Sequence[Mapping], gate: Sequence[bool], gs_orders: Sequence[str],
                   first_step: Mapping[str, float], lr: float, dtype, exact: Sequence[str]
                   ) -> list[dict]:
    """Every row with its decision (:func:`_with_decision`), the first dropped order of
    :func:`crosscurv.numeric.certificate.advice_next_orders` over the rows up to it, floored at the
    rounding of ``L_JC^k`` in ``dtype`` and amplified near the edge (``eta * sharpness_k``);
    ``exact``: the candidates predicted exactly (JC); ``rounding``: that floor."""
    errs = [r["errors"] for r in rows]
    return [{**_with_decision(r, ok, gs_orders, advice_next_orders(
        errs[max(0, i + 1 - REMAINDER_WINDOW):i + 1], first_step, r["k"], floor=floor,
        amplification=edge_amplification(lr * float(r["sharpness"])), exact=exact)),
        "rounding": floor}
        for i, (r, ok) in enumerate(zip(rows, gate))
        for floor in [rounding_floor(r["loss_jc"], dtype)]]


def full_gs_orders(cands) -> list[str]:
    """The full GS orders among ``[(spelling, pattern)]`` (Corollary 1 ties them at ``O(eta^2)``).
    """
    return [n for n, p in cands if p.n_blocks > 1 and p.is_full_gs()]


#: Per row: the JC run has stayed below the edge of stability so far.
_inside = inside_regime


def _orders(cands, checks: Sequence[dict]) -> dict | None:
    """The ``eta^3`` one-step coefficients of the full GS candidates at ``theta^0``."""
    gs = [n for n, p in cands if p.n_blocks > 1 and p.is_full_gs()]
    if len(gs) < 2:
        return None
    return {"eta3": {n: {"k0": checks[0][n]["c3"]} for n in gs}}


@computes_with_threads
def advise(task, lr: float, iters: int, patterns=None, *, checks: bool = True,
           search: str | None = None, final_only: bool = False, options: RunOptions | None = None,
           **keywords) -> Advice:
    """Predict the best scheme among ``patterns`` for every budget ``k <= iters`` from one JC run
    (module docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task`; ``task.params`` is ``theta^0``. lr: constant
        learning rate ``eta > 0``. iters: budget ``K >= 1``. patterns: candidates
        (:func:`parse_candidates`; default :func:`default_candidates`). checks: the one-step check
        at ``theta^0`` (module docstring), which also rank the
            full GS orders by their ``eta^3`` coefficients (plain steps only).
        options, keywords: the run's :class:`crosscurv.numeric.trajectory.RunOptions`, each also
            a keyword, as for :func:`crosscurv.numeric.protocol.run_protocol`: ``out_dir``
            (``None``: in memory only), ``resume``, ``hvp_method``, ``seed`` (recorded; the
            prediction itself is deterministic), ``settings``, ``checkpoint_every``, ``progress(k,
            K)`` (after each iteration's rows), ``on_record(row)`` (the decided row, after each
            iteration's rows are written; an exception interrupts), ``optimizer`` and ``block_lr``:
            the JC run takes the optimizer's steps and the predictions are the optimizer-aware
            JC-only estimate (module docstring); errors are NaN (the embedded pair is derived for
            plain steps), so nothing is certified.
        threads: intra-op threads of the call (``None``: ``OMP_NUM_THREADS`` if set, else 1, as the
            command line; :mod:`crosscurv.numeric.threads`); recorded as ``settings["threads"]``.
        search: ``"orders"``, ``"stages[:D]"`` or ``"all"``: instead of ``patterns``, search that
            whole space of patterns from one JC run and return a
            :class:`crosscurv.numeric.pattern_search.SearchResult`
            (:func:`crosscurv.numeric.pattern_search.search`; ``checks`` certifies its front,
            ``out_dir`` receives ``search.json`` and ``pair_records.npz``); plain steps only.
        final_only: with ``search``, predict at ``K`` only by an adjoint sweep (``N + 1``
            products per iteration instead of ``N^2``; ``search``'s ``final_only``).

    Returns:
        :class:`Advice`.  A non-finite JC loss stops the run with status ``"diverged"``.
    """
    from .protocol import check_iters, check_lr

    opts = RunOptions.of(options, keywords, "advise")
    if search is not None:
        if patterns is not None or opts.optimizer is not None or opts.block_lr is not None:
            raise AdviceError("search takes the whole space of patterns from one plain JC run: no "
                              "patterns, optimizer or block_lr with it")
        from .pattern_search import search as search_space

        return search_space(task, lr, iters, search, certify=checks, hvp_method=opts.hvp_method,
                            seed=opts.seed, progress=opts.progress, out_dir=opts.out_dir,
                            resume=opts.resume, checkpoint_every=opts.checkpoint_every,
                            final_only=final_only)
    if final_only:
        raise AdviceError("final_only is an option of a search: pass search too")

    lr, iters = check_lr(lr), check_iters(iters)
    rule = advice_steps(task, optimizer_setup(task, opts.optimizer, opts.block_lr))
    cands = parse_candidates(task, patterns)
    names = [n for n, _ in cands]
    settings = with_threads(run_settings(
        task, lr, iters, opts.seed, opts.hvp_method, {**(opts.settings or {}), **rule.settings()},
        {"candidates": [{"name": n, **p.to_dict()} for n, p in cands]}))
    keys = block_keys(task)
    active = [PatternCandidate(n, p, [(i, list(p.fresh(i))) for i in range(p.n_blocks) if p.fresh(
        i)])
              for n, p in cands if not p.is_jacobi]
    gs = full_gs_orders(cands)
    exact = [n for n, p in cands if p.is_jacobi]

    def on_record(row):  # the row with its decision, over the rows its certificate looks back on
        last = run.records[-REMAINDER_WINDOW:]
        first = first_step_orders([body.check0 or {}], run.records[0]["estimates"])
        opts.on_record(_decided_table(last, [body.inside] * len(last), gs, first, lr,
                                      task.dtype, exact)[-1])

    folder = None
    if opts.out_dir is not None:
        folder = RunFolder(opts.out_dir, RECORDS_FILE, ADVICE_FILE)
    run = Run(iters, folder, advice_records(names, AdviceError), opts.checkpoint_every,
              on_record if opts.on_record is not None else None, opts.progress)
    try:
        ck = _open(folder, task, settings, opts.resume)
    except ProtocolError as exc:  # the runner's one-line refusals, as advise's own
        raise AdviceError(str(exc)) from None
    engine = choose_engine(task, opts.hvp_method)
    body = AdviceRun(task, lr, settings, engine, rule, keys, column_sources(active, keys), active,
                     names[0], opts.seed)
    check_s, done, start = 0.0, False, 0
    if ck is not None:
        done, _, start = run.resume_point(ck)
        body.load(ck, run.records)
    else:
        body.start()
        t_check = time.perf_counter()
        body.check0 = (one_step_check(task, cands, tree.clone(task.params), lr, 0, engine.method)
                       if active and checks and rule.checks else {})
        check_s = time.perf_counter() - t_check
    rule.withdrawn = frozenset(n for n, v in first_step_remainders([body.check0 or {}]).items()
                               if math.isinf(v))
    out = run.execute(body, start, done, task.device)
    first = first_step_orders([body.check0 or {}], run.records[0]["estimates"] if run.records
                              else {})
    return _advice(run, body, cands, out, checks, first, {"one_step_check_s": check_s})


def _open(folder, task, settings: dict, resume: bool) -> dict | None:
    """The checkpoint to resume from (checked against ``settings``), or ``None`` for a fresh run
    (the folder checked to hold none, created)."""
    if resume:
        if folder is None:
            raise AdviceError("resume needs an output directory")
        ck = folder.load_checkpoint(task.device)
        check_resume_settings(ck["settings"], settings, folder.path)
        return ck
    if folder is not None:
        folder.check_fresh()
        folder.create()
    task.check_loss()
    return None


def _advice(run, body, cands, out, checks: bool, first: Mapping, timing: dict) -> Advice:
    """The :class:`Advice` of a finished run (also written to ``advice.json`` in its folder)."""
    rows, lr, names = run.records, body.lr, [n for n, _ in cands]
    gate = _inside(rows, lr)
    table = _decided_table(rows, gate, full_gs_orders(cands), first, lr, body.task.dtype,
                           [n for n, p in cands if p.is_jacobi])
    done_checks = [body.check0 or {}]
    orders = _orders(cands, done_checks) if checks and body.check0 else None
    text = (recommendation(table) + _order_note(orders, table[-1] if table else None, lr)
            + _check_note(done_checks) + _edge_note(rows, gate, lr)
            + (_uncoupled_note(table) or (_rounding_note(
                table[-1], rounding_floor(rows[-1]["loss_jc"], body.task.dtype)) if table else "")))
    text += body.rule.note
    if out.status == "diverged":
        text = diverged_recommendation(out.message, rows, table, text)
    message = out.message or f"complete: {len(table)} iterations, {len(names)} candidates"
    out_dir = run.folder.path if run.folder is not None else None
    adv = Advice(names, table, text, orders, out.status, message, body.settings, out_dir,
                 done_checks, timing)
    if out_dir is not None:
        write_summary(run.folder.summary, adv.to_json())
    return adv


# -- validation ---------------------------------------------------------------------------------
def measured_best(gaps: Mapping[str, float], gap_errs: Mapping[str, float]) -> dict:
    """The measured best candidate at one ``k`` (lowest measured ``L_S - L_JC``, JC ``0``) and
    whether
    the measurement decides it (margin to the runner-up above the sum of their ``gap_err``)."""
    d = decide(gaps, gap_errs)
    return {"best": d["best"], "decided": d["certified"]}


@computes_with_threads
def validate(task, advice: Advice, *, hvp_method: str = "auto", seed: int = 0) -> dict:
    """Run every non-JC candidate's trajectory beside JC
    (:func:`crosscurv.numeric.protocol.run_protocol`, in memory) and measure what the advice gives
    up (:mod:`crosscurv.numeric.regret`) and how often it was right.

    Returns:
        ``{"summary", "per_iteration": [{"k", "advised", "certified", "measured", "decided", "gaps",
        "gap_errs", "right", "regret"}], "agree_all": [n, of], "agree_certified": [n, of],
        "agree_decided": [n, of], "eta_sharpness_max", "covered_embedded": [n, of],
        "covered_certified": [n, of], "status"}``: ``covered_*`` count the (iteration, candidate)
        pairs whose actual error ``|jc_only - gap|`` is within this advice's embedded error and
        within the protocol's ``jc_only_err`` (:mod:`crosscurv.numeric.error_estimates`, computed
        from the ``S`` run), over the pairs where that error is finite; ``decided`` iterations are
        those where the measured margin exceeds the measurements' error (``gap_err``);
        ``eta_sharpness_max`` is ``eta`` times the largest ``lambda_max(H_JC^k)`` along the run (the
        records' converged ``lambda_max``, or the power iteration's ``sharpness`` where that is
        larger; above 2: past the edge of stability); ``summary``:
        :func:`crosscurv.numeric.regret.summarise` (regret relative to the spread of the candidates,
        the full GS orders the certificate could not tell apart counted as ties; precision and
        coverage of the certificate; the certified iterations that were wrong).
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
            sharp = max((x for r in res.records for x in (r["lambda_max"], r["sharpness"])
                         if math.isfinite(x)),
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
        table.append({"k": r["k"], "advised": r["best"], "certified": r["certified"], "measured": m[
            "best"],
                      "decided": m["decided"], "gaps": g, "gap_errs": e,
                      "right": advice_right(r["best"], g, e, theory), "regret": regret(r["best"], g,
                                                                                       e, theory)})

    def count(rows):
        return [sum(1 for t in rows if t["advised"] == t["measured"]), len(rows)]

    return {"per_iteration": table, "agree_all": count(table), "eta_sharpness_max": lr * sharp,
            "agree_certified": count([t for t in table if t["certified"]]),
            "agree_decided": count([t for t in table if t["decided"]]), "status": status,
            "covered_embedded": covered["embedded"], "covered_certified": covered["certified"],
            "summary": summarise(table)}
