"""Hypothesis strategies: problem instances, block partitions, delay patterns, block orders.

Strategies draw *instances*, never the step grid: a family, a seed and a few
sizes (a :class:`ProblemSpec`, whose ``build()`` makes the float64 problem
with :mod:`crosscurv.experiments.problems`), random acyclic patterns (random DAGs),
cyclic pair sets and block orders.  Arrays are built from the drawn seed with
``numpy.random.default_rng`` (Hypothesis reseeds the global RNGs per example,
so nothing relies on them); matrices are SPD or bounded by construction.  The
step-size grid of every property is ``eta0 * 2^-k``, ``k = 0..5``, with ``eta0``
derived from the instance's curvature scale (:mod:`crosscurv.experiments.scaling`).

Families (random block partitions with ``N = 2..5`` blocks):

* ``quartic``: random quartic polynomial, one block per group of 1-3 coordinates;
* ``tanh_mlp``: small tanh MLP in float64, its weight/bias tensors randomly
  grouped into ``N`` blocks;
* ``bilinear``: the LoRA-like two-block model ``(W0 + s B A) X ~ Y`` (``N = 2``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from hypothesis import settings
from hypothesis import strategies as st

from crosscurv.experiments.problems import Problem, bilinear_problem, quartic_problem, tanh_mlp_problem
from crosscurv.theory.patterns import DelayPattern

__all__ = [
    "ProblemSpec",
    "seeds",
    "quartic_specs",
    "tanh_mlp_specs",
    "bilinear_specs",
    "problem_specs",
    "block_orders",
    "acyclic_patterns",
    "cyclic_pair_sets",
    "examples",
    "GRID_POINTS",
]

#: Points of every step-size grid ``eta0 * 2^-k``, ``k = 0..GRID_POINTS-1``.
GRID_POINTS = 6

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@dataclass(frozen=True)
class ProblemSpec:
    """What Hypothesis draws for a problem instance (printed on failure; ``build()`` is cached).

    Attributes:
        family: ``"quartic"``, ``"tanh_mlp"`` or ``"bilinear"``.
        seed: seed of every array of the instance.
        sizes: ``quartic``: the block dimensions; ``tanh_mlp``:
            ``(widths, n_blocks, n_examples)``; ``bilinear``: ``(d_out, d_in, rank)``.
    """

    family: str
    seed: int
    sizes: tuple

    @property
    def n_blocks(self) -> int:
        if self.family == "quartic":
            return len(self.sizes)
        if self.family == "tanh_mlp":
            return self.sizes[1]
        return 2

    def build(self) -> Problem:
        return _build(self)


@lru_cache(maxsize=64)
def _build(spec: ProblemSpec) -> Problem:
    if spec.family == "quartic":
        return quartic_problem(spec.seed, spec.sizes)
    if spec.family == "tanh_mlp":
        widths, n_blocks, n_examples = spec.sizes
        return tanh_mlp_problem(spec.seed, widths, n_blocks=n_blocks, n_examples=n_examples)
    if spec.family == "bilinear":
        d_out, d_in, rank = spec.sizes
        return bilinear_problem(spec.seed, d_out=d_out, d_in=d_in, rank=rank)
    raise ValueError(f"unknown family {spec.family!r}")


@st.composite
def quartic_specs(draw, min_blocks: int = 2, max_blocks: int = 5) -> ProblemSpec:
    """A quartic polynomial over ``N`` blocks of 1-3 coordinates each."""
    n = draw(st.integers(min_blocks, max_blocks))
    dims = tuple(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)))
    return ProblemSpec("quartic", draw(seeds), dims)


@st.composite
def tanh_mlp_specs(draw, min_blocks: int = 2, max_blocks: int = 5) -> ProblemSpec:
    """A tanh MLP with 2-3 layers of width 2-5, its ``2 * layers`` tensors in ``N`` blocks."""
    layers = draw(st.integers(2, 3))
    hi = min(max_blocks, 2 * layers)
    lo = min(min_blocks, hi)
    widths = (draw(st.integers(2, 4)),) + tuple(draw(st.integers(3, 5)) for _ in range(layers - 1)) + (
        draw(st.integers(1, 3)),
    )
    n_blocks = draw(st.integers(lo, hi))
    return ProblemSpec("tanh_mlp", draw(seeds), (widths, n_blocks, draw(st.integers(6, 10))))


@st.composite
def bilinear_specs(draw) -> ProblemSpec:
    """The LoRA-like two-block model with ``d_out, d_in in 3..6`` and rank 1-3."""
    return ProblemSpec("bilinear", draw(seeds), (draw(st.integers(3, 6)), draw(st.integers(3, 6)), draw(st.integers(1, 3))))


def problem_specs(min_blocks: int = 2, max_blocks: int = 5):
    """Any of the three families (the bilinear one only when 2 blocks are allowed)."""
    options = [quartic_specs(min_blocks, max_blocks), tanh_mlp_specs(min_blocks, max_blocks)]
    if min_blocks <= 2 <= max_blocks:
        options.append(bilinear_specs())
    return st.one_of(*options)


def block_orders(n: int):
    """A random order of the blocks ``0..n-1``."""
    return st.permutations(list(range(n))).map(tuple)


@st.composite
def acyclic_patterns(draw, n: int, nonempty: bool = True) -> DelayPattern:
    """A random DAG over ``n`` blocks: a random order, then any subset of its forward pairs.

    ``(i, j)`` can be drawn only when ``j`` precedes ``i`` in the drawn order,
    so the pattern is acyclic by construction; with ``nonempty`` at least one
    pair is present.
    """
    order = draw(block_orders(n))
    forward = [(order[b], order[a]) for b in range(n) for a in range(b)]
    chosen = draw(st.lists(st.booleans(), min_size=len(forward), max_size=len(forward)))
    pairs = [p for p, keep in zip(forward, chosen) if keep]
    if nonempty and not pairs:
        pairs = [draw(st.sampled_from(forward))]
    return DelayPattern(n, frozenset(pairs), "random")


@st.composite
def cyclic_pair_sets(draw, n: int) -> tuple[frozenset, tuple]:
    """Pairs over ``n >= 2`` blocks containing a cycle, and that cycle's blocks.

    A cycle ``c_0 <- c_1 <- ... <- c_{m-1} <- c_0`` (``(c_t, c_{t+1})`` pairs) of
    length ``m = 2..n`` plus any other non-self pairs.
    """
    m = draw(st.integers(2, n))
    cycle = tuple(draw(st.permutations(list(range(n))))[:m])
    pairs = {(cycle[t], cycle[(t + 1) % m]) for t in range(m)}
    others = [(i, j) for i in range(n) for j in range(n) if i != j]
    pairs |= set(draw(st.lists(st.sampled_from(others), max_size=3)))
    return frozenset(pairs), cycle


def examples(fraction: float = 1.0) -> settings:
    """``settings`` with ``fraction`` of the active profile's ``max_examples`` (at least 2)."""
    return settings(max_examples=max(2, int(math.ceil(settings.default.max_examples * fraction))))
