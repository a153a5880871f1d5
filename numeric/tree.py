"""Parameter-space vectors as dicts of tensors (``dict[str, Tensor]``), keyed and shaped like the
task's ``params``: no flat ``d``-vector or ``d x d`` matrix is ever formed.
"""

from __future__ import annotations

from collections import abc
from typing import Iterable, Mapping

import torch

__all__ = ["add", "sub", "scale", "axpy", "dot", "norm", "zeros_like", "restrict", "detach",
           "conform", "clone", "flatten", "unflatten", "stack", "unstack", "lazy"]

Tree = dict  # dict[str, torch.Tensor]


class lazy(abc.Mapping):
    """The vector ``{k: entry(k) for k in keys}`` with each entry formed when it is read (and not
    kept): a consumer reading it entry by entry holds one entry at a time.
    """

    def __init__(self, keys: Iterable[str], entry):
        self._keys, self._entry = dict.fromkeys(keys), entry

    def __getitem__(self, k):
        if k not in self._keys:
            raise KeyError(k)
        return self._entry(k)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def add(a: Mapping, b: Mapping) -> Tree:
    """``a + b``."""
    return {k: a[k] + b[k] for k in a}


def sub(a: Mapping, b: Mapping) -> Tree:
    """``a - b``."""
    return {k: a[k] - b[k] for k in a}


def scale(a: Mapping, s) -> Tree:
    """``s * a`` for a scalar ``s``."""
    return {k: v * s for k, v in a.items()}


def axpy(alpha, x: Mapping, y: Mapping) -> Tree:
    """``alpha * x + y``."""
    return {k: alpha * x[k] + y[k] for k in y}


def dot(a: Mapping, b: Mapping) -> torch.Tensor:
    """Euclidean inner product ``a^T b`` (0-dim tensor; zero for no entries). With ``b is a`` each
    entry is read once (a lazily read entry is fetched once, not twice)."""
    total = None
    for k in a:
        x = a[k]
        s = (x * (x if b is a else b[k])).sum()
        total = s if total is None else total + s
    return torch.zeros(()) if total is None else total


def norm(a: Mapping) -> torch.Tensor:
    """Euclidean norm ``||a||`` (0-dim tensor)."""
    return torch.sqrt(dot(a, a))


def zeros_like(a: Mapping) -> Tree:
    return {k: torch.zeros_like(v) for k, v in a.items()}


def restrict(a: Mapping, keys: Iterable[str]) -> Tree:
    """``P a``: keep the entries in ``keys``, zero elsewhere (a block projection)."""
    keep = set(keys)
    return {k: (v if k in keep else torch.zeros_like(v)) for k, v in a.items()}


def detach(a: Mapping) -> Tree:
    return {k: v.detach() for k, v in a.items()}


def conform(v: Mapping, like: Mapping, error: type = ValueError) -> Tree:
    """``v`` checked against ``like``'s keys and shapes, detached and cast to its dtype and device;
    raises ``error`` (one line) when keys or shapes differ.
    """
    missing = [k for k in like if k not in v]
    extra = [k for k in v if k not in like]
    if missing or extra:
        raise error(
            "vector keys differ from the parameters'"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {extra}" if extra else "")
        )
    out = {}
    for k, p in like.items():
        t = v[k]
        if tuple(t.shape) != tuple(p.shape):
            raise error(f"vector entry {k!r} has shape {tuple(t.shape)}, parameter has "
                        f"{tuple(p.shape)}")
        out[k] = t.detach().to(dtype=p.dtype, device=p.device)
    return out


def clone(a: Mapping) -> Tree:
    return {k: v.detach().clone() for k, v in a.items()}


def flatten(a: Mapping) -> torch.Tensor:
    """Concatenate into one ``(d,)`` vector in key order (tests and small problems only)."""
    return torch.cat([v.reshape(-1) for v in a.values()])


def unflatten(vec: torch.Tensor, like: Mapping) -> Tree:
    """Inverse of :func:`flatten` with the keys and shapes of ``like``."""
    out, i = {}, 0
    for k, v in like.items():
        n = v.numel()
        out[k] = vec[i : i + n].reshape(v.shape)
        i += n
    return out


def stack(trees: list) -> Tree:
    """List of ``m`` trees -> one tree with a leading batch axis of size ``m`` (for ``vmap``)."""
    return {k: torch.stack([t[k] for t in trees]) for k in trees[0]}


def unstack(tree: Mapping) -> list:
    """Inverse of :func:`stack`."""
    m = next(iter(tree.values())).shape[0]
    return [{k: v[i] for k, v in tree.items()} for i in range(m)]
