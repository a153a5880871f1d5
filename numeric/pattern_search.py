"""The best delay pattern for each parallelism budget, over a whole space of patterns, from one JC
run.

For a space of patterns (:mod:`crosscurv.theory.pattern_spaces`: every GS order, every arrangement
into at most ``D`` sequential stages, every acyclic pattern) the JC-only prediction of each pattern
``S`` at every ``k <= K`` is a sum over its pairs (:mod:`crosscurv.numeric.pair_records`)::

    estimate_S^k = sum_{p in S} l_p^k + 1/2 sum_{p, q in S} Q_pq^k,

the same number :func:`crosscurv.numeric.advice.advise` computes for ``S`` as a candidate (to
rounding: ``tests/numeric/test_pattern_search.py``). One JC run gathers ``l^k, Q^k`` at the cost of
``N^2`` Hessian-vector products per iteration, whatever the number of patterns; the search then
evaluates every pattern of the space at ``K`` and names, for each number ``D`` of sequential stages,
the pattern with the lowest prediction among those with at most ``D`` stages (the Pareto front of
predicted gain against sequential stages; JC is the one-stage scheme, prediction 0).

Exactness: the space is evaluated exhaustively at ``K``: in float32 first, then every pattern whose
float32 value is within twice a bound on the float32 rounding of the best or runner-up is evaluated
again in float64 (:func:`best_per_depth`), so the named best and runner-up are those of the float64
evaluation.  ``all`` is enumerated for ``N <= 5`` (29,281 acyclic patterns;
:data:`crosscurv.theory.pattern_spaces.MAX_ALL_EXHAUSTIVE`); beyond (7.8 x 10^11 patterns for ``N =
8``) the stage arrangements are searched exhaustively and each budget's best is the start of a
steepest descent over acyclic patterns, one pair added or removed per move (:func:`local_descent`):
the named pattern is predicted no worse than the best stage arrangement and no single pair improves
it, a local minimum without a global guarantee.

Errors and certificates (``certify``): the front's patterns and their runners-up get the
embedded-pair error, the one-step check and the regime gate of a single candidate of
:func:`crosscurv.numeric.advice.advise`, along the same JC trajectory with the search's per-pair
sums as their estimates (:mod:`crosscurv.numeric.pattern_search_certify`); a budget's choice is
certified when the margin of its prediction to the runner-up's exceeds the sum of their embedded
errors and the gates hold, as for single candidates (``cost["certify_s"]``).

Cost against trying (``cost``): the seconds of the JC run and the evaluation, and the seconds plain
training of the patterns would take, measured by timing an exact scheme step of the first and the
last front pattern (:func:`crosscurv.numeric.advice_cost.plain_seconds`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from crosscurv.theory.pattern_spaces import DAG_COUNTS, LOCAL, PatternSpace, parse_space

from .pair_records import PairRecords, pair_run
from .pattern_search_certify import certify_front, rankable
from .pattern_search_eval import (SCREEN_RANK, _screen, best_per_depth, front_rows,  # noqa: F401
                                  local_descent, local_front, row_name)
from .records import json_safe

__all__ = [
    "SearchResult", "search", "search_patterns", "best_per_depth", "local_descent", "rankable"
]


@dataclass
class SearchResult:
    """Outcome of :func:`search`.

    Attributes:
        space: the :class:`PatternSpace` searched; ``records``: the :class:`PairRecords` of the JC
        run.
        front: one row per number of sequential stages ``D`` reached by the space, at ``K``:
            ``{"stages", "best", "stages_text", "estimate", "one_step", "runner_up",
            "runner_up_estimate", "margin", "on_front", "error", "runner_up_error", "certified"}``
            (``stages_text``: the stages in sequence, ``-`` for a pattern that is no stage
            arrangement; ``estimate``: predicted ``L_S^K - L_JC^K``; ``on_front``: lower than
            every budget with fewer stages; errors and ``certified`` from the certification, NaN
            / ``None`` without one; ``rankable``: :func:`rankable`).  JC (``D = 1``, prediction 0)
            is always the first row.
        per_iteration: ``[{"k", "loss_jc", "estimates": {pattern: float}}]``, the front's patterns
        at every ``k``.
        recommendation: one paragraph naming the front.
        cost: ``{"space_s", "pair_run_s", "evaluate_s", "certify_s", "plain_step_s": {pattern:
            s}, "plain_pattern_s", "plain_space_s", "ratio_8"}``: ``ratio_8`` is (building the
            space + JC run + evaluation)
            over the plain training of 8 of the space's patterns (all of them when it holds fewer;
            estimated from the front's measured steps).
        status, message: of the JC run.
    """

    space: PatternSpace
    records: PairRecords
    block_names: list
    front: list
    per_iteration: list
    recommendation: str = ""
    cost: dict = field(default_factory=dict)
    status: str = "complete"
    message: str = ""

    def predict(self, pattern, k: int | None = None) -> float:
        """The JC-only prediction of ``pattern`` (a :class:`DelayPattern` or its spelling) at ``k``
        (default ``K``)."""
        from crosscurv.theory.pattern_spaces import pair_list
        from crosscurv.theory.patterns import as_pattern

        pat = as_pattern(pattern, self.space.n_blocks, self.block_names)
        row = np.array([[p in pat.pairs for p in pair_list(pat.n_blocks)]])
        return float(self.records.predict(row, k or self.records.iters)[0])

    def best(self, k: int, max_stages: int | None = None) -> tuple[str, float]:
        """The space's best pattern with at most ``max_stages`` stages at ``k`` and its prediction.
        """
        rec = self.records
        rec._check_k(k)
        d = max_stages or self.space.max_stages
        got = best_per_depth(self.space, rec.linear[k - 1], rec.gram[k - 1])
        ds = [x for x in got if x <= d]
        if not ds:
            return "jc", 0.0
        b, v, _, _ = got[max(ds)]
        name = self.space.name(b)
        if self.space.kind == LOCAL:
            row, v, _, _, moves = local_descent(
                self.space.n_blocks, rec.linear[k - 1], rec.gram[k - 1], self.space.rows([b])[0], d
            )
            name = row_name(self.space.n_blocks, row) if moves else name
        return (name, v) if v < 0 else ("jc", 0.0)

    def save(self, out_dir: str) -> None:
        """Write ``out_dir/search.json`` (:meth:`to_json`) and ``out_dir/pair_records.npz``:
        ``pairs`` (1-based ``(i, j)``), ``loss_jc``, ``linear``, ``gram``, ``pair_curvature`` per
        ``k`` and ``lr``, from which any pattern's prediction at any ``k`` is ``s . l^k + 1/2 s^T
        Q^k s`` (final-only records: the rows before ``K`` are NaN and ``gram`` is zero at ``K``,
        so ``s . l^K`` is the prediction without its quadratic term)."""
        import os

        from .records import write_summary

        os.makedirs(out_dir, exist_ok=True)
        write_summary(os.path.join(out_dir, "search.json"), self.to_json())
        rec = self.records
        np.savez(os.path.join(out_dir, "pair_records.npz"),
                 pairs=np.array(rec.pairs, dtype=np.int64).reshape(-1, 2) + 1, loss_jc=rec.loss_jc,
                 linear=rec.linear, gram=rec.gram, pair_curvature=rec.pair_curvature, lr=rec.lr)

    def to_json(self) -> dict:
        """The ``--json`` object: ``space``, ``n_patterns`` (``enumerated``: how many were
        evaluated), ``final_only`` (the front ranked at ``K`` by the adjoint sweep's linear
        terms), ``front``, ``recommendation``, ``cost``, ``per_iteration``, ``status``."""
        n = DAG_COUNTS[self.space.n_blocks] if self.space.kind == LOCAL else len(self.space)
        return json_safe(
            {
                "space": self.space.spec,
                "n_patterns": n,
                "enumerated": len(self.space),
                "status": self.status,
                "message": self.message,
                "iters": self.records.iters,
                "final_only": self.records.final_only,
                "lr": self.records.lr,
                "recommendation": self.recommendation,
                "front": self.front,
                "cost": self.cost,
                "per_iteration": self.per_iteration,
            }
        )


def search(
    task,
    lr: float,
    iters: int,
    space: str | PatternSpace = "stages",
    *,
    certify: bool = True,
    hvp_method: str = "auto",
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    out_dir: str | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    final_only: bool = False,
) -> SearchResult:
    """Search ``space`` (``orders``, ``stages[:D]``, ``all`` or a :class:`PatternSpace`) for the
    best pattern per number of sequential stages at ``K = iters`` from one JC run (module
    docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task` with at least 2 blocks; ``task.params`` is
        ``theta^0``.
        lr: ``eta > 0``; iters: ``K >= 1``.
        certify: errors and certificates for the front's patterns and runners-up
            (:func:`crosscurv.numeric.pattern_search_certify.certify_front`).
        hvp_method, seed: as :func:`crosscurv.numeric.advice.advise` (used by the certification).
        progress: ``progress(j, total)`` after each iteration of the JC run (``K`` of them; ``2
            K`` with ``final_only``, the sweep's included) and of the certification (``K`` more).
        out_dir: a folder for :meth:`SearchResult.save` and the JC run's state
            (``pair_state.pt``, :func:`crosscurv.numeric.pair_records.pair_run`; ``None``: in
            memory only).
        resume: continue the JC run saved in ``out_dir`` (killed, or run to a smaller ``K``) up
            to ``iters`` instead of starting over; the result is that of an uninterrupted run.
        checkpoint_every: iterations between saved states (default: at most one a minute).
        final_only: gather the per-pair terms at ``K`` only, by an adjoint sweep
            (:func:`crosscurv.numeric.pair_adjoint.pair_adjoint`: ``N + 1`` products per iteration
            instead of ``N^2``, the quadratic term left out of the search and restored for the
            certified front, where a budget whose restored predictions reverse its best and
            runner-up names the better of the two); ``per_iteration`` then holds the
            certification's predictions of the named patterns at every ``k`` (``K`` only without
            certification); ``resume`` continues a killed run of the same ``iters``
            (``pair_adjoint_state.pt``).

    Raises:
        SpaceError: a malformed space or one too large to enumerate; InputError: bad ``lr`` /
        ``iters``.
    """
    from .protocol_checks import check_iters, check_lr

    lr, iters = check_lr(lr), check_iters(iters)
    t = time.process_time()
    sp = space if isinstance(space, PatternSpace) else parse_space(space, task.n_blocks)
    space_s = time.process_time() - t  # building the space from its spelling
    t = time.process_time()
    run_steps = 2 * iters if final_only else iters
    total = run_steps + (iters if certify else 0)
    run_progress = cert_progress = None
    if progress is not None:
        def run_progress(j, _):
            progress(j, total)

        def cert_progress(k, _):
            progress(run_steps + k, total)
    if final_only:
        from .pair_adjoint import STATE_FILE, pair_adjoint

        rec = pair_adjoint(task, lr, iters, progress=run_progress,
                           state_path=_state_path(out_dir, resume, STATE_FILE), resume=resume,
                           checkpoint_every=checkpoint_every)
    else:
        rec = pair_run(task, lr, iters, progress=run_progress,
                       state_path=_state_path(out_dir, resume), resume=resume,
                       checkpoint_every=checkpoint_every)
    pair_s = time.process_time() - t
    K = rec.iters
    t = time.process_time()
    front = front_rows(sp, rec, K) if K else []
    if sp.kind == LOCAL and front:
        local_front(front, sp, rec, K)
    eval_s = time.process_time() - t
    cost = _cost(task, lr, sp, front, K, space_s, pair_s, eval_s)
    note, own = "", None
    for r in front:
        r.update(error=math.nan, runner_up_error=math.nan, certified=None)
    if certify and K and rec.status == "complete":
        t = time.process_time()
        note, own = certify_front(task, lr, rec, front, hvp_method=hvp_method, seed=seed,
                                  progress=cert_progress)
        cost["certify_s"] = time.process_time() - t
    for r in front:
        r["rankable"] = rankable(r)
    per_k = (_own_per_iteration(rec, own) if rec.final_only and own
             else _per_iteration(rec, front, sp))
    res = SearchResult(sp, rec, list(task.block_names), front, per_k,
                       cost=cost, status=rec.status, message=rec.message)
    res.recommendation = _recommendation(res) + note
    if out_dir is not None:
        res.save(out_dir)
    return res


def _state_path(out_dir: str | None, resume: bool, name: str | None = None) -> str | None:
    """``out_dir/NAME`` (default ``pair_state.pt``; the folder created), ``None`` without a
    folder."""
    if out_dir is None:
        if resume:
            from crosscurv.theory.errors import AdviceError

            raise AdviceError("resume needs an output directory")
        return None
    import os

    from .pair_records import STATE_FILE

    os.makedirs(out_dir, exist_ok=True)
    return os.path.join(out_dir, name or STATE_FILE)


def _per_iteration(rec: PairRecords, front: list[dict], sp: PatternSpace) -> list[dict]:
    """``[{"k", "loss_jc", "estimates": {pattern: prediction}}]`` of the front's patterns and
    runners-up at every ``k`` (at ``K`` only for final-only records)."""
    from crosscurv.theory.pattern_spaces import pair_list
    from crosscurv.theory.patterns import as_pattern

    members: dict = {}
    pl = pair_list(sp.n_blocks)
    for r in front:
        for n in (r["best"], r["runner_up"]):
            if n is not None and n not in members:
                pat = as_pattern(n, sp.n_blocks)
                members[n] = np.array([p in pat.pairs for p in pl])
    if not members:
        return []
    if rec.final_only:  # the front's own values at K (full predictions once certified)
        est = {r[n]: r[v] for r in front for n, v in (("best", "estimate"),
                                                       ("runner_up", "runner_up_estimate"))
               if r[n] in members}
        return [{"k": rec.iters, "loss_jc": float(rec.loss_jc[-1]), "estimates": est}]
    names, rows = list(members), np.array(list(members.values()))
    return [{"k": k, "loss_jc": float(rec.loss_jc[k - 1]),
             "estimates": dict(zip(names, rec.predict(rows, k).tolist()))}
            for k in range(1, rec.iters + 1)]


def _own_per_iteration(rec: PairRecords, own: dict) -> list[dict]:
    """``per_iteration`` of a certified final-only search: the named patterns' own JC-only
    predictions at every ``k``, carried by the certification."""
    return [{"k": k, "loss_jc": float(rec.loss_jc[k - 1]),
             "estimates": {n: v[k - 1] for n, v in own.items()}}
            for k in range(1, rec.iters + 1)]


def _cost(task, lr, sp, front, K, space_s, pair_s, eval_s) -> dict:
    """:attr:`SearchResult.cost`: the search's seconds against plain training, priced by timing
    one exact step (after one warm-up) of the front's first and last patterns (the fewest and
    the most stages)."""
    from .advice_cost import plain_seconds

    timed = [r["best"] for r in front if r["stages"] > 1]
    steps = plain_seconds(task, sorted({timed[0], timed[-1]}) if timed else [], lr, 1)
    per_step = float(np.mean(list(steps.values()))) if steps else math.nan
    return {
        "space_s": space_s,
        "pair_run_s": pair_s,
        "evaluate_s": eval_s,
        "certify_s": 0.0,
        "plain_step_s": steps,
        "plain_pattern_s": per_step * K,
        "plain_space_s": per_step * K * len(sp),
        "ratio_8": (
            (space_s + pair_s + eval_s) / (min(8, len(sp)) * per_step * K) if K else math.nan
        ),
    }


#: :func:`search` under the name ``crosscurv.search_patterns`` (the package's lazy export).
search_patterns = search


def _arrangement(row: dict) -> str:
    """`` (stages)`` of a row whose pattern is a stage arrangement, else ``""``."""
    text = row.get("stages_text", "-")
    return "" if text in ("-", "", row["best"]) else f" ({text})"


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _recommendation(res: SearchResult) -> str:
    """The front in words, what it cost against trying, and (two blocks) that trying is cheaper."""
    sp, K, cost = res.space, res.records.iters, res.cost
    if not K:
        return f"the JC run stopped before k = 1 ({res.message}): nothing to search"
    parts = []
    for r in res.front:
        if r["stages"] == 1 or not r["on_front"]:
            continue
        cert = {True: "certified", False: "not certified", None: "no error estimate"}[
            r["certified"]
        ]
        if r.get("rankable") is False:  # margin within the errors: no winner to name
            parts.append(
                f"{r['stages']} stages: cannot rank: the best predicted, {r['best']} "
                f"{_fmt(r['estimate'])} vs JC, and the runner-up {r['runner_up']} differ by "
                f"{_fmt(r['margin'])}, within their errors ({_fmt(r['error'])}, "
                f"{_fmt(r['runner_up_error'])}); train the top few to choose"
            )
            continue
        parts.append(
            f"{r['stages']} stages: {r['best']}{_arrangement(r)} predicted "
            f"{_fmt(r['estimate'])}"
            f" vs JC ({cert}; runner-up {r['runner_up']} {_fmt(r['runner_up_estimate'])})"
        )
    over = (
        f"{len(sp):,} patterns ({sp.spec})"
        if sp.kind != LOCAL
        else f"the {DAG_COUNTS[sp.n_blocks]:.2g} acyclic patterns (all: the {len(sp):,} stage "
             "arrangements exhaustively, then single-pair descent from each budget's best, a local "
             "minimum)"
    )
    head = (
        f"at K = {K}, over {over}: "
        + ("; ".join(parts) if parts else "no pattern is predicted below JC: use jc")
        + "."
    )
    search_s = cost.get("space_s", 0.0) + cost["pair_run_s"] + cost["evaluate_s"]
    head += (
        f" The search took {search_s:.2f} s (plus {cost['certify_s']:.2f} s certifying); plain "
        f"training of one pattern for K = {K} takes about {cost['plain_pattern_s']:.2f} s, of all "
        f"{len(sp):,} about {cost['plain_space_s']:.3g} s: the search costs "
        f"{cost['ratio_8']:.2f} x training {min(8, len(sp))} of them."
    )
    if sp.n_blocks == 2:
        three = cost["plain_pattern_s"] * 3
        verdict = (
            "training the three is cheaper than this search"
            if three < search_s + cost["certify_s"]
            else "this search was cheaper than training the three"
        )
        head += (
            f" With two blocks the whole space is three schemes (jc, gs, gs:2,1), about "
            f"{three:.2f} s to train: {verdict}. What advise adds is the reason (the "
            f"cross-curvature terms eta^2 c_12 and eta^2 c_21 of Theorem 1, propagated to K) and "
            f"an error estimate for each prediction."
        )
    elif cost["plain_space_s"] < search_s:
        head += f" Training all {len(sp):,} patterns directly would have been cheaper."
    if sp.n_blocks > 2 and cost["ratio_8"] > 1 and not res.records.final_only:
        n = sp.n_blocks
        head += (f" For the best patterns at K only, --final-only (final_only=True) needs {n + 1} "
                 f"Hessian-vector products per iteration instead of {n * n}.")
    if res.status == "diverged":  # the divergence and the last finite state first
        from .advice_text import diverged_recommendation

        last = [{"k": K, "loss_jc": float(res.records.loss_jc[K - 1])}]
        return diverged_recommendation(res.message, last, res.front, head)
    if res.status != "complete":
        head = f"the JC run {res.status} ({res.message}); " + head
    return head
