"""The evaluation of a space of delay patterns at ``K``: the best and runner-up per number of
sequential stages, the front, and single-pair descent beyond the enumerated spaces.

Every pattern ``S`` of a :class:`crosscurv.theory.pattern_spaces.PatternSpace` is a 0/1 row ``s``
over the ``P = N(N-1)`` ordered pairs of blocks, and its JC-only prediction at ``k`` is
``s . l^k + 1/2 s^T Q^k s`` (:mod:`crosscurv.numeric.pair_records`).  :func:`best_per_depth`
screens the whole space (float32, or a rank-``R`` bound for the stage spaces) and evaluates again in
float64 every pattern that may be among the two lowest per budget ``D``; :func:`front_rows` turns
that into the front of :class:`crosscurv.numeric.pattern_search.SearchResult`;
:func:`local_descent` / :func:`local_front` continue from the stage arrangements over all acyclic
patterns (``all`` beyond :data:`crosscurv.theory.pattern_spaces.MAX_ALL_EXHAUSTIVE` blocks).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from crosscurv.theory.pattern_spaces import PatternSpace, depth_of, pair_list
from crosscurv.theory.patterns import DelayPattern, as_pattern

from .pair_records import PairRecords, finite_pairs, predict

__all__ = ["best_per_depth", "SCREEN_RANK", "front_rows", "row_name", "local_descent",
           "local_front"]

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
    """Every pattern's prediction to within a bound, from a few pair sums (``orders`` / ``stages``;
    ``None`` for other spaces or beyond float64).

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


def _stage_text(space: PatternSpace, pattern) -> str:
    """:func:`stages_text` of ``pattern``, an index of ``space`` or a name."""
    name = space.name(pattern) if isinstance(pattern, (int, np.integer)) else pattern
    return stages_text(name, space.n_blocks)


def stages_text(name: str, n_blocks: int) -> str:
    """``{1,2} > {3}``: the stages of the pattern ``name`` in sequence (1-based), ``-`` when it is
    no stage arrangement (:meth:`DelayPattern.stages`)."""
    st = as_pattern(name, n_blocks).stages()
    if st is None:
        return "-"
    return " > ".join("{" + ",".join(str(b + 1) for b in stage) + "}" for stage in st)


def front_rows(space: PatternSpace, rec: PairRecords, k: int) -> list[dict]:
    """The front at ``k``: JC (one stage), then per number ``D`` of stages the best and runner-up
    with at most ``D`` stages (:func:`best_per_depth`), ``on_front`` when lower than every row above
    it."""
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
            "stages_text": space.stages_text(b) or _stage_text(space, b),
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


def row_name(n_blocks: int, row: np.ndarray) -> str:
    """A pattern row's spelling: ``jc``, ``gs:ORDER`` or its pairs ``i<-j,...`` (1-based)."""
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


def local_front(front: list[dict], space: PatternSpace, rec: PairRecords, k: int) -> None:
    """Replace each budget's stage arrangement by the local minimum over acyclic patterns reached
    from it."""
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
            best=row_name(space.n_blocks, row) if moves else r["best"],
            estimate=v,
            one_step=float(rec.one_step(row[None, :], k)[0]),
            runner_up=row_name(space.n_blocks, ru) if ru is not None else None,
            runner_up_estimate=rv,
            margin=rv - v if ru is not None else math.nan,
            on_front=bool(v < lowest),
        )
        if moves:
            r["stages_text"] = _stage_text(space, r["best"])
        lowest = min(lowest, v)
