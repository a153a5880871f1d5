"""The best delay pattern for each parallelism budget, over a whole space of patterns, from one JC
run.

For a space of patterns (:mod:`crosscurv.theory.pattern_spaces`: every GS order, every arrangement
into at most ``D`` sequential stages, every acyclic pattern) the JC-only prediction of each pattern
``S`` at every ``k <= K`` is a sum over its pairs (:mod:`crosscurv.numeric.pair_records`)::

    estimate_S^k = sum_{p in S} l_p^k + 1/2 sum_{p, q in S} Q_pq^k,

the same number :func:`crosscurv.numeric.advice.advise` computes for ``S`` as a candidate (to
rounding: ``tests/numeric/test_pattern_search.py``).  One JC run gathers ``l^k, Q^k`` at the cost of
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

Errors and certificates (``certify``): the front's patterns and their runners-up are advised again
as candidates of :func:`crosscurv.numeric.advice.advise` (the embedded-pair error, the one-step
check and the regime gate of a single candidate); a budget's choice is certified when the margin of
its prediction to the runner-up's exceeds the sum of their embedded errors and the advice's gates
hold, as for single candidates. That run costs what advising those candidates costs
(``cost["certify_s"]``).

Cost against trying (``cost``): the seconds of the JC run and the evaluation, and the seconds plain
training of the patterns would take, measured by timing a few exact scheme steps of each front
pattern (:func:`crosscurv.numeric.advice_cost.plain_seconds`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from crosscurv.theory.pattern_spaces import DAG_COUNTS, LOCAL, PatternSpace, parse_space

from .pair_records import PairRecords, finite_pairs, pair_run, predict
from .records import json_safe

__all__ = [
    "SearchResult", "search", "search_patterns", "best_per_depth", "local_descent", "rankable"
]


def best_per_depth(space: PatternSpace, linear: np.ndarray, gram: np.ndarray) -> dict:
    """For each ``D`` of the space: the best and runner-up pattern with at most ``D`` sequential
    stages.

    Returns:
        ``{D: (best row, best value, runner-up row or -1, runner-up value or nan)}`` for each ``D``
        in ``1..max_stages`` that some pattern reaches; values float64, ties broken by the lower
        row.
    """
    P = linear.shape[0]
    linear, gram, bad = finite_pairs(linear, gram)
    screened = _screen(space, linear, gram, bad)
    if screened is not None:
        return _exact_best(space, linear, gram, *screened)
    m = torch.from_numpy(space.members)
    v32 = torch.empty(len(space), dtype=torch.float32)
    q, lin = torch.from_numpy(gram).float(), torch.from_numpy(linear).float()
    for a in range(0, len(space), 65536):
        s = m[a : a + 65536].float()
        v32[a : a + 65536] = s @ lin + 0.5 * ((s @ q) * s).sum(1)
    v32 = v32.numpy().astype(np.float64)
    if bad.any():
        v32[space.members[:, bad].any(axis=1)] = np.inf
    # float32 rounding of s.l + 1/2 s^T Q s: at most ~ (P + 2) eps |terms|, taken with a factor 4
    scale = np.abs(linear).sum() + 0.5 * np.abs(gram).sum()
    bound = 4 * (P + 2) * float(np.finfo(np.float32).eps) * scale
    if not (np.isfinite(v32).all() and np.isfinite(bound)):  # beyond float32: all in float64
        v32, bound = predict(space.members, linear, gram), 0.0
        if bad.any():
            v32[space.members[:, bad].any(axis=1)] = np.inf
    v32 = np.where(np.isfinite(v32), v32, np.inf)  # a non-finite prediction ranks last
    return _exact_best(space, linear, gram, v32, bound)


#: eigen-directions of ``Q`` kept exactly by :func:`_screen` (the rest is bounded)
SCREEN_RANK = 2


def _screen(space: PatternSpace, linear: np.ndarray, gram: np.ndarray, bad: np.ndarray):
    """Every pattern's prediction to within a bound, from a few pair sums (``orders`` /
    ``stages``; ``None`` for other spaces or beyond float64).

    With ``Q = sum_r lambda_r v_r v_r^T`` (eigenvalues by decreasing ``|lambda|``), ``Q_R`` its
    first ``R = SCREEN_RANK`` terms and ``E = Q - Q_R``::

        s . l + 1/2 s^T Q s = s . l + 1/2 sum_{r <= R} lambda_r (s . v_r)^2 + 1/2 s^T E s,
        |s^T E s| <= ||E||_2 |s|     (s a 0/1 vector with |s| pairs),

    and ``s . l``, ``s . v_r``, ``|s|`` and the number of non-finite pairs are pair sums
    (:meth:`PatternSpace.pair_sums`).

    Returns:
        ``(value, bound)``: ``float64 (n_patterns,)`` each, ``|prediction - value| <= bound``
        (``+inf`` value for a pattern holding a non-finite pair).
    """
    if space.blocks is None or not len(space):
        return None
    P = linear.shape[0]
    lam, vec = np.linalg.eigh(gram)
    top = np.argsort(-np.abs(lam), kind="stable")[: min(SCREEN_RANK, P)]
    lam_r, vec_r = lam[top], vec[:, top]
    rest = gram - (vec_r * lam_r) @ vec_r.T
    eps = float(np.finfo(np.float64).eps)
    norm_e = float(np.abs(np.linalg.eigvalsh(0.5 * (rest + rest.T))).max()) if P else 0.0
    norm_e += 8 * P * eps * float(np.abs(gram).sum())  # the eigen-decomposition's own error
    cols = [linear, vec_r, np.ones(P)] + ([bad.astype(np.float64)] if bad.any() else [])
    z = space.pair_sums(np.column_stack(cols))
    R = len(top)
    value = z[:, 0] + 0.5 * (z[:, 1 : 1 + R] ** 2) @ lam_r
    count = z[:, 1 + R]
    # rounding of the pair sums (2 P eps per sum of |terms|) and of the squares, taken twice over
    rnd = 8 * (P + 2) * eps * (np.abs(linear).sum() + P * np.abs(lam_r).sum())
    bound = 0.5 * norm_e * count + rnd
    if not (np.isfinite(value).all() and np.isfinite(bound).all()):
        return None
    if bad.any():
        value = np.where(z[:, 2 + R] > 0.5, np.inf, value)
    return value, bound


def _exact_best(space, linear, gram, value, bound) -> dict:
    """:func:`best_per_depth` from screened values: per ``D``, the patterns that may be among the
    two lowest (lower bound at most the second-lowest upper bound) are evaluated exactly
    (:func:`crosscurv.numeric.pair_records.predict`) and ranked by value, then row."""
    out = {}
    lo, hi = value - bound, value + bound
    depth = space.depth
    # rows grouped by depth (stage spaces list them by number of stages): slices, not masks
    grouped = bool((np.diff(depth) >= 0).all())
    two = np.full((space.max_stages + 1, 2), np.inf)  # the two lowest upper bounds per depth
    ends = np.searchsorted(depth, np.arange(space.max_stages + 2), side="right") if grouped else 0
    for d in range(1, space.max_stages + 1):
        ub = hi[ends[d - 1] : ends[d]] if grouped else hi[depth == d]
        if len(ub):
            two[d] = np.sort(np.partition(ub, 1)[:2] if len(ub) > 1 else [ub[0], np.inf])
    for d in range(1, space.max_stages + 1):
        if not np.isfinite(two[d]).any() and not (depth == d).any():
            continue
        low = np.sort(two[1 : d + 1].ravel())
        thr = low[1] if np.isfinite(low[1]) else low[0]
        if not np.isfinite(thr):
            continue  # no finite prediction with at most d stages
        if grouped:
            keep = np.flatnonzero(lo[: ends[d]] <= thr)
        else:
            keep = np.flatnonzero((depth <= d) & (lo <= thr))
        exact = predict(space.rows(keep), linear, gram)
        exact = np.where(np.isfinite(exact), exact, np.inf)
        order = np.lexsort((keep, exact))
        b = int(keep[order[0]])
        r = int(keep[order[1]]) if len(order) > 1 and np.isfinite(exact[order[1]]) else -1
        out[d] = (b, float(exact[order[0]]), r, float(exact[order[1]]) if r >= 0 else math.nan)
    return out


@dataclass
class SearchResult:
    """Outcome of :func:`search`.

    Attributes:
        space: the :class:`PatternSpace` searched; ``records``: the :class:`PairRecords` of the JC
        run.
        front: one row per number of sequential stages ``D`` reached by the space, at ``K``:
            ``{"stages", "best", "stages_text", "estimate", "one_step", "runner_up",
            "runner_up_estimate", "margin", "on_front", "error", "runner_up_error", "certified"}``
            (``estimate``: predicted ``L_S^K - L_JC^K``; ``on_front``: lower than every budget with
            fewer stages; errors and ``certified`` from the certification run, NaN / ``None``
            without one; ``rankable``: :func:`rankable`).  JC (``D = 1``, prediction 0) is always
            the first row.
        per_iteration: ``[{"k", "loss_jc", "estimates": {pattern: float}}]``, the front's patterns
        at every ``k``.
        recommendation: one paragraph naming the front.
        cost: ``{"space_s", "pair_run_s", "evaluate_s", "certify_s", "plain_step_s": {pattern:
            s}, "plain_pattern_s", "plain_space_s", "ratio_8"}``: ``ratio_8`` is (building the
            space + JC run + evaluation)
            over the plain training of 8 of the space's patterns (all of them when it holds fewer;
            estimated from the front's measured steps).
        consistency: the largest ``|advise estimate - per-pair sum|`` over the certified candidates
            and ``k``, and the scale it compares with (``None`` without certification).
        status, message: of the JC run.
    """

    space: PatternSpace
    records: PairRecords
    block_names: list
    front: list
    per_iteration: list
    recommendation: str = ""
    cost: dict = field(default_factory=dict)
    consistency: dict | None = None
    certification: object = None
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
            name = _row_name(self.space.n_blocks, row) if moves else name
        return (name, v) if v < 0 else ("jc", 0.0)

    def save(self, out_dir: str) -> None:
        """Write ``out_dir/search.json`` (:meth:`to_json`) and ``out_dir/pair_records.npz``:
        ``pairs`` (1-based ``(i, j)``), ``loss_jc``, ``linear``, ``gram``, ``pair_curvature`` per
        ``k`` and ``lr``, from which any pattern's prediction at any ``k`` is
        ``s . l^k + 1/2 s^T Q^k s``."""
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
        evaluated), ``front``, ``recommendation``, ``cost``, ``per_iteration``, ``consistency``,
        ``status``."""
        n = DAG_COUNTS[self.space.n_blocks] if self.space.kind == LOCAL else len(self.space)
        return json_safe(
            {
                "space": self.space.spec,
                "n_patterns": n,
                "enumerated": len(self.space),
                "status": self.status,
                "message": self.message,
                "iters": self.records.iters,
                "lr": self.records.lr,
                "recommendation": self.recommendation,
                "front": self.front,
                "cost": self.cost,
                "consistency": self.consistency,
                "per_iteration": self.per_iteration,
            }
        )


def _front(space: PatternSpace, rec: PairRecords, k: int) -> list[dict]:
    got = best_per_depth(space, rec.linear[k - 1], rec.gram[k - 1])
    rows = [
        {
            "stages": 1,
            "best": "jc",
            "stages_text": "{" + ",".join(str(b + 1) for b in range(space.n_blocks)) + "}",
            "estimate": 0.0,
            "one_step": 0.0,
            "runner_up": None,
            "runner_up_estimate": math.nan,
            "margin": math.nan,
            "on_front": True,
        }
    ]
    lowest = 0.0
    for d, (b, v, r, rv) in sorted(got.items()):
        if d == 1:
            continue  # JC, the only one-stage pattern
        row = {
            "stages": d,
            "best": space.name(b),
            "stages_text": space.stages_text(b) or space.name(b),
            "estimate": v,
            "one_step": float(rec.one_step(space.rows([b]), k)[0]),
            "runner_up": space.name(r) if r >= 0 else None,
            "runner_up_estimate": rv,
            "margin": rv - v if r >= 0 else math.nan,
            "on_front": bool(v < lowest),
        }
        lowest = min(lowest, v)
        rows.append(row)
    return rows


def _row_name(n_blocks: int, row: np.ndarray) -> str:
    """A pattern row's spelling: ``jc``, ``gs:ORDER`` or its pairs ``i<-j,...`` (1-based)."""
    from crosscurv.theory.pattern_spaces import pair_list
    from crosscurv.theory.patterns import DelayPattern

    pairs = pair_list(n_blocks)
    pat = DelayPattern(n_blocks, frozenset(pairs[p] for p in np.flatnonzero(row)), "pairs")
    if pat.is_jacobi:
        return "jc"
    if pat.is_full_gs():
        return "gs:" + ",".join(str(b + 1) for b in pat.order())
    return ",".join(f"{i + 1}<-{j + 1}" for i, j in sorted(pat.pairs))


def local_descent(
    n_blocks: int, linear: np.ndarray, gram: np.ndarray, start: np.ndarray, max_stages: int
):
    """Steepest descent over acyclic patterns with at most ``max_stages`` sequential stages, one
    pair added or removed per move, from the pattern row ``start`` (``bool (P,)``).

    Adding pair ``p`` to ``s`` changes the prediction by ``l_p + (Q s)_p + 1/2 Q_pp``, removing it
    by ``-l_p - (Q s)_p + 1/2 Q_pp``; the move with the lowest change is taken while it lowers the
    prediction. Guarantee: the result is predicted no worse than ``start`` and no single-pair move
    within the budget improves it (a local minimum); not the global minimum over the ``7.8 x 10^11``
    patterns of 8 blocks.

    Returns:
        ``(row, value, runner_up row, runner_up value, moves)``: the runner-up is the best neighbour
        (one pair away) within the budget.
    """
    from crosscurv.theory.pattern_spaces import depth_of

    P = linear.shape[0]
    s = np.asarray(start, dtype=bool).copy()
    diag = np.diag(gram)
    moves = 0
    while True:
        qs = gram @ s.astype(np.float64)
        delta = np.where(s, -linear - qs + 0.5 * diag, linear + qs + 0.5 * diag)
        cand = np.tile(s, (P, 1))
        cand[np.arange(P), np.arange(P)] ^= True
        ok = depth_of(n_blocks, cand) <= max_stages
        delta = np.where(ok, delta, np.inf)
        p = int(np.argmin(delta))
        if delta[p] < 0 and np.isfinite(delta[p]):
            s = cand[p]
            moves += 1
            continue
        exact = predict(np.vstack([s, cand[p]]), linear, gram)
        if not np.isfinite(delta[p]):
            return s, float(exact[0]), None, math.nan, moves
        return s, float(exact[0]), cand[p], float(exact[1]), moves


def _local_front(front: list[dict], space: PatternSpace, rec: PairRecords, k: int) -> None:
    """Replace each budget's stage arrangement by the local minimum over acyclic patterns reached
    from it."""
    from crosscurv.theory.pattern_spaces import pair_list
    from crosscurv.theory.patterns import as_pattern

    pl = pair_list(space.n_blocks)
    lowest = 0.0
    for r in front:
        if r["stages"] == 1:
            continue
        start = np.array([p in as_pattern(r["best"], space.n_blocks).pairs for p in pl])
        row, v, ru, rv, moves = local_descent(
            space.n_blocks, rec.linear[k - 1], rec.gram[k - 1], start, r["stages"]
        )
        r.update(
            start=r["best"],
            start_estimate=r["estimate"],
            moves=moves,
            best=_row_name(space.n_blocks, row) if moves else r["best"],
            estimate=v,
            one_step=float(rec.one_step(row[None, :], k)[0]),
            runner_up=_row_name(space.n_blocks, ru) if ru is not None else None,
            runner_up_estimate=rv,
            margin=rv - v if ru is not None else math.nan,
            on_front=bool(v < lowest),
        )
        if moves:
            r["stages_text"] = r["best"]
        lowest = min(lowest, v)


def _gate_note(adv, lr: float) -> str:
    """The certification run's regime warnings (the one-step check at ``theta^0``, the edge of
    stability), which hold for the whole front: outside them no budget is certified."""
    from .advice_run import inside_regime as _inside
    from .advice_text import check_note as _check_note
    from .advice_text import edge_note as _edge_note

    rows = adv.per_iteration
    edge = _edge_note(rows, _inside(rows, lr), lr) if rows else ""
    return _check_note(adv.one_step_checks) + edge


def rankable(row: dict) -> bool | None:
    """Whether a front row's choice stands out from its runner-up: ``False`` when the predicted
    margin is within the sum of their embedded errors (the search cannot rank the two), ``True``
    when it exceeds it, ``None`` without errors or runner-up."""
    m, e, f = row.get("margin"), row.get("error"), row.get("runner_up_error")
    if row.get("runner_up") is None or not all(
        isinstance(x, float) and math.isfinite(x) for x in (m, e, f)
    ):
        return None
    return bool(m > e + f)


def _certify(task, lr, iters, front, records, space, hvp_method, seed):
    """Advise the front's patterns and their runners-up as candidates; fill errors, ``certified``
    and the consistency of the per-pair sums with :func:`crosscurv.numeric.advice.advise`'s
    estimates."""
    from crosscurv.theory.pattern_spaces import pair_list
    from crosscurv.theory.patterns import as_pattern

    from .advice import advise, decide
    from .advice_run import inside_regime as _inside
    from .advice_text import check_failures as _check_failures

    names = ["jc"]
    for r in front:
        for n in (r["best"], r["runner_up"]):
            if n is not None and n not in names and r["on_front"]:
                names.append(n)
    adv = advise(task, lr, iters, names, hvp_method=hvp_method, seed=seed)
    last = adv.per_iteration[-1] if adv.per_iteration else None
    gate = (
        (not _check_failures(adv.one_step_checks)) and bool(_inside(adv.per_iteration, lr)[-1])
        if last
        else False
    )
    for r in front:
        r["error"] = last["errors"].get(r["best"], math.nan) if last else math.nan
        ru = r["runner_up"]
        r["runner_up_error"] = last["errors"].get(ru, math.nan) if last and ru else math.nan
        if last and r["best"] in last["estimates"] and ru in (last["estimates"] if ru else {}):
            d = decide(
                {n: last["estimates"][n] for n in (r["best"], ru)},
                {n: last["errors"][n] for n in (r["best"], ru)},
            )
            r["certified"] = bool(d["certified"] and d["best"] == r["best"] and gate)
        else:
            r["certified"] = None
    worst, scale = 0.0, 0.0
    pl = pair_list(space.n_blocks)
    for n in names[1:]:
        pat = as_pattern(n, space.n_blocks, list(task.block_names))
        row = np.array([[p in pat.pairs for p in pl]])
        for it in adv.per_iteration:
            a, b = it["estimates"][n], float(records.predict(row, it["k"])[0])
            if math.isfinite(a) and math.isfinite(b):
                worst, scale = max(worst, abs(a - b)), max(scale, abs(a))
    return adv, {"max_abs_difference": worst, "max_abs_estimate": scale, "candidates": names}


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
) -> SearchResult:
    """Search ``space`` (``orders``, ``stages[:D]``, ``all`` or a :class:`PatternSpace`) for the
    best pattern per number of sequential stages at ``K = iters`` from one JC run (module
    docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task` with at least 2 blocks; ``task.params`` is
        ``theta^0``.
        lr: ``eta > 0``; iters: ``K >= 1``.
        certify: advise the front's patterns and runners-up again for errors and certificates.
        hvp_method, seed: as :func:`crosscurv.numeric.advice.advise` (used by the certification
        run).
        progress: ``progress(k, K)`` after each JC iteration.
        out_dir: a folder for :meth:`SearchResult.save` and the JC run's state
            (``pair_state.pt``, :func:`crosscurv.numeric.pair_records.pair_run`; ``None``: in
            memory only).
        resume: continue the JC run saved in ``out_dir`` (killed, or run to a smaller ``K``) up
            to ``iters`` instead of starting over; the result is that of an uninterrupted run.
        checkpoint_every: iterations between saved states (default: at most one a minute).

    Raises:
        SpaceError: a malformed space or one too large to enumerate; InputError: bad ``lr`` /
        ``iters``.
    """
    from .advice_cost import plain_seconds
    from .protocol_checks import check_iters, check_lr

    lr, iters = check_lr(lr), check_iters(iters)
    t = time.process_time()
    sp = space if isinstance(space, PatternSpace) else parse_space(space, task.n_blocks)
    space_s = time.process_time() - t  # building the space from its spelling
    t = time.process_time()
    state = None
    if out_dir is not None:
        import os

        from .pair_records import STATE_FILE

        os.makedirs(out_dir, exist_ok=True)
        state = os.path.join(out_dir, STATE_FILE)
    elif resume:
        from crosscurv.theory.errors import AdviceError

        raise AdviceError("resume needs an output directory")
    rec = pair_run(task, lr, iters, progress=progress, state_path=state, resume=resume,
                   checkpoint_every=checkpoint_every)
    pair_s = time.process_time() - t
    K = rec.iters
    t = time.process_time()
    front = _front(sp, rec, K) if K else []
    if sp.kind == LOCAL and front:
        _local_front(front, sp, rec, K)
    eval_s = time.process_time() - t
    members = {}
    from crosscurv.theory.pattern_spaces import pair_list
    from crosscurv.theory.patterns import as_pattern

    pl = pair_list(sp.n_blocks)
    for r in front:
        for n in (r["best"], r["runner_up"]):
            if n is not None and n not in members:
                pat = as_pattern(n, sp.n_blocks)
                members[n] = np.array([p in pat.pairs for p in pl])
    names = list(members)
    per_it = (
        [
            {
                "k": k,
                "loss_jc": float(rec.loss_jc[k - 1]),
                "estimates": dict(
                    zip(names, rec.predict(np.array([members[n] for n in names]), k).tolist())
                ),
            }
            for k in range(1, K + 1)
        ]
        if names
        else []
    )
    timed = [r["best"] for r in front if r["stages"] > 1]
    steps = plain_seconds(
        task, sorted({timed[0], timed[len(timed) // 2], timed[-1]}) if timed else [], lr, 2
    )
    per_step = float(np.mean(list(steps.values()))) if steps else math.nan
    plain_space = per_step * K * len(sp)
    cost = {
        "space_s": space_s,
        "pair_run_s": pair_s,
        "evaluate_s": eval_s,
        "certify_s": 0.0,
        "plain_step_s": steps,
        "plain_pattern_s": per_step * K,
        "plain_space_s": plain_space,
        "ratio_8": (
            (space_s + pair_s + eval_s) / (min(8, len(sp)) * per_step * K) if K else math.nan
        ),
    }
    consistency, adv = None, None
    for r in front:
        r.update(error=math.nan, runner_up_error=math.nan, certified=None)
    if certify and K and rec.status == "complete":
        t = time.process_time()
        adv, consistency = _certify(task, lr, K, front, rec, sp, hvp_method, seed)
        cost["certify_s"] = time.process_time() - t
    for r in front:
        r["rankable"] = rankable(r)
    res = SearchResult(
        sp,
        rec,
        list(task.block_names),
        front,
        per_it,
        cost=cost,
        consistency=consistency,
        certification=adv,
        status=rec.status,
        message=rec.message,
    )
    res.recommendation = _recommendation(res) + (_gate_note(adv, lr) if adv else "")
    if out_dir is not None:
        res.save(out_dir)
    return res


#: :func:`search` under the name ``crosscurv.search_patterns`` (the package's lazy export).
search_patterns = search


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
            f"{r['stages']} stages: {r['best']} ({r['stages_text']}) predicted "
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
            " With two blocks the whole space is three schemes (jc, gs, gs:2,1), about "
            f"{three:.2f} s to "
            f"train: {verdict}. What advise adds is the reason (the cross-curvature terms eta^2 "
            "c_12 and "
            "eta^2 c_21 of Theorem 1, propagated to K) and an error estimate for each prediction."
        )
    elif cost["plain_space_s"] < search_s:
        head += f" Training all {len(sp):,} patterns directly would have been cheaper."
    if res.status == "diverged":  # the divergence and the last finite state first
        from .advice_text import diverged_recommendation

        last = [{"k": K, "loss_jc": float(res.records.loss_jc[K - 1])}]
        return diverged_recommendation(res.message, last, res.front, head)
    if res.status != "complete":
        head = f"the JC run {res.status} ({res.message}); " + head
    return head
