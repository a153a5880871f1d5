"""Spaces of delay patterns: their sizes, members, depths and spellings."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from crosscurv.theory.pattern_spaces import (LOCAL, SpaceError, all_acyclic, depth_of, orders,
                                             pair_list, parse_space, stages)
from crosscurv.theory.patterns import (DelayPattern, PatternError, as_pattern, gauss_seidel,
                                       parse_pattern)


def _fubini(n, d):
    def s2(n, m):
        return sum(
            (-1) ** (m - i) * math.comb(m, i) * i**n for i in range(m + 1)
        ) // math.factorial(m)

    return sum(math.factorial(m) * s2(n, m) for m in range(1, d + 1))


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_sizes(n):
    assert len(orders(n)) == math.factorial(n)
    assert len(stages(n)) == _fubini(n, n)
    assert len(stages(n, 2)) == _fubini(n, 2)
    assert len(all_acyclic(n)) == {2: 3, 3: 25, 4: 543, 5: 29281}[n]


def test_members_are_distinct_acyclic_patterns_with_their_depth():
    for sp in (orders(4), stages(4), all_acyclic(4)):
        rows = {tuple(r) for r in sp.members}
        assert len(rows) == len(sp)
        for r in range(len(sp)):
            pat = sp.pattern(r)  # raises on a cycle
            assert as_pattern(sp.name(r), 4).pairs == pat.pairs
            # depth = longest chain, by brute force over block sequences
            longest = max(
                len(c)
                for L in range(1, 5)
                for c in itertools.permutations(range(4), L)
                if all((c[t + 1], c[t]) in pat.pairs for t in range(L - 1))
            )
            assert sp.depth[r] == longest


def test_orders_are_the_gs_patterns_and_stage_pairs_follow_the_stages():
    sp = orders(3)
    got = {frozenset(sp.pattern(r).pairs) for r in range(len(sp))}
    assert got == {gauss_seidel(3, o).pairs for o in itertools.permutations(range(3))}
    st = stages(4, 2)
    r = next(r for r in range(len(st)) if st.stages_text(r) == "{1,2} > {3,4}")
    assert st.pattern(r).pairs == {(2, 0), (2, 1), (3, 0), (3, 1)}
    assert st.name(r) == "stages:1,2/3,4"
    assert parse_pattern("stages:1,2/3,4", 4).pairs == st.pattern(r).pairs
    assert int(st.depth[r]) == 2
    assert st.name(0) == "jc" and int(st.depth.min()) == 1


def test_depth_of_a_chain_and_pair_list():
    pl = pair_list(3)
    assert len(pl) == 6 and (1, 0) in pl and (0, 0) not in pl
    chain = np.array([[p in {(1, 0), (2, 1)} for p in pl]])
    assert depth_of(3, chain).tolist() == [3]


@pytest.mark.parametrize(
    "spec,msg",
    [
        ("stage", "unknown search space"),
        ("stages:0", "D >= 1"),
        ("stages:x", "integer"),
        ("orders:2", "unknown search space"),
    ],
)
def test_bad_spaces(spec, msg):
    with pytest.raises(SpaceError, match=msg):
        parse_space(spec, 4)


def test_all_beyond_five_blocks_and_too_large_spaces_are_refused():
    with pytest.raises(SpaceError, match="N <= 5"):
        all_acyclic(6)
    assert parse_space("all", 6).kind == LOCAL and parse_space("all", 6).spec == "all"
    with pytest.raises(SpaceError, match="patterns"):
        parse_space("stages", 9)
    assert len(parse_space("stages:2", 9)) == _fubini(9, 2)


def test_staged_spelling_errors():
    with pytest.raises(PatternError, match="exactly once"):
        parse_pattern("stages:1,2/2", 3)
    assert isinstance(parse_pattern("stages:3/1,2", 3), DelayPattern)


@pytest.mark.parametrize("space", [orders(5), stages(5), stages(6, 3), parse_space("all", 6)])
def test_pair_sums_equal_the_rows_times_the_weights(space):
    rng = np.random.default_rng(len(space))
    w = rng.normal(size=(space.n_blocks * (space.n_blocks - 1), 3))
    got = space.pair_sums(w)
    ref = space.members.astype(np.float64) @ w
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    idx = np.array([0, len(space) // 2, len(space) - 1])
    assert (space.rows(idx) == space.members[idx]).all()
    count = np.rint(space.pair_sums(np.ones((w.shape[0], 1)))[:, 0])
    assert (space.members.sum(axis=1) == count).all()


def test_rows_are_built_only_when_asked():
    sp = stages(5)
    assert sp._members is None and len(sp) == 541
    row = sp.rows(np.array([7]))[0]
    assert sp._members is None and as_pattern(sp.name(7), 5).pairs == sp.pattern(7).pairs
    assert (sp.members[7] == row).all() and sp._members is not None
    assert all_acyclic(3).pair_sums(np.ones((6, 1))) is None


def test_permutations_and_set_partitions_are_enumerated_in_lexicographic_order():
    """The row order of orders/stages (names, ties broken by the lower row) is the lexicographic
    order of itertools and of the recursive restricted growth strings."""
    from crosscurv.theory.pattern_spaces import _permutations, _set_partitions, _stirling2

    for m in range(1, 7):
        assert _permutations(m).tolist() == [list(p) for p in itertools.permutations(range(m))]
    for n in range(1, 8):
        groups = _set_partitions(n)
        every = sorted(r for g in groups for r in g.tolist())
        for m, g in enumerate(groups, start=1):
            rows = g.tolist()
            assert rows == sorted(rows) and len(rows) == _stirling2(n, m)
            assert all(max(r) == m - 1 and r[0] == 0 for r in rows)
            assert all(r[i] <= max(r[:i]) + 1 for r in rows for i in range(1, n))
        assert len(every) == len({tuple(r) for r in every})
