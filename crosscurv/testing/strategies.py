"""Hypothesis strategies for delay patterns and small block problems, for your own property tests.

Strategies draw instances, never a step grid: a :class:`ProblemSpec` (family, seed, sizes; printed
on failure, ``build().task`` a :class:`crosscurv.numeric.Task` in float64) and delay patterns over
``n`` blocks. Arrays come from the drawn seed, never from the global RNGs.

Problems: :func:`block_quadratics`, :func:`quartic_specs`, :func:`tanh_mlp_specs`,
:func:`bilinear_specs` and :func:`problem_specs` (any of the last three).  Patterns:
:func:`acyclic_patterns`, :func:`gs_orders`, :func:`stage_patterns`, :func:`block_orders` and
:func:`cyclic_pair_sets` (what a pattern parser must refuse).  Example::

    from hypothesis import given, strategies as st
    from crosscurv.testing import strategies as cst

    @given(spec=cst.block_quadratics(block_sizes=(2, 1, 3)), data=st.data())
    def test_my_step_is_its_pattern(spec, data):
        task = spec.build().task
        pattern = data.draw(cst.stage_patterns(task.n_blocks))
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from hypothesis import strategies as st

from crosscurv.experiments.problems import (Problem, bilinear_problem, quartic_problem,
                                            tanh_mlp_problem)
from crosscurv.theory.patterns import DelayPattern, gauss_seidel

__all__ = ["ProblemSpec", "seeds", "block_quadratics", "quartic_specs", "tanh_mlp_specs",
           "bilinear_specs", "problem_specs", "block_orders", "acyclic_patterns", "gs_orders",
           "stage_patterns", "cyclic_pair_sets"]

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@dataclass(frozen=True)
class ProblemSpec:
    """What Hypothesis draws for a problem instance (printed on failure; ``build()`` is cached).

    Attributes:
        family: ``"quadratic"``, ``"quartic"``, ``"tanh_mlp"`` or ``"bilinear"``.
        seed: seed of every array of the instance.
        sizes: ``quadratic`` and ``quartic``: the block dimensions; ``tanh_mlp``:
            ``(widths, n_blocks, n_examples)``; ``bilinear``: ``(d_out, d_in, rank)``.
    """

    family: str
    seed: int
    sizes: tuple

    @property
    def n_blocks(self) -> int:
        if self.family in ("quadratic", "quartic"):
            return len(self.sizes)
        if self.family == "tanh_mlp":
            return self.sizes[1]
        return 2

    def build(self) -> Problem:
        return _build(self)


@lru_cache(maxsize=64)
def _build(spec: ProblemSpec) -> Problem:
    if spec.family == "quadratic":
        from crosscurv.experiments.problems import curvature_scale
        from crosscurv.experiments.problems.toys import coupled_quadratic

        task = coupled_quadratic(spec.sizes, seed=spec.seed, name=f"quadratic-{spec.seed}")[0]
        return Problem(
            task, "quadratic", curvature_scale(task), info={"seed": spec.seed, "sizes": spec.sizes}
        )
    if spec.family == "quartic":
        return quartic_problem(spec.seed, spec.sizes)
    if spec.family == "tanh_mlp":
        widths, n_blocks, n_examples = spec.sizes
        return tanh_mlp_problem(spec.seed, widths, n_blocks=n_blocks, n_examples=n_examples)
    if spec.family == "bilinear":
        d_out, d_in, rank = spec.sizes
        return bilinear_problem(spec.seed, d_out=d_out, d_in=d_in, rank=rank)
    raise ValueError(f"unknown family {spec.family!r}")


def _block_sizes(draw, min_blocks: int, max_blocks: int, block_sizes) -> tuple:
    if block_sizes is not None:
        return tuple(int(d) for d in block_sizes)
    n = draw(st.integers(min_blocks, max_blocks))
    return tuple(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)))


@st.composite
def block_quadratics(
    draw, min_blocks: int = 2, max_blocks: int = 5, block_sizes=None
) -> ProblemSpec:
    """``1/2 x^T A x - b^T x`` over ``N`` blocks of 1-3 coordinates (or of ``block_sizes``).

    ``A = Q Q^T / d + I`` from a seeded normal ``Q`` (every block pair coupled), then ``b`` and the
    start (:func:`crosscurv.experiments.problems.toys.coupled_quadratic`); the blocks are ``x1, x2,
    ...``.
    """
    sizes = _block_sizes(draw, min_blocks, max_blocks, block_sizes)  # sizes first, then the seed
    return ProblemSpec("quadratic", draw(seeds), sizes)


@st.composite
def quartic_specs(draw, min_blocks: int = 2, max_blocks: int = 5, block_sizes=None) -> ProblemSpec:
    """A quartic polynomial over ``N`` blocks of 1-3 coordinates each (or of ``block_sizes``)."""
    sizes = _block_sizes(draw, min_blocks, max_blocks, block_sizes)  # sizes first, then the seed
    return ProblemSpec("quartic", draw(seeds), sizes)


@st.composite
def tanh_mlp_specs(draw, min_blocks: int = 2, max_blocks: int = 5) -> ProblemSpec:
    """A tanh MLP with 2-3 layers of width 2-5, its ``2 * layers`` tensors in ``N`` blocks."""
    layers = draw(st.integers(2, 3))
    hi = min(max_blocks, 2 * layers)
    lo = min(min_blocks, hi)
    widths = (
        (draw(st.integers(2, 4)),)
        + tuple(draw(st.integers(3, 5)) for _ in range(layers - 1))
        + (draw(st.integers(1, 3)),)
    )
    n_blocks = draw(st.integers(lo, hi))
    return ProblemSpec("tanh_mlp", draw(seeds), (widths, n_blocks, draw(st.integers(6, 10))))


@st.composite
def bilinear_specs(draw) -> ProblemSpec:
    """The LoRA-like two-block model with ``d_out, d_in in 3..6`` and rank 1-3."""
    return ProblemSpec(
        "bilinear",
        draw(seeds),
        (draw(st.integers(3, 6)), draw(st.integers(3, 6)), draw(st.integers(1, 3))),
    )


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

    ``(i, j)`` can be drawn only when ``j`` precedes ``i`` in the drawn order, so the pattern is
    acyclic by construction; with ``nonempty`` at least one pair is present.
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

    A cycle ``c_0 <- c_1 <- ... <- c_{m-1} <- c_0`` (``(c_t, c_{t+1})`` pairs) of length ``m =
    2..n`` plus any other non-self pairs.
    """
    m = draw(st.integers(2, n))
    cycle = tuple(draw(st.permutations(list(range(n))))[:m])
    pairs = {(cycle[t], cycle[(t + 1) % m]) for t in range(m)}
    others = [(i, j) for i in range(n) for j in range(n) if i != j]
    pairs |= set(draw(st.lists(st.sampled_from(others), max_size=3)))
    return frozenset(pairs), cycle


def gs_orders(n: int):
    """Full GS over ``n`` blocks in a random order (:func:`crosscurv.theory.gauss_seidel`)."""
    return block_orders(n).map(lambda order: gauss_seidel(n, order))


@st.composite
def stage_patterns(draw, n: int, min_stages: int = 1) -> DelayPattern:
    """The ``n`` blocks in ``m >= min_stages`` ordered stages, each using every earlier stage.

    ``S = {(i, j) : stage(j) < stage(i)}``: the blocks of one stage move simultaneously from the
    state after the stages before it. A random order of the blocks is cut into ``m`` non-empty
    stages; one stage is JC, ``n`` stages are full GS in that order.
    """
    order = draw(block_orders(n))
    m = draw(st.integers(max(1, min(min_stages, n)), n))
    cuts = (
        sorted(draw(st.lists(st.integers(1, n - 1), min_size=m - 1, max_size=m - 1, unique=True)))
        if m > 1
        else []
    )
    stage = {}
    for s_index, (lo, hi) in enumerate(zip([0] + cuts, cuts + [n])):
        for b in order[lo:hi]:
            stage[b] = s_index
    pairs = frozenset((i, j) for i in range(n) for j in range(n) if stage[j] < stage[i])
    return DelayPattern(
        n,
        pairs,
        "stages:"
        + "|".join(
            ",".join(str(b + 1) for b in order[lo:hi]) for lo, hi in zip([0] + cuts, cuts + [n])
        ),
    )
