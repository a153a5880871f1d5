"""Spaces of delay patterns (paper, Definition 2) as arrays over the ordered pairs of blocks.

A pattern ``S`` over ``N`` blocks is a 0/1 vector over the ``P = N(N-1)`` ordered pairs ``(i, j), i
!= j`` (:func:`pair_list`, row-major, 0-based): ``s_p = 1`` iff block ``i`` uses the fresh
``theta_j``. Three spaces:

* ``orders``: the ``N!`` full GS orders: ``S = {(i, j) : j before i}``;
* ``stages:D``: the arrangements of the blocks into ``m <= D`` sequential stages (an ordered set
  partition ``B_1, ..., B_m``; blocks of one stage update together from the same state, the stages
  in sequence): ``S = {(i, j) : stage(j) < stage(i)}``.  ``sum_{m <= D} m! S(N, m)`` patterns
  (Fubini numbers: 545,835 for ``N = 8``); ``stages`` is ``stages:N`` and contains every GS order
  (``m = N``) and JC (``m = 1``);
* ``all``: every acyclic pattern (labelled DAGs: 25, 543, 29,281 for ``N = 3, 4, 5``; 7.8 x 10^11
  for ``N = 8``), enumerated for ``N <= 5`` (:data:`MAX_ALL_EXHAUSTIVE`); beyond, the space holds
  the stage arrangements (kind :data:`LOCAL`) and the search descends from them into the acyclic
  patterns.

Each space is a :class:`PatternSpace`: the boolean matrix ``S`` (``n_patterns x P``), the number of
sequential stages of each pattern (``depth``: the longest chain of the dependency graph, in blocks;
the stages a scheme needs, each a parallel update of its blocks) and a name per pattern. Stage
arrangements are built from set partitions (restricted growth strings) times the orders of their
parts, so the 545,835 arrangements of 8 blocks take a fraction of a second.

Importing this module never imports torch.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .errors import SpaceError
from .patterns import DelayPattern

__all__ = [
    "SpaceError",
    "PatternSpace",
    "StageBlock",
    "pair_list",
    "parse_space",
    "orders",
    "stages",
    "all_acyclic",
    "depth_of",
    "MAX_ALL_EXHAUSTIVE",
    "MAX_PATTERNS",
    "DAG_COUNTS",
    "LOCAL",
]

#: ``kind`` of the space ``all`` beyond :data:`MAX_ALL_EXHAUSTIVE` blocks: the stage arrangements,
#: from which the search descends into the acyclic patterns pair by pair
#: (:func:`crosscurv.numeric.pattern_search.search`).
LOCAL = "all (local search)"
#: Most patterns a space is enumerated with (545,835 stage arrangements of 8 blocks fit; 9 blocks'
#: do not).
MAX_PATTERNS = 1_000_000
#: Largest ``N`` for which ``all`` enumerates every acyclic pattern (29,281 for ``N = 5``; 3.8
#: million at 6).
MAX_ALL_EXHAUSTIVE = 5


def pair_list(n_blocks: int) -> list[tuple[int, int]]:
    """The ordered pairs ``(i, j), i != j`` (0-based), row-major: the coordinates of a pattern
    vector."""
    return [(i, j) for i in range(n_blocks) for j in range(n_blocks) if i != j]


@dataclass
class PatternSpace:
    """A set of delay patterns over ``n_blocks`` blocks as pair-indicator rows.

    Attributes:
        kind: ``"orders"``, ``"stages"`` or ``"all"``.
        n_blocks: ``N``.
        max_stages: ``D``, the largest number of sequential stages in the space.
        members: ``bool (n_patterns, P)``; column ``p`` is pair ``pair_list(N)[p]``.
        depth: ``int (n_patterns,)``: sequential stages of each pattern (JC: 1).
        stage_of: ``int8 (n_patterns, N)``: each block's stage (0-based) for ``orders`` /
            ``stages``, else ``None``.
        blocks: for ``orders`` / ``stages``, how the rows are built (:class:`StageBlock`, one per
            number of stages ``m``), else ``None``; used by :meth:`pair_sums`.
    """

    kind: str
    n_blocks: int
    max_stages: int
    _members: np.ndarray | None
    depth: np.ndarray
    _stage_of: np.ndarray | None = None
    blocks: list | None = None

    def __len__(self) -> int:
        return int(self.depth.shape[0])

    @property
    def stage_of(self) -> np.ndarray | None:
        """``int8 (n_patterns, N)`` or ``None`` (attribute above), built from ``blocks`` on first
        use."""
        if self._stage_of is None and self.blocks is not None:
            self._stage_of = np.concatenate(
                [b.part_stage[:, b.rgs].reshape(-1, self.n_blocks) for b in self.blocks]
            )
        return self._stage_of

    def stages_of(self, index: np.ndarray) -> np.ndarray:
        """``stage_of[index]`` without building ``stage_of`` (``int8 (len(index), N)``)."""
        index = np.asarray(index, dtype=np.int64)
        if self._stage_of is not None or self.blocks is None:
            return self.stage_of[index]
        offsets = np.array([b.offset for b in self.blocks])
        which = np.searchsorted(offsets, index, side="right") - 1
        out = np.empty((len(index), self.n_blocks), dtype=np.int8)
        for t, (r, w) in enumerate(zip(index, which)):
            b = self.blocks[w]
            a, c = divmod(int(r) - b.offset, b.rgs.shape[0])
            out[t] = b.part_stage[a][b.rgs[c]]
        return out

    @property
    def members(self) -> np.ndarray:
        """``bool (n_patterns, P)``, built from ``stage_of`` on first use for ``orders`` /
        ``stages`` (the search itself reads only the rows it evaluates exactly, :meth:`rows`)."""
        if self._members is None:
            self._members = _stage_rows(self.n_blocks, self.stage_of)
        return self._members

    @property
    def spec(self) -> str:
        """The command-line spelling of the space (``orders``, ``stages:3``, ``all``)."""
        return {"stages": f"stages:{self.max_stages}", LOCAL: "all"}.get(self.kind, self.kind)

    def name(self, r: int) -> str:
        """Pattern ``r`` spelled for :func:`crosscurv.theory.patterns.parse_pattern`: ``jc``,
        ``gs:ORDER`` for a GS order, ``stages:B,B/B/...`` for another stage arrangement, else its
        pairs ``i<-j,...`` (1-based)."""
        pat = self.pattern(r)
        if pat.is_jacobi:
            return "jc"
        if pat.is_full_gs():
            return "gs:" + ",".join(str(b + 1) for b in pat.order())
        if self._stage_of is not None or self.blocks is not None:
            st = self.stages_of([r])[0]
            return "stages:" + "/".join(
                ",".join(str(b + 1) for b in range(self.n_blocks) if st[b] == s)
                for s in range(int(st.max()) + 1)
            )
        return ",".join(f"{i + 1}<-{j + 1}" for i, j in sorted(pat.pairs))

    def stages_text(self, r: int) -> str:
        """The stages of pattern ``r`` in sequence, e.g. ``{1,2} > {3} > {4}`` (1-based;
        ``orders``/``stages``)."""
        if self._stage_of is None and self.blocks is None:
            return ""
        st = self.stages_of([r])[0]
        return " > ".join(
            "{" + ",".join(str(b + 1) for b in range(self.n_blocks) if st[b] == s) + "}"
            for s in range(int(st.max()) + 1)
        )

    def pair_sums(self, weights: np.ndarray) -> np.ndarray | None:
        """``members @ weights`` (``float64 (n_patterns, F)``, a transposed view, for ``weights``
        ``(P, F)``) without building ``members``: for ``orders`` / ``stages`` (``None`` for other
        spaces).

        A stage arrangement with parts ``A_1..A_m`` (a set partition) whose part ``x`` runs in stage
        ``pi(x)`` holds the pairs ``(i, j), i in A_x, j in A_y`` with ``pi(y) < pi(x)``, so ``s . w
        = sum_{x, y : pi(y) < pi(x)} W_xy`` with ``W_xy = sum_{i in A_x, j in A_y} w_ij``: one ``m x
        m`` reduction of ``w`` per set partition, then one product with the ``m!`` orders of the
        parts. Cost ``O(F (sum_m m! m^2 S(N, m) + N^2 m S(N, m)))`` instead of ``O(F n_patterns
        P)``; each value is a sum of the same terms as the row product, rounded differently (within
        ``2 P eps sum_p |w_p|``).
        """
        if self.blocks is None:
            return None
        w = np.asarray(weights, dtype=np.float64)
        F = w.shape[1]
        out = np.empty((F, len(self)))
        for blk in self.blocks:
            m, nr, na = blk.m, blk.rgs.shape[0], blk.part_stage.shape[0]
            cell, order = blk.cells(), blk.orders()  # (nr, P) cell x * m + y; (m!, m * m)
            part = np.empty((F, nr * m * m))
            for f in range(F):  # W_xy per set partition: the pairs' weights summed by cell
                part[f] = np.bincount(
                    cell.ravel(), weights=np.broadcast_to(w[:, f], cell.shape).ravel(),
                    minlength=nr * m * m,
                )
            vals = order @ part.reshape(F * nr, m * m).T  # (m!, F * nr)
            view = out[:, blk.offset : blk.offset + na * nr].reshape(F, na, nr)
            view[...] = vals.reshape(na, F, nr).transpose(1, 0, 2)
        return out.T

    def rows(self, index: np.ndarray) -> np.ndarray:
        """The pattern rows ``members[index]`` (``bool (len(index), P)``)."""
        index = np.asarray(index, dtype=np.int64)
        if self._members is None:
            return _stage_rows(self.n_blocks, self.stages_of(index))
        return self._members[index]

    def pattern(self, r: int) -> DelayPattern:
        """Pattern ``r`` as a :class:`DelayPattern`."""
        pairs = pair_list(self.n_blocks)
        row = self.rows(np.array([r]))[0]
        chosen = frozenset(pairs[p] for p in np.flatnonzero(row))
        return DelayPattern(self.n_blocks, chosen, "pairs")


@dataclass
class StageBlock:
    """The rows ``offset .. offset + m! * S - 1`` of a stage space: the ``S`` set partitions into
    ``m`` parts (``rgs``, ``int8 (S, N)``: each block's part) times the ``m!`` stage assignments of
    the parts (``part_stage``, ``int8 (m!, m)``: each part's stage); row ``offset + a * S + b``
    gives block ``i`` the stage ``part_stage[a, rgs[b, i]]``."""

    m: int
    offset: int
    part_stage: np.ndarray
    rgs: np.ndarray

    def cells(self) -> np.ndarray:
        """``int64 (S, P)``: for set partition ``b`` and pair ``(i, j)``, the flat cell ``b m^2 +
        rgs[b, i] m + rgs[b, j]`` of the part pair it falls in."""
        if getattr(self, "_cells", None) is None:
            pl = pair_list(self.rgs.shape[1])
            ii = np.array([i for i, _ in pl], dtype=np.int64)
            jj = np.array([j for _, j in pl], dtype=np.int64)
            r = self.rgs.astype(np.int64)
            base = np.arange(r.shape[0], dtype=np.int64)[:, None] * self.m * self.m
            self._cells = base + r[:, ii] * self.m + r[:, jj]
        return self._cells

    def orders(self) -> np.ndarray:
        """``float64 (m!, m^2)``: 1 where part ``y`` runs in an earlier stage than part ``x`` (flat
        ``x m + y``)."""
        if getattr(self, "_orders", None) is None:
            ps = self.part_stage
            self._orders = (ps[:, None, :] < ps[:, :, None]).reshape(len(ps), -1).astype(float)
        return self._orders


def _stage_rows(n: int, st: np.ndarray) -> np.ndarray:
    """Pattern rows of stage assignments ``st`` (``(rows, N)``): pair ``(i, j)`` iff ``st[j] <
    st[i]``."""
    pairs = pair_list(n)
    ii = np.array([i for i, _ in pairs], dtype=np.int64)
    jj = np.array([j for _, j in pairs], dtype=np.int64)
    return st[:, jj] < st[:, ii]


def _from_stages(kind: str, n: int, d: int, st, blocks: list) -> PatternSpace:
    """A stage space whose rows (``members``, and ``stage_of`` when ``st`` is ``None``) are built on
    first use; depth ``m`` per block."""
    depth = np.concatenate(
        [np.full(len(b.part_stage) * len(b.rgs), b.m, dtype=np.int64) for b in blocks]
    )
    return PatternSpace(kind, n, d, None, depth, st, blocks)


def orders(n_blocks: int) -> PatternSpace:
    """Every full GS order (``N!`` patterns, ``N`` stages each), in lexicographic order of the
    sequence."""
    n = _check_n(n_blocks)
    _check_count("orders", math.factorial(n))
    perms = _permutations(n)
    st = np.empty_like(perms)
    st[np.arange(len(perms))[:, None], perms] = np.arange(n, dtype=np.int8)[None, :]
    one = StageBlock(n, 0, st, np.arange(n, dtype=np.int8)[None, :])  # parts = single blocks
    return _from_stages("orders", n, n, st, [one])


def _permutations(m: int) -> np.ndarray:
    """``int8 (m!, m)``: every permutation of ``0..m-1`` in lexicographic order (as
    ``itertools.permutations``): the first entry ``v`` ascending, then the permutations of the rest,
    ``q + (q >= v)`` for ``q`` those of ``0..m-2``."""
    out = np.zeros((1, 0), dtype=np.int8)
    for size in range(1, m + 1):
        out = np.concatenate(
            [np.column_stack([np.full(len(out), v, dtype=np.int8), out + (out >= v)])
             for v in range(size)]
        ).astype(np.int8)
    return out


def _set_partitions(n: int) -> list[np.ndarray]:
    """Restricted growth strings of length ``n`` (lexicographic order) grouped by their number of
    parts ``m`` (index ``m - 1``): each string extended by every value from 0 to its maximum + 1.
    """
    rgs = np.zeros((1, 1), dtype=np.int8)
    top = np.zeros(1, dtype=np.int64)
    for _ in range(n - 1):
        reps = top + 2
        start = np.repeat(np.cumsum(reps) - reps, reps)
        value = (np.arange(int(reps.sum())) - start).astype(np.int8)
        rgs = np.column_stack([np.repeat(rgs, reps, axis=0), value])
        top = np.maximum(np.repeat(top, reps), value)
    return [rgs[top == m - 1].reshape(-1, n) for m in range(1, n + 1)]


def stages(n_blocks: int, max_stages: int | None = None) -> PatternSpace:
    """Every arrangement of the blocks into at most ``max_stages`` sequential stages (default
    ``N``).

    Ordered set partitions: each set partition into ``m`` parts times the ``m!`` orders of its
    parts.
    """
    n = _check_n(n_blocks)
    d = n if max_stages is None else int(max_stages)
    if not 1 <= d:
        raise SpaceError(f"the number of stages must be at least 1, got {d}")
    d = min(d, n)
    _check_count(f"stages:{d}", sum(math.factorial(m) * _stirling2(n, m) for m in range(1, d + 1)))
    blocks, at = [], 0
    for m, rgs in enumerate(_set_partitions(n)[:d], start=1):
        perms = _permutations(m)
        blocks.append(StageBlock(m, at, perms, rgs))  # rows: stage perms[a, rgs[b, i]] of block i
        at += len(perms) * len(rgs)
    return _from_stages("stages", n, d, None, blocks)


def depth_of(n_blocks: int, members: np.ndarray) -> np.ndarray:
    """Sequential stages of each pattern row: the longest chain of its dependency graph, in blocks;
    ``N + 1`` for a row with a cycle (not a pattern)."""
    pairs = pair_list(n_blocks)
    level = np.ones((members.shape[0], n_blocks), dtype=np.int64)
    for _ in range(
        n_blocks
    ):  # longest paths: N - 1 rounds settle every chain, a cycle keeps growing
        for p, (i, j) in enumerate(pairs):
            np.maximum(level[:, i], np.where(members[:, p], level[:, j] + 1, 1), out=level[:, i])
    return np.minimum(level.max(axis=1), n_blocks + 1)


def all_acyclic(n_blocks: int) -> PatternSpace:
    """Every acyclic pattern over ``N <= MAX_ALL_EXHAUSTIVE`` blocks: the subsets of every GS
    order's pairs, each kept once (JC first)."""
    n = _check_n(n_blocks)
    if n > MAX_ALL_EXHAUSTIVE:
        raise SpaceError(
            f"'all' enumerates the acyclic patterns for N <= {MAX_ALL_EXHAUSTIVE} blocks; the task "
            f"has {n} (search 'stages' or 'orders')"
        )
    pairs = pair_list(n)
    col = {p: c for c, p in enumerate(pairs)}
    half = n * (n - 1) // 2
    sub = ((np.arange(2**half)[:, None] >> np.arange(half)[None, :]) & 1).astype(bool)
    codes = set()
    weights = 1 << np.arange(len(pairs), dtype=np.int64)
    for o in itertools.permutations(range(n)):
        cols = np.array([col[(o[b], o[a])] for b in range(n) for a in range(b)], dtype=np.int64)
        codes.update((sub.astype(np.int64) * weights[cols][None, :]).sum(axis=1).tolist())
    code = np.array(sorted(codes), dtype=np.int64)
    members = ((code[:, None] >> np.arange(len(pairs))[None, :]) & 1).astype(bool)
    return PatternSpace("all", n, n, members, depth_of(n, members))


#: Labelled DAGs on ``N`` nodes (OEIS A003024): the size of ``all``.
DAG_COUNTS = (
    1,
    1,
    3,
    25,
    543,
    29281,
    3781503,
    1138779265,
    783702329343,
    1213442454842881,
    4175098976430598143,
)


def parse_space(spec: str, n_blocks: int) -> PatternSpace:
    """``orders``, ``stages`` / ``stages:D`` or ``all`` as a :class:`PatternSpace` over ``n_blocks``
    blocks.

    Raises:
        SpaceError: an unknown space, a bad ``D``, or ``all`` beyond :data:`MAX_ALL_EXHAUSTIVE`
        blocks.
    """
    s = (spec or "").strip().lower()
    kind, sep, rest = s.partition(":")
    if kind == "orders" and not sep:
        return orders(n_blocks)
    if kind == "all" and not sep:
        if n_blocks > MAX_ALL_EXHAUSTIVE:
            space = stages(n_blocks)
            space.kind = LOCAL
            return space
        return all_acyclic(n_blocks)
    if kind == "stages":
        if not sep:
            return stages(n_blocks)
        try:
            d = int(rest)
        except ValueError:
            raise SpaceError(f"stages:D needs an integer D >= 1, got {rest!r}") from None
        if d < 1:
            raise SpaceError(f"stages:D needs an integer D >= 1, got {d}")
        return stages(n_blocks, d)
    raise SpaceError(f"unknown search space {spec!r} (use orders, stages, stages:D or all)")


def _check_n(n: int) -> int:
    if not isinstance(n, int) or n < 2:
        raise SpaceError(f"a pattern search needs at least 2 blocks, got {n}")
    return n


def _check_count(kind: str, count: int) -> None:
    if count > MAX_PATTERNS:
        raise SpaceError(
            f"the space {kind} holds {count:,} patterns, more than the {MAX_PATTERNS:,} enumerated "
            "(use stages:D with a smaller D, or fewer blocks)"
        )


def _stirling2(n: int, m: int) -> int:
    """Stirling number of the second kind ``S(n, m)``."""
    return sum((-1) ** (m - i) * math.comb(m, i) * i**n for i in range(m + 1)) // math.factorial(m)
