"""Properties: S = {} is JC exactly; acyclic patterns are executable in their order; cycles are
rejected.

* ``S = {}`` reproduces JC *exactly* (bit for bit, not to a tolerance): the exact step is ``theta -
  eta g``; the one-step gap, ``C_S`` and theory's coefficients are exactly 0; the controlled
  protocol's gap and all three estimates are exactly 0 at every iteration.
* Every acyclic pattern's update order respects its pairs (block ``j`` comes before block ``i`` for
  each ``(i, j)``), and the exact step does not depend on which valid order executes it: an
  independent sweep in a *different* random topological order, each block's gradient evaluated at
  the state where exactly its fresh blocks are new (docs/design.md), gives the same step.
* Every pair set containing a cycle is rejected with a :class:`PatternError` naming a cycle, through
  :class:`DelayPattern`, :func:`from_pairs` and the command-line syntax ``i<-j,...`` of
  :func:`parse_pattern`.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from crosscurv.experiments.problems import dense_derivatives
from crosscurv.numeric.curvature import cross_curvature_table
from crosscurv.numeric.hvp import grad
from crosscurv.numeric.one_step import one_step_gap
from crosscurv.numeric.protocol import run_protocol
from crosscurv.numeric.steps import scheme_step
from tests.properties.strategies import (acyclic_patterns, cyclic_pair_sets, examples,
                                         problem_specs, seeds)
from crosscurv.theory.one_step import gap_coefficients
from crosscurv.theory.patterns import DelayPattern, PatternError, from_pairs, jacobi, parse_pattern


@examples()
@given(spec=problem_specs(), k=st.integers(0, 5))
def test_empty_pattern_is_jacobi_exactly(spec, k):
    problem = spec.build()
    task = problem.task
    n = task.n_blocks
    jc = jacobi(n)
    eta = problem.eta0(1.0 / 16) * 2.0**-k
    _, g = grad(task.loss, task.params)
    step = scheme_step(task, task.params, jc, eta)
    for name, value in task.params.items():
        assert torch.equal(step[name], value - eta * g[name]), name
    assert one_step_gap(task, task.params, jc, eta) == 0.0
    assert cross_curvature_table(task).C_S(jc) == 0.0
    gd, H, T = dense_derivatives(task)
    assert gap_coefficients(jc, task.block_sizes(), gd, H, T) == {2: 0.0, 3: 0.0}
    records = run_protocol(task, jc, eta, 3, hvp_method="reverse").records
    for rec in records:
        for key in ("gap", "recursive", "cumulative", "jc_only"):
            assert rec[key] == 0.0, (key, rec)
        assert rec["loss_s"] == rec["loss_jc"], rec


def _reference_step(task, params, pattern, eta, order):
    """Definition 2 executed literally, blocks visited in ``order``."""
    keys = [list(task.blocks[b]) for b in task.block_names]
    new = {}
    for i in order:
        state = dict(params)
        for j in pattern.fresh(i):
            for name in keys[j]:
                state[name] = new[name]
        _, g = grad(task.loss, state)
        for name in keys[i]:
            new[name] = params[name] - eta * g[name]
    return new


def _topological_orders(pattern: DelayPattern, rnd: random.Random) -> list[int]:
    """A random order of the blocks with every ``j`` before every ``i`` for ``(i, j)`` in ``S``."""
    done, order = set(), []
    while len(order) < pattern.n_blocks:
        ready = [b for b in range(pattern.n_blocks) if b not in done and set(pattern.fresh(b))
                 <= done]
        b = rnd.choice(ready)
        done.add(b)
        order.append(b)
    return order


@examples()
@given(spec=problem_specs(), data=st.data(), seed=seeds)
def test_acyclic_pattern_order_respects_pairs_and_fixes_the_step(spec, data, seed):
    problem = spec.build()
    task = problem.task
    pattern = data.draw(acyclic_patterns(task.n_blocks, nonempty=False), label="pattern")
    order = pattern.order()
    assert sorted(order) == list(range(task.n_blocks))
    position = {b: t for t, b in enumerate(order)}
    for i, j in pattern.pairs:
        assert position[j] < position[i], (pattern.describe(), order)
    eta = problem.eta0(1.0 / 16)
    step = scheme_step(task, task.params, pattern, eta)
    other = _topological_orders(pattern, random.Random(seed))
    ref = _reference_step(task, task.params, pattern, eta, other)
    for name in task.params:
        torch.testing.assert_close(step[name], ref[name], rtol=1e-13, atol=1e-15)


@examples()
@given(n=st.integers(2, 6), data=st.data())
def test_every_cyclic_pattern_is_rejected(n, data):
    pairs, cycle = data.draw(cyclic_pair_sets(n), label="pairs")
    with pytest.raises(PatternError, match="cycle"):
        DelayPattern(n, pairs)
    with pytest.raises(PatternError, match="cycle"):
        from_pairs(n, pairs)
    spec = ",".join(f"{i + 1}<-{j + 1}" for i, j in sorted(pairs))
    with pytest.raises(PatternError, match="cycle") as info:
        parse_pattern(spec, n)
    # the message names pairs that really form a cycle: every named pair is in the set
    named = info.value.args[0].split(":", 1)[1]
    edges = [tuple(int(t) - 1 for t in item.strip().split("<-")) for item in named.split(",")]
    assert all(e in pairs for e in edges), (named, sorted(pairs))
    # ... and close a cycle: every block named appears once as user and once as source
    assert sorted(i for i, _ in edges) == sorted(j for _, j in edges), named
    assert len({i for i, _ in edges}) == len(edges) >= 2, named
