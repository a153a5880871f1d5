"""Symbolic block model: the loss as its Taylor model around the common iterate.

``theta`` is split into ``N`` blocks of small dimension; around the common iterate ``theta^k``
(placed at the origin) the loss is

    L(theta^k + x) = L^k + g^T x + 1/2 x^T H x + 1/6 T[x, x, x] + 1/24 Q[x, x, x, x]

with generic symbols: ``g``, a symmetric ``H`` (blocks ``H_ij``), symmetric ``T`` and, for
``taylor_order=4``, ``Q``; ``L^k`` is dropped. Arithmetic runs in a sparse polynomial ring over QQ,
so a zero test is exact. A model of order ``p`` is exact for any smooth loss in every loss
coefficient of total degree ``<= p`` and every gradient coefficient of degree ``<= p - 1``.
Importing this module never imports torch.
"""

from __future__ import annotations

from functools import cached_property
from itertools import combinations_with_replacement
from math import factorial
from collections import Counter
from typing import Sequence

import sympy
from sympy import QQ, Rational
from sympy.polys.rings import PolyRing

from .errors import ModelError
from .series import SeriesSpace, TruncatedSeries

__all__ = ["ModelError", "BlockModel", "block_model"]


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _multiset_weight(idx: tuple) -> Rational:
    """``(number of distinct orderings of idx) / len(idx)!`` = ``1 / prod(count!)``."""
    w = 1
    for c in Counter(idx).values():
        w *= factorial(c)
    return Rational(1, w)


class BlockModel:
    """Generic Taylor model of a loss over ``N >= 2`` parameter blocks.

    ``dims``: one block dimension for all or ``N`` of them; ``taylor_order``: 2 (``g``, ``H``), 3
    (``T``) or 4 (``Q``); ``vectors``: names of extra symbolic ``d``-vectors (``("delta",)`` in
    Lemma 3); ``extra``: names of extra scalar generators (:attr:`extra` maps them).  Attributes:
    ``d``, ``block_dims``, ``blocks`` (flat indices per block), ``block_of``, ``ring`` (over QQ),
    ``g`` (``d`` generators), ``H`` (``d x d``, symmetric), ``symbols``.  Raises
    :class:`ModelError`.
    """

    def __init__(self, n_blocks: int, dims: int | Sequence[int] = 1, taylor_order: int = 3,
                 vectors: Sequence[str] = (), extra: Sequence[str] = ()):
        if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 2:
            raise ModelError(f"the block model needs at least 2 blocks, got {n_blocks!r}")
        if isinstance(dims, int) and not isinstance(dims, bool):
            block_dims = (dims,) * n_blocks
        else:
            block_dims = tuple(dims)
        if len(block_dims) != n_blocks or not all(isinstance(x, int) and not isinstance(x, bool)
                                                  and x >= 1 for x in block_dims):
            raise ModelError(f"block dimensions must be {n_blocks} positive integers, got {dims!r}")
        if taylor_order not in (2, 3, 4):
            raise ModelError(f"taylor_order must be 2, 3 or 4, got {taylor_order!r}")
        self.n_blocks = n_blocks
        self.block_dims = block_dims
        self.taylor_order = taylor_order
        self.vector_names = tuple(vectors)
        self.extra_names = tuple(extra)
        if len(set(self.extra_names)) != len(self.extra_names):
            raise ModelError(f"extra symbol names must be distinct, got {self.extra_names}")
        self.d = sum(block_dims)
        blocks, block_of, start = [], [], 0
        for b, db in enumerate(block_dims):
            blocks.append(tuple(range(start, start + db)))
            block_of.extend([b] * db)
            start += db
        self.blocks = tuple(blocks)
        self.block_of = tuple(block_of)
        self._build_symbols()

    # -- symbols -----------------------------------------------------------
    def _labels(self) -> tuple[list[str], str]:
        """Coordinate labels and the separator used to join them in names."""
        uniform = len(set(self.block_dims)) == 1
        D = self.block_dims[0]
        if uniform and D == 1 and self.n_blocks <= 9:
            return [str(b + 1) for b in self.block_of], ""
        if uniform and D <= len(_LETTERS) and self.n_blocks <= 9:
            return [f"{self.block_of[a] + 1}{_LETTERS[a - self.blocks[self.block_of[a]][0]]}"
                    for a in range(self.d)], ""
        return [f"{self.block_of[a] + 1}.{a - self.blocks[self.block_of[a]][0] + 1}" for a in range(
            self.d)], ","

    def _name(self, base: str, idx: tuple) -> str:
        labels, sep = self._labels_cache
        text = sep.join(labels[a] for a in idx)
        if sep == "" and all(len(labels[a]) == 1 for a in idx):
            return f"{base}{text}"  # g1, H12, T123: SymPy prints H_{12}
        return f"{base}_{{{text}}}" if sep else f"{base}_{text}"

    def _build_symbols(self) -> None:
        d = self.d
        self._labels_cache = self._labels()
        syms: list[sympy.Symbol] = []
        self.symbol_index: dict[sympy.Symbol, tuple[str, tuple]] = {}

        def add(kind: str, idx: tuple) -> sympy.Symbol:
            s = sympy.Symbol(self._name(kind if kind != "delta" else "delta", idx), real=True)
            syms.append(s)
            self.symbol_index[s] = (kind, idx)
            return s

        self.g_symbols = [add("g", (a,)) for a in range(d)]
        self.H_symbols = {}
        for a, b in combinations_with_replacement(range(d), 2):
            self.H_symbols[(a, b)] = add("H", (a, b))
        self.T_symbols = {}
        if self.taylor_order >= 3:
            for idx in combinations_with_replacement(range(d), 3):
                self.T_symbols[idx] = add("T", idx)
        self.Q_symbols = {}
        if self.taylor_order >= 4:
            for idx in combinations_with_replacement(range(d), 4):
                self.Q_symbols[idx] = add("Q", idx)
        self.vector_symbols = {name: [add(name, (a,)) for a in range(d)]
                               for name in self.vector_names}
        self.extra_symbols = {}
        taken = {str(x) for x in syms}
        for name in self.extra_names:
            if name in taken:
                raise ModelError(f"extra symbol {name!r} clashes with a model symbol")
            s = sympy.Symbol(name, real=True)
            syms.append(s)
            self.symbol_index[s] = ("extra", (name,))
            self.extra_symbols[name] = s
        self.symbols = tuple(syms)
        self.ring = PolyRing(self.symbols, QQ)
        gen = dict(zip(self.symbols, self.ring.gens))
        self._gen = gen
        self._gidx = {sym: k for k, sym in enumerate(self.symbols)}
        self.g = [gen[s] for s in self.g_symbols]
        self.H = [[gen[self.H_symbols[tuple(sorted((a, b)))]] for b in range(d)] for a in range(d)]
        self._T = {k: gen[s] for k, s in self.T_symbols.items()}
        self._Q = {k: gen[s] for k, s in self.Q_symbols.items()}
        self.vectors = {n: [gen[s] for s in v] for n, v in self.vector_symbols.items()}
        self.extra = {n: gen[s] for n, s in self.extra_symbols.items()}
        self.zero = self.ring.zero
        self.one = self.ring.one

    def gen(self, symbol: sympy.Symbol):
        """The ring generator of a model symbol."""
        return self._gen[symbol]

    def T(self, a: int, b: int, c: int):
        """Entry ``T_abc`` (ring generator; symmetric in its indices)."""
        return self._T[tuple(sorted((a, b, c)))]

    def Q(self, a: int, b: int, c: int, e: int):
        """Entry ``Q_abce`` (ring generator; symmetric in its indices)."""
        return self._Q[tuple(sorted((a, b, c, e)))]

    def const(self, value) -> object:
        """A rational constant as a ring element."""
        return self.ring(Rational(value))

    def to_expr(self, p) -> sympy.Expr:
        """A ring element (or a plain number) as a SymPy expression."""
        return p.as_expr() if hasattr(p, "as_expr") else sympy.sympify(p)

    def from_expr(self, expr) -> object:
        """A polynomial SymPy expression in the model symbols as a ring element."""
        return self.ring.from_expr(sympy.sympify(expr))

    def __repr__(self) -> str:
        return (f"BlockModel(n_blocks={self.n_blocks}, dims={self.block_dims}, "
                f"taylor_order={self.taylor_order}, vectors={self.vector_names})")

    # -- Taylor model at a displaced state -----------------------------------
    def _products(self, state: Sequence, space: SeriesSpace, max_len: int) -> dict[tuple,
                                                                                   TruncatedSeries]:
        """Products ``prod_{a in idx} state[a]`` for sorted index tuples up to ``max_len``."""
        nz = [a for a in range(self.d) if state[a] is not None and not _is_zero_series(state[a])]
        prods: dict[tuple, TruncatedSeries] = {(a,): state[a] for a in nz}
        frontier = list(prods)
        for _ in range(max_len - 1):
            nxt = []
            for idx in frontier:
                for a in nz:
                    if a < idx[-1]:
                        continue
                    key = idx + (a,)
                    prods[key] = prods[idx] * state[a]
                    nxt.append(key)
            frontier = nxt
        return prods

    def _space_of(self, state: Sequence) -> SeriesSpace:
        for s in state:
            if isinstance(s, TruncatedSeries):
                return s.space
        raise ValueError("state holds no TruncatedSeries; pass the space explicitly")

    def gradient(self, state: Sequence, components: Sequence[int] | None = None, space: SeriesSpace
                 | None = None) -> dict[int, TruncatedSeries]:
        """``{a: grad_a}`` (series) of the Taylor model at ``theta^k + state`` for the flat indices
        ``components`` (default all); ``state``: ``d`` series (``None`` is 0), ``grad_a = g_a + H_ab
        x_b + 1/2 T_abc x_b x_c + 1/6 Q_abce x_b x_c x_e``."""
        space = space or self._space_of(state)
        comps = range(self.d) if components is None else components
        prods = self._products(state, space, self.taylor_order - 1)
        tables = {1: self.H_symbols, 2: self.T_symbols, 3: self.Q_symbols}
        out = {}
        for a in comps:
            acc = _Accumulator(space, self.ring)
            acc.add_constant(self.g[a])
            for idx, p in prods.items():
                sym = tables[len(idx)][tuple(sorted((a,) + idx))]
                acc.add(p, self._gidx[sym], _multiset_weight(idx))
            out[a] = acc.result()
        return out

    def hessian(self, state: Sequence, entries: Sequence[tuple[int, int]] | None = None,
                space: SeriesSpace | None = None) -> dict[tuple[int, int], TruncatedSeries]:
        """``{(a, b): H(x)_ab}`` for ``entries`` (default all) at ``theta^k + state``: ``H(x)_ab =
        H_ab + sum_c T_abc x_c + 1/2 sum_ce Q_abce x_c x_e``."""
        space = space or self._space_of(state)
        want = [(a, b) for a in range(self.d) for b in range(self.d)] if entries is None else list(
            entries)
        prods = self._products(state, space, self.taylor_order
                               - 2) if self.taylor_order >= 3 else {}
        tables = {1: self.T_symbols, 2: self.Q_symbols}
        out = {}
        for a, b in want:
            acc = _Accumulator(space, self.ring)
            acc.add_constant(self.H[a][b])
            for idx, p in prods.items():
                sym = tables[len(idx)][tuple(sorted((a, b) + idx))]
                acc.add(p, self._gidx[sym], _multiset_weight(idx))
            out[(a, b)] = acc.result()
        return out

    def loss(self, state: Sequence, space: SeriesSpace | None = None) -> TruncatedSeries:
        """``L(theta^k + x) - L^k`` of the Taylor model (series).

        ``sum_m 1/m! D^m L[x, ..., x]`` for ``m = 1..taylor_order``, summed over multisets of
        coordinates with weight ``1/prod(count!)``.
        """
        space = space or self._space_of(state)
        prods = self._products(state, space, self.taylor_order)
        tables = {1: None, 2: self.H_symbols, 3: self.T_symbols, 4: self.Q_symbols}
        acc = _Accumulator(space, self.ring)
        for idx, p in prods.items():
            k = len(idx)
            sym = self.g_symbols[idx[0]] if k == 1 else tables[k][idx]
            acc.add(p, self._gidx[sym], _multiset_weight(idx))
        return acc.result()

    # -- expressions for display and checks --------------------------------
    @cached_property
    def loss_expr(self) -> sympy.Expr:
        """The Taylor model ``L(theta^k + x) - L^k`` as an expression in ``x_1..x_d`` (symbols
        ``x1..xd``); used by tests to check :meth:`gradient` by ``diff``."""
        xs = sympy.symbols(f"x0:{self.d}", real=True)
        expr = sympy.S.Zero
        tables = {2: self.H_symbols, 3: self.T_symbols, 4: self.Q_symbols}
        for m in range(1, self.taylor_order + 1):
            for idx in combinations_with_replacement(range(self.d), m):
                c = self.g_symbols[idx[0]] if m == 1 else tables[m][idx]
                expr += _multiset_weight(idx) * c * sympy.Mul(*[xs[a] for a in idx])
        return expr


class _Accumulator:
    """In-place sum of ``series * generator * weight`` terms (no intermediate copies).

    Multiplying a polynomial by one generator only shifts one exponent, done by tuple slicing; this
    avoids SymPy's generic monomial product, whose cost grows with the (large) number of model
    symbols.
    """

    __slots__ = ("space", "ring", "terms", "_conv")

    def __init__(self, space: SeriesSpace, ring: PolyRing):
        self.space = space
        self.ring = ring
        self.terms: dict = {}
        self._conv = ring.domain.convert

    def _into(self, e: tuple) -> dict:
        t = self.terms.get(e)
        if t is None:
            t = self.terms[e] = {}
        return t

    def add_constant(self, poly) -> None:
        """Add the ring element ``poly`` as the degree-0 coefficient."""
        self._merge(self._into((0,) * self.space.nvars), poly.items())

    @staticmethod
    def _merge(tgt: dict, items) -> None:
        for m, c in items:
            v = tgt.get(m)
            if v is None:
                tgt[m] = c
            else:
                v = v + c
                if v:
                    tgt[m] = v
                else:
                    del tgt[m]

    def add(self, s: TruncatedSeries, k: int, weight=1) -> None:
        """Add ``s * x_k * weight`` (``x_k`` the ring's ``k``-th generator)."""
        w = self._conv(weight)
        one = w == 1
        for e, poly in s.terms.items():
            items = ((m[:k] + (m[k] + 1,) + m[k + 1:], c if one else c * w) for m,
                     c in poly.items())
            self._merge(self._into(e), items)

    def result(self) -> TruncatedSeries:
        zero = self.ring.zero
        return TruncatedSeries(self.space, {e: zero.new(t) for e, t in self.terms.items() if t})


def _is_zero_series(s) -> bool:
    return isinstance(s, TruncatedSeries) and s.is_zero


def block_model(n_blocks: int, dims: int | Sequence[int] = 1, taylor_order: int = 3,
                vectors: Sequence[str] = (), extra: Sequence[str] = ()) -> BlockModel:
    """Build a :class:`BlockModel` (see its docstring)."""
    return BlockModel(n_blocks, dims, taylor_order, vectors, extra)
