"""Delay patterns (paper, Definition 2) shared by ``theory`` and ``numeric``.

A delay pattern ``S`` is a set of pairs ``(i, j)``: block ``i`` evaluates its gradient with the
*fresh* value ``theta_j^{k+1}`` of block ``j`` instead of the old value ``theta_j^k``. ``S`` is
*acyclic* when the blocks can be ordered so that every ``j`` is updated before every ``i`` with
``(i, j) in S``.

Conventions
-----------
* Internally blocks are numbered ``0 .. N-1`` (Python indices).
* The paper and the command line number blocks ``1 .. N``; :func:`parse_pattern`
  reads that notation and :meth:`DelayPattern.describe` writes it.
* ``mask()[i][j]`` is ``True`` iff ``(i, j) in S``; the matrix ``M_S`` of
  Lemma 1 keeps exactly the Hessian blocks ``H_ij`` where the mask is set.

Importing this module never imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from .errors import PatternError

__all__ = ["PatternError", "DelayPattern", "jacobi", "gauss_seidel", "partial", "chain", "staged",
           "from_pairs", "parse_pattern", "as_pattern", "spelling"]


def _fmt_pairs(pairs: Iterable[tuple[int, int]], labels: Sequence[str] | None = None) -> str:
    """Pairs in the paper's 1-based ``i<-j`` notation (``labels[i]`` for ``i + 1`` when given)."""
    if labels is None:
        return ", ".join(f"{i + 1}<-{j + 1}" for i, j in sorted(pairs))
    return ", ".join(f"{labels[i]}<-{labels[j]}" for i, j in sorted(pairs))


@dataclass(frozen=True)
class DelayPattern:
    """An acyclic delay pattern over ``n_blocks`` blocks.

    Attributes:
        n_blocks: number of blocks ``N >= 1``.
        pairs: frozenset of 0-based pairs ``(i, j)``: block ``i`` uses fresh ``j``.
        name: short label (``"jc"``, ``"gs:1,2,3"``, ``"pairs"``...).
        preferred_order: an order (0-based) the pattern was built from, used to
            break ties in :meth:`order`; ``None`` means index order.

    Construction validates: ``n_blocks >= 1``, no self pair, every index in range, no cycle. Each
    failure raises :class:`PatternError` naming the offending pairs.
    """

    n_blocks: int
    pairs: frozenset = field(default_factory=frozenset)
    name: str = "pairs"
    preferred_order: tuple | None = None

    def __post_init__(self) -> None:
        n = self.n_blocks
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise PatternError(f"number of blocks must be a positive integer, got {n!r}")
        pairs = frozenset((int(i), int(j)) for i, j in self.pairs)
        object.__setattr__(self, "pairs", pairs)
        selfp = [p for p in pairs if p[0] == p[1]]
        if selfp:
            raise PatternError(f"self pairs are not allowed: {_fmt_pairs(selfp)}")
        bad = [p for p in pairs if not (0 <= p[0] < n and 0 <= p[1] < n)]
        if bad:
            raise PatternError(
                f"pairs name blocks outside 1..{n}: {_fmt_pairs(bad)}"
            )
        cyc = _find_cycle(n, pairs)
        if cyc:
            raise PatternError(f"pattern has a cycle through pairs: {_fmt_pairs(cyc)}")
        if self.preferred_order is not None:
            order = tuple(int(b) for b in self.preferred_order)
            if sorted(order) != list(range(n)):
                raise PatternError(
                    f"block order must be a permutation of 1..{n}, got "
                    + ",".join(str(b + 1) for b in order)
                )
            object.__setattr__(self, "preferred_order", order)

    # -- queries ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.pairs)

    def __contains__(self, pair: object) -> bool:
        return pair in self.pairs

    @property
    def is_jacobi(self) -> bool:
        """``S`` is empty: every block sees the old state (JC)."""
        return not self.pairs

    def fresh(self, i: int) -> tuple[int, ...]:
        """Blocks ``j`` whose fresh value block ``i`` uses: ``{j : (i, j) in S}``, sorted."""
        return tuple(sorted(j for a, j in self.pairs if a == i))

    def fresh_items(self, i: int, per_block: Sequence[Sequence]) -> list:
        """The items of block ``i``'s fresh blocks: ``per_block[j]`` concatenated over ``j in
        S(i)``.

        ``per_block[j]`` lists what block ``j`` holds (its parameter names in ``numeric``, its
        coordinates in ``theory``); the result is what the restriction ``P_{S(i)}`` keeps, in block
        order.
        """
        return [x for j in self.fresh(i) for x in per_block[j]]

    def groups_by_fresh_set(self, *, include_empty: bool = True) -> list[tuple[tuple[int, ...],
                                                                               list[int]]]:
        """``[(F, members), ...]``: blocks grouped by fresh set ``F = S(i)`` (sorted, 0-based), in
        an order valid for a sweep (groups follow :meth:`order`, placed at their first member);
        ``include_empty`` keeps the group with ``S(i) = {}``. A group shares one gradient in the
        scheme step and one product ``H (P_F v)`` for ``M_S v``.
        """
        groups: dict[tuple[int, ...], list[int]] = {}
        for i in self.order():
            groups.setdefault(self.fresh(i), []).append(i)
        return [(f, m) for f, m in groups.items() if f or include_empty]

    def mask(self) -> list[list[bool]]:
        """``N x N`` boolean mask of ``M_S``: ``mask[i][j] = (i, j) in S``."""
        n = self.n_blocks
        return [[(i, j) in self.pairs for j in range(n)] for i in range(n)]

    def order(self) -> tuple[int, ...]:
        """An update order respecting every pair (topological sort, 0-based).

        Among blocks that are ready, the one earliest in ``preferred_order`` (index order if none)
        is taken, so ``gauss_seidel(n, order)`` returns ``order`` itself.
        """
        n = self.n_blocks
        rank = {b: r for r, b in enumerate(self.preferred_order or range(n))}
        deps = {i: set(self.fresh(i)) for i in range(n)}
        done: list[int] = []
        remaining = set(range(n))
        while remaining:
            ready = [b for b in remaining if deps[b] <= set(done)]
            b = min(ready, key=rank.__getitem__)
            done.append(b)
            remaining.remove(b)
        return tuple(done)

    def stages(self) -> tuple[tuple[int, ...], ...] | None:
        """The blocks of each sequential stage, in sequence (0-based), when the pattern is a stage
        arrangement, ``S = {(i, j) : s(j) < s(i)}`` for a stage map ``s`` (every block uses the
        fresh values of exactly the blocks of earlier stages); ``None`` otherwise."""
        s: dict[int, int] = {}
        for i in self.order():
            s[i] = 1 + max((s[j] for j in self.fresh(i)), default=-1)
        if {(i, j) for i in s for j in s if s[j] < s[i]} != set(self.pairs):
            return None
        return tuple(tuple(b for b in sorted(s) if s[b] == t) for t in range(max(s.values()) + 1))

    def is_full_gs(self) -> bool:
        """Every unordered pair of blocks appears in exactly one orientation."""
        n = self.n_blocks
        return len(self.pairs) == n * (n - 1) // 2

    def describe(self, names: Sequence[str] | None = None) -> str:
        """Paper notation, 1-based: ``S = {2<-1, 3<-1}`` (``{}`` for JC); with the task's block
        ``names``, those in place of the indices where :func:`spelling` can use them
        (``{V<-U}``)."""
        return "{" + _fmt_pairs(self.pairs, _labels(names, self.n_blocks)) + "}"

    def __str__(self) -> str:  # pragma: no cover - convenience
        return f"{self.name} {self.describe()}"

    def to_dict(self) -> dict:
        """JSON-friendly record (1-based pairs, as in the paper)."""
        return {
            "name": self.name,
            "n_blocks": self.n_blocks,
            "pairs": [[i + 1, j + 1] for i, j in sorted(self.pairs)],
            "order": [b + 1 for b in self.order()],
        }

    @classmethod
    def from_dict(cls, record: Mapping) -> "DelayPattern":
        """The pattern of a :meth:`to_dict` record (as a run's ``summary.json`` holds it)."""
        order = record.get("order")
        pairs = frozenset((int(i) - 1, int(j) - 1) for i, j in record["pairs"])
        preferred = tuple(int(b) - 1 for b in order) if order else None
        return cls(int(record["n_blocks"]), pairs, str(record.get("name", "pairs")), preferred)


def _find_cycle(n: int, pairs: frozenset) -> list[tuple[int, int]]:
    """Pairs forming one cycle of the dependency graph ``j -> i``, or ``[]``."""
    succ: dict[int, list[int]] = {b: [] for b in range(n)}
    for i, j in pairs:
        succ[j].append(i)
    color = {b: 0 for b in range(n)}  # 0 new, 1 on stack, 2 done
    parent: dict[int, int] = {}

    for root in range(n):
        if color[root]:
            continue
        stack = [(root, iter(sorted(succ[root])))]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                continue
            if color[nxt] == 0:
                color[nxt] = 1
                parent[nxt] = node
                stack.append((nxt, iter(sorted(succ[nxt]))))
            elif color[nxt] == 1:
                # cycle: nxt -> ... -> node -> nxt ; edges j->i are pairs (i, j)
                cyc = [(nxt, node)]
                cur = node
                while cur != nxt:
                    cyc.append((cur, parent[cur]))
                    cur = parent[cur]
                return cyc
    return []


# -- constructors --------------------------------------------------------
def jacobi(n_blocks: int) -> DelayPattern:
    """JC: ``S = {}`` (every block uses the old state)."""
    return DelayPattern(n_blocks, frozenset(), "jc")


def _check_order(n_blocks: int, order: Sequence[int] | None) -> tuple[int, ...]:
    if order is None:
        return tuple(range(n_blocks))
    order = tuple(int(b) for b in order)
    if sorted(order) != list(range(n_blocks)):
        raise PatternError(
            f"block order must be a permutation of 1..{n_blocks}, got "
            + ",".join(str(b + 1) for b in order)
        )
    return order


def gauss_seidel(n_blocks: int, order: Sequence[int] | None = None) -> DelayPattern:
    """Full GS in ``order`` (0-based; index order by default).

    ``S = {(order[b], order[a]) : a < b}``: every block uses every block updated before it. For
    order ``0..N-1`` this is ``{(i, j) : i > j}`` and ``M_S = L`` (strictly lower block triangle of
    ``H``).
    """
    o = _check_order(n_blocks, order)
    pairs = frozenset((o[b], o[a]) for b in range(len(o)) for a in range(b))
    name = "gs" if o == tuple(range(n_blocks)) else "gs:" + ",".join(str(b + 1) for b in o)
    return DelayPattern(n_blocks, pairs, name, o)


def chain(n_blocks: int, order: Sequence[int] | None = None) -> DelayPattern:
    """Chain pattern: each block uses only its predecessor in ``order``.

    For order ``0..N-1``: ``S = {(1,0), (2,1), ..., (N-1,N-2)}`` (paper's ``{(2,1), (3,2)}`` for ``N
    = 3``).
    """
    o = _check_order(n_blocks, order)
    pairs = frozenset((o[b], o[b - 1]) for b in range(1, len(o)))
    name = "chain" if o == tuple(range(n_blocks)) else "chain:" + ",".join(str(b + 1) for b in o)
    return DelayPattern(n_blocks, pairs, name, o)


def staged(n_blocks: int, stages: Sequence[Sequence[int]]) -> DelayPattern:
    """Blocks arranged into sequential stages (0-based): blocks of one stage update together from
    the same state, each stage after the previous ones: ``S = {(i, j) : stage(j) < stage(i)}``.

    One stage is JC; ``N`` singleton stages are the GS order they spell. Spelled
    ``stages:1,2/3/4,5``.
    """
    flat = [int(b) for st in stages for b in st]
    if sorted(flat) != list(range(n_blocks)) or any(not st for st in stages):
        raise PatternError(f"stages must place each of blocks 1..{n_blocks} exactly once in "
                           "non-empty stages, got "
                           + "/".join(",".join(str(b + 1) for b in st) for st in stages))
    pairs = frozenset((i, j) for a, st in enumerate(stages) for i in st
                      for prev in stages[:a] for j in prev)
    name = "stages:" + "/".join(",".join(str(b + 1) for b in st) for st in stages)
    return DelayPattern(n_blocks, pairs, name, tuple(flat))


def partial(n_blocks: int, pairs: Iterable[tuple[int, int]], order: Sequence[int]
            | None = None) -> DelayPattern:
    """A partial GS pattern: a subset of the full GS pattern of ``order``.

    Raises :class:`PatternError` naming the pairs that full GS in ``order`` does not contain (they
    would use a block updated *later*).
    """
    full = gauss_seidel(n_blocks, order)
    pairs = frozenset((int(i), int(j)) for i, j in pairs)
    probe = DelayPattern(n_blocks, pairs, "partial")  # range/self/cycle checks first
    extra = probe.pairs - full.pairs
    if extra:
        raise PatternError(
            f"pairs not in full GS of order {','.join(str(b + 1) for b in full.order())}: "
            f"{_fmt_pairs(extra)}"
        )
    return DelayPattern(n_blocks, probe.pairs, "partial", full.preferred_order)


def from_pairs(n_blocks: int, pairs: Iterable[tuple[int, int]], *, one_based: bool = False,
               name: str = "pairs") -> DelayPattern:
    """An arbitrary acyclic pattern from explicit pairs (0-based unless ``one_based``)."""
    shift = 1 if one_based else 0
    return DelayPattern(n_blocks, frozenset((int(i) - shift, int(j) - shift) for i, j in pairs),
                        name)


def _parse_block(token: str, n_blocks: int, block_names: Sequence[str] | None,
                 check_range: bool = True) -> int:
    token = token.strip()
    if not token:
        raise PatternError("empty block reference")
    if block_names is not None and token in block_names:
        return list(block_names).index(token)
    try:
        b = int(token)
    except ValueError:
        known = f" (known names: {', '.join(block_names)})" if block_names else ""
        raise PatternError(f"unknown block {token!r}{known}") from None
    if check_range and not 1 <= b <= n_blocks:
        raise PatternError(f"block {b} is outside 1..{n_blocks}")
    return b - 1


def parse_pattern(spec: str, n_blocks: int, block_names: Sequence[str]
                  | None = None) -> DelayPattern:
    """Parse the command-line pattern syntax (1-based, like the paper).

    Accepted forms:
        ``jc`` (also ``jacobi``), ``gs`` (also ``gauss-seidel``) in index order,
        ``gs:ORDER`` with ORDER comma-separated block indices or names,
        ``chain`` / ``chain:ORDER``, ``stages:B,B/B/...`` (blocks in sequential stages, ``/``
        between stages: :func:`staged`), and explicit pairs ``i<-j,...`` meaning
        block ``i`` uses fresh block ``j`` (names allowed in place of indices).

    Raises:
        PatternError: one line naming what is wrong.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise PatternError("empty pattern (use jc, gs, gs:ORDER, chain or i<-j,...)")
    s = spec.strip()
    low = s.lower()
    if low in ("jc", "jacobi"):
        return jacobi(n_blocks)
    kind, sep, rest = s.partition(":")
    if kind.lower() in ("gs", "gauss-seidel", "chain") and "<-" not in s:
        order = None
        if sep:
            toks = rest.split(",")
            order = [_parse_block(t, n_blocks, block_names) for t in toks]
            dup = sorted({b + 1 for b in order if order.count(b) > 1})
            if dup:
                raise PatternError(f"block order repeats blocks {dup}")
            if len(order) != n_blocks:
                raise PatternError(
                    f"block order names {len(order)} blocks, the task has {n_blocks}"
                )
        build = chain if kind.lower() == "chain" else gauss_seidel
        return build(n_blocks, order)
    if kind.lower() == "stages" and sep and "<-" not in s:
        groups = [[_parse_block(t, n_blocks, block_names) for t in grp.split(",")]
                  for grp in rest.split("/")]
        return staged(n_blocks, groups)
    if "<-" in s:
        pairs = []
        for item in s.split(","):
            if "<-" not in item:
                raise PatternError(f"pair {item.strip()!r} is not of the form i<-j")
            a, b = item.split("<-", 1)
            # range is checked by DelayPattern, which names every bad pair
            i = _parse_block(a, n_blocks, block_names, check_range=False)
            j = _parse_block(b, n_blocks, block_names, check_range=False)
            pairs.append((i, j))
        return DelayPattern(n_blocks, frozenset(pairs), "pairs")
    raise PatternError(
        f"unknown pattern {spec!r} (use jc, gs, gs:ORDER, chain, chain:ORDER, stages:B,B/B/... "
        "or i<-j,...)"
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_KEYWORDS = ("jc", "jacobi", "gs", "gauss-seidel", "chain")


def _labels(names: Sequence[str] | None, n_blocks: int) -> list[str] | None:
    """``names`` when :func:`parse_pattern` reads each one back as its block (distinct identifiers
    that are not pattern keywords), else ``None`` (1-based indices)."""
    if names is None:
        return None
    names = [str(x) for x in names]
    if (len(names) != n_blocks or len(set(names)) != n_blocks
        or any(not _NAME.fullmatch(x) or x.lower() in _KEYWORDS for x in names)):
        return None
    return names


def spelling(pattern: DelayPattern, names: Sequence[str] | None = None) -> str:
    """The command-line spelling of ``pattern`` with the task's block ``names`` in place of 1-based
    indices: ``gs:V,U`` for ``gs:2,1``, ``chain:C,B,A``, ``V<-U,W<-V`` for explicit pairs (``jc``,
    ``gs`` and ``chain`` in index order as they are). :func:`parse_pattern` with the same names
    reads it back as ``pattern``. Without usable names (none, numbers, a name that is not an
    identifier), the indices: ``pattern.name``, or the pairs for a pattern named by neither."""
    labels = _labels(names, pattern.n_blocks)
    kind, sep, _ = pattern.name.partition(":")
    if pattern.name in ("jc", "gs", "chain"):
        return pattern.name
    if sep and kind in ("gs", "chain") and pattern.preferred_order is not None:
        if labels is None:
            return pattern.name
        return kind + ":" + ",".join(labels[b] for b in pattern.preferred_order)
    if pattern.is_jacobi:
        return "jc"
    return _fmt_pairs(pattern.pairs, labels).replace(" ", "")


def as_pattern(spec, n_blocks: int, names: Sequence[str] | None = None) -> DelayPattern:
    """The one coercion of a pattern argument: a :class:`DelayPattern` or its command-line spelling.

    Every public function that takes a pattern (``theory``, ``numeric``, the command line) goes
    through here, so each accepts both ``gauss_seidel(3)`` and ``"gs"``, ``"gs:3,1,2"``, ``"2<-1"``
    or block names (:func:`parse_pattern`).

    Args:
        spec: a :class:`DelayPattern` or a pattern spec string.
        n_blocks: the number of blocks ``N`` it must be over.
        names: block names a spec may use in place of 1-based indices.

    Raises:
        PatternError: a malformed spec, a pattern over another number of
            blocks, or neither a pattern nor a string.
    """
    if isinstance(spec, DelayPattern):
        if spec.n_blocks != n_blocks:
            raise PatternError(f"pattern {spec.describe()} is over {spec.n_blocks} blocks, the "
                               f"model has {n_blocks}")
        return spec
    if isinstance(spec, str):
        return parse_pattern(spec, n_blocks, names)
    raise PatternError(
        "expected a DelayPattern or a pattern spec such as 'gs' or '2<-1', got "
        f"{type(spec).__name__}"
    )
