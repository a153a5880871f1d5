"""crosscurv.theory.patterns: constructors, update order, mask, and rejection of malformed patterns.
"""

from __future__ import annotations

import itertools

import pytest

from crosscurv.theory.errors import InputError
from crosscurv.theory.patterns import (as_pattern, DelayPattern, PatternError, chain, from_pairs,
                                       gauss_seidel, jacobi, parse_pattern, partial, staged)


def _respects(p: DelayPattern, order) -> bool:
    pos = {b: r for r, b in enumerate(order)}
    return all(pos[j] < pos[i] for i, j in p.pairs)


# -- constructors -------------------------------------------------------------
def test_jacobi_is_empty():
    p = jacobi(3)
    assert p.pairs == frozenset() and p.is_jacobi and p.name == "jc"
    assert p.mask() == [[False] * 3 for _ in range(3)]
    assert p.describe() == "{}"
    assert not p.is_full_gs()


def test_gauss_seidel_index_order_is_strict_lower_triangle():
    p = gauss_seidel(3)
    assert p.pairs == {(1, 0), (2, 0), (2, 1)}  # paper: S = {(2,1), (3,1), (3,2)}
    assert p.order() == (0, 1, 2)
    assert p.mask() == [[False, False, False], [True, False, False], [True, True, False]]
    assert p.is_full_gs() and not p.is_jacobi
    assert p.describe() == "{2<-1, 3<-1, 3<-2}"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_gauss_seidel_every_order(n):
    for order in itertools.permutations(range(n)):
        p = gauss_seidel(n, order)
        assert p.order() == order
        assert p.is_full_gs()
        # exactly one orientation of each unordered pair
        assert {frozenset(pair) for pair in p.pairs} == {frozenset(c)
            for c in itertools.combinations(range(n), 2)}
        pos = {b: r for r, b in enumerate(order)}
        assert all(pos[j] < pos[i] for i, j in p.pairs)


def test_chain_pattern():
    assert chain(3).pairs == {(1, 0), (2, 1)}  # paper: {(2,1), (3,2)}
    p = chain(4, [3, 1, 0, 2])
    assert p.pairs == {(1, 3), (0, 1), (2, 0)}
    assert p.order() == (3, 1, 0, 2)
    assert p.name == "chain:4,2,1,3"


def test_partial_pattern_and_its_order():
    p = partial(3, [(1, 0)])  # paper: partial GS {(2,1)}
    assert p.pairs == {(1, 0)} and p.name == "partial"
    assert p.fresh(1) == (0,) and p.fresh(0) == () and p.fresh(2) == ()
    assert _respects(p, p.order())
    q = partial(3, [(0, 2)], order=[2, 0, 1])
    assert q.order() == (2, 0, 1)


def test_from_pairs_zero_and_one_based():
    a = from_pairs(3, [(2, 0), (2, 1)])
    b = from_pairs(3, [(3, 1), (3, 2)], one_based=True)
    assert a.pairs == b.pairs == {(2, 0), (2, 1)}
    assert a.to_dict() == {"name": "pairs", "n_blocks": 3, "pairs": [[3, 1], [3, 2]], "order": [1,
        2, 3]}


@pytest.mark.parametrize("pairs", [[(2, 0), (3, 1), (0, 1)], [(0, 3), (1, 3), (2, 1)], [(3, 2), (2,
    1), (1, 0)]])
def test_order_is_topological(pairs):
    p = from_pairs(4, pairs)
    order = p.order()
    assert sorted(order) == [0, 1, 2, 3]
    assert _respects(p, order)


def test_mask_matches_pairs():
    p = from_pairs(4, [(2, 0), (3, 1), (0, 1)])
    m = p.mask()
    for i in range(4):
        for j in range(4):
            assert m[i][j] == ((i, j) in p)


# -- parse_pattern --------------------------------------------------------------
@pytest.mark.parametrize("spec, pairs, order", [
    ("jc", set(), (0, 1, 2)),
    ("JACOBI", set(), (0, 1, 2)),
    ("gs", {(1, 0), (2, 0), (2, 1)}, (0, 1, 2)),
    ("gs:3,1,2", {(0, 2), (1, 2), (1, 0)}, (2, 0, 1)),
    ("chain", {(1, 0), (2, 1)}, (0, 1, 2)),
    ("chain:3,2,1", {(1, 2), (0, 1)}, (2, 1, 0)),
    ("2<-1", {(1, 0)}, (0, 1, 2)),
    ("3<-1, 3<-2", {(2, 0), (2, 1)}, (0, 1, 2)),
    ("1<-3", {(0, 2)}, None),
])
def test_parse_pattern(spec, pairs, order):
    p = parse_pattern(spec, 3)
    assert p.pairs == pairs
    if order is not None:
        assert p.order() == order
    assert _respects(p, p.order())


def test_parse_pattern_block_names():
    p = parse_pattern("gs:dec,enc", 2, block_names=["enc", "dec"])
    assert p.order() == (1, 0) and p.pairs == {(0, 1)}
    q = parse_pattern("dec<-enc", 2, block_names=["enc", "dec"])
    assert q.pairs == {(1, 0)}


# -- rejection, naming the offending pairs -----------------------------------
@pytest.mark.parametrize("build, needle", [
    (lambda: from_pairs(3, [(1, 1), (2, 2)]), "self pairs are not allowed: 2<-2, 3<-3"),
    (lambda: parse_pattern("1<-1", 3), "self pairs are not allowed: 1<-1"),
    (lambda: from_pairs(3, [(3, 0)]), "outside 1..3: 4<-1"),
    (lambda: parse_pattern("1<-4,5<-1", 3), "outside 1..3: 1<-4, 5<-1"),
    (lambda: from_pairs(3, [(0, 1), (1, 0)]), "cycle through pairs: 1<-2, 2<-1"),
    (lambda: parse_pattern("2<-1,3<-2,1<-3", 3), "cycle through pairs: 1<-3, 2<-1, 3<-2"),
    (lambda: gauss_seidel(3, [0, 0, 1]), "permutation of 1..3, got 1,1,2"),
    (lambda: chain(3, [0, 1]), "permutation of 1..3, got 1,2"),
    (lambda: DelayPattern(3, frozenset({(1, 0)}), preferred_order=(0, 0, 1)),
     "permutation of 1..3"),
    (lambda: partial(3, [(0, 1)]), "not in full GS of order 1,2,3: 1<-2"),
    (lambda: DelayPattern(0), "positive integer"),
    (lambda: parse_pattern("gs:1,1,2", 3), "repeats blocks [1]"),
    (lambda: parse_pattern("gs:1,2", 3), "names 2 blocks, the task has 3"),
    (lambda: parse_pattern("gs:1,2,4", 3), "block 4 is outside 1..3"),
    (lambda: parse_pattern("", 3), "empty pattern"),
    (lambda: parse_pattern("1-2", 3), "unknown pattern '1-2'"),
    (lambda: parse_pattern("1<-x", 3), "unknown block 'x'"),
    (lambda: parse_pattern("2<-1,,3<-1", 3), "pair '' is not of the form i<-j"),
    (lambda: parse_pattern("gs:", 3), "empty block reference"),
])
def test_malformed_patterns_are_rejected_with_the_culprit(build, needle):
    with pytest.raises(PatternError) as exc:
        build()
    assert needle in str(exc.value)
    assert isinstance(exc.value, InputError)
    assert "\n" not in str(exc.value)


def test_cycle_error_names_only_cycle_pairs():
    # 4<-1 is fine; the cycle is 2<-3, 3<-2
    with pytest.raises(PatternError) as exc:
        from_pairs(4, [(3, 0), (1, 2), (2, 1)])
    msg = str(exc.value)
    assert "2<-3" in msg and "3<-2" in msg and "4<-1" not in msg


# -- one coercion: as_pattern ----------------------------------------------------------
def test_as_pattern_takes_a_pattern_or_its_spelling():
    p = gauss_seidel(3, [2, 0, 1])
    assert as_pattern(p, 3) is p
    assert as_pattern("gs:3,1,2", 3) == p
    assert as_pattern("gs:c,a,b", 3, ["a", "b", "c"]) == p
    assert as_pattern("2<-1", 2) == from_pairs(2, [(1, 0)])
    for bad, needle in [(gauss_seidel(3), "is over 3 blocks, the model has 2"), (3, "got int"),
                        (None, "got NoneType"), ("gs:1", "names 1 blocks")]:
        with pytest.raises(PatternError, match=needle):
            as_pattern(bad, 2)


def test_fresh_items_and_groups_by_fresh_set():
    p = from_pairs(4, [(1, 0), (2, 0), (3, 1), (3, 2)])  # 2<-1, 3<-1, 4<-2, 4<-3
    per_block = [["a0"], ["b0", "b1"], ["c0"], ["d0"]]
    assert p.fresh_items(3, per_block) == ["b0", "b1", "c0"]
    assert p.fresh_items(0, per_block) == []
    groups = p.groups_by_fresh_set()
    assert groups == [((), [0]), ((0,), [1, 2]), ((1, 2), [3])]
    assert p.groups_by_fresh_set(include_empty=False) == groups[1:]
    # every group comes after the groups holding its fresh blocks (a valid sweep)
    done = set()
    for fresh, members in groups:
        assert set(fresh) <= done
        done |= set(members)
    assert jacobi(3).groups_by_fresh_set() == [((), [0, 1, 2])]


def test_stages_are_the_sequential_stages_of_a_stage_arrangement_only():
    assert jacobi(3).stages() == ((0, 1, 2),)
    assert gauss_seidel(3, [2, 0, 1]).stages() == ((2,), (0,), (1,))
    assert staged(4, [[1, 3], [0], [2]]).stages() == ((1, 3), (0,), (2,))
    assert from_pairs(3, [(2, 0), (2, 1)]).stages() == ((0, 1), (2,))
    # a block that skips an earlier stage's block, or a chain: no stage arrangement
    assert from_pairs(3, [(2, 0)]).stages() is None
    assert chain(3).stages() is None
    # exhaustively: a pattern has stages exactly when the stage map rebuilds its pairs
    n = 4
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    seen = 0
    for mask in range(1 << len(pairs)):
        chosen = [p for b, p in enumerate(pairs) if mask >> b & 1]
        try:
            pat = from_pairs(n, chosen)
        except PatternError:
            continue
        st = pat.stages()
        if st is not None:
            seen += 1
            assert sorted(b for s in st for b in s) == list(range(n))
            assert staged(n, [list(s) for s in st]).pairs == pat.pairs
    assert seen == 75  # ordered set partitions of 4 blocks (Fubini number)
