"""What the checks of :mod:`crosscurv.testing` call: your implementation of schemes and estimates.

An implementation is up to three functions over a :class:`crosscurv.numeric.Task` (``task.params``:
``{name: float64 tensor}``, ``task.loss(params) -> scalar tensor``, ``task.blocks``:
``{block: [param names]}`` in block order, ``task.n_blocks``) and a
:class:`crosscurv.theory.DelayPattern` (``pattern.pairs``: the pairs ``(i, j)``, 0-based, where
block ``i`` uses the fresh block ``j``; ``pattern.is_jacobi``; ``pattern.order()``: an order of
the blocks in which every used block is updated first):

* ``step(task, params, pattern, lr) -> params`` (required): one iteration of the scheme of
  ``pattern`` from ``params`` with step size ``lr`` (Definition 2:
  ``theta_i^+ = theta_i - lr grad_i L(theta with the blocks j, (i, j) in S, already moved)``); it
  returns a dict with the names, shapes and dtype of ``params`` and must not change ``params``;
* ``cross_curvature(task, params, pattern) -> float`` (optional): ``C_S = sum_{(i,j) in S} c_ij``,
  ``c_ij = g_i^T H_ij g_j`` at ``params`` (Theorem 1: ``L_S - L_JC = eta^2 C_S + O(eta^3)``);
* ``protocol(task, pattern, lr, iters) -> records`` (optional): the controlled protocol, JC and
  ``S`` from ``task.params``, one record per iteration ``k = 1..iters`` with at least the columns
  ``k, loss_jc, loss_s, gap, recursive, cumulative`` (``gap = loss_s - loss_jc``; ``recursive``:
  Theorem 2's estimate from the measured ``Delta theta^{k-1}``; ``cumulative``: Theorem 3's from
  the propagated ``z``; docs/protocol.md defines them); other columns of ``crosscurv.FIELDS`` are
  compared with crosscurv's where present. ``records`` is ``{column: values}``, a list of
  ``{column: value}`` rows or the path of a records CSV.

A check that needs a function the implementation lacks is skipped, and says which.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = [
    "Implementation",
    "as_implementation",
    "reference_implementation",
    "records_columns",
    "PAPER_COLUMNS",
]

#: The columns every protocol implementation returns (the paper's quantities).
PAPER_COLUMNS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative")


@dataclass(frozen=True)
class Implementation:
    """An implementation under test (module docstring: the contract of each function).

    Attributes:
        step: ``step(task, params, pattern, lr) -> params``.
        cross_curvature: ``cross_curvature(task, params, pattern) -> C_S``, or ``None``.
        protocol: ``protocol(task, pattern, lr, iters) -> records``, or ``None``.
        name: the name in the test ids (``<name>-<check>``).
    """

    step: Callable
    cross_curvature: Callable | None = None
    protocol: Callable | None = None
    name: str = "implementation"

    def __post_init__(self) -> None:
        if not callable(self.step):
            raise TypeError(
                f"{self.name}: step must be callable: step(task, params, pattern, lr) -> params"
            )
        for what in ("cross_curvature", "protocol"):
            f = getattr(self, what)
            if f is not None and not callable(f):
                raise TypeError(
                    f"{self.name}: {what} must be callable or None, got {type(f).__name__}"
                )

    def __repr__(self) -> str:  # the test id and pytest's parameter display
        return self.name


def as_implementation(obj, name: str | None = None) -> Implementation:
    """An :class:`Implementation` from itself or from any object or module with the attributes
    ``step`` and optionally ``cross_curvature``, ``protocol`` and ``name``."""
    if isinstance(obj, Implementation):
        return (
            obj
            if name is None
            else Implementation(obj.step, obj.cross_curvature, obj.protocol, name)
        )
    step = getattr(obj, "step", None)
    if step is None:
        raise TypeError(
            f"{obj!r} has no step(task, params, pattern, lr); see crosscurv.testing.Implementation"
        )
    label = (
        name or getattr(obj, "name", None) or getattr(obj, "__name__", None) or type(obj).__name__
    )
    return Implementation(
        step,
        getattr(obj, "cross_curvature", None),
        getattr(obj, "protocol", None),
        str(label).rsplit(".", 1)[-1],
    )


def records_columns(records) -> dict:
    """``{column: [float]}`` from what a ``protocol`` returns: a mapping of columns, a list of rows
    or a records CSV path (read by :func:`crosscurv.numeric.records.read_columns`)."""
    if isinstance(records, (str, os.PathLike)):
        from crosscurv.numeric.records import FIELDS, read_columns

        return read_columns(
            os.fspath(records),
            list(PAPER_COLUMNS),
            optional=[f for f in FIELDS if f not in PAPER_COLUMNS],
        )
    if isinstance(records, Mapping):
        cols = {str(c): [float(v) for v in values] for c, values in records.items()}
    else:
        rows = list(records)
        keys = list(rows[0]) if rows else list(PAPER_COLUMNS)
        cols = {str(c): [float(r[c]) for r in rows] for c in keys}
    missing = [c for c in PAPER_COLUMNS if c not in cols]
    if missing:
        raise AssertionError(
            f"the protocol's records have no column(s) {', '.join(missing)} "
            f"(required: {', '.join(PAPER_COLUMNS)})"
        )
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise AssertionError(f"the protocol's record columns differ in length: {sorted(lengths)}")
    return cols


def _reference_step(task, params, pattern, lr):
    from crosscurv.numeric.steps import scheme_step

    return scheme_step(task, params, pattern, lr)


def _reference_cross_curvature(task, params, pattern):
    from crosscurv.numeric.curvature import cross_curvature_table

    return cross_curvature_table(task, params).C_S(pattern)


def _reference_protocol(task, pattern, lr, iters):
    from crosscurv.numeric.protocol import run_protocol

    res = run_protocol(task, pattern, lr, iters)
    if res.status != "complete":
        raise AssertionError(f"crosscurv's protocol on {task.name}: {res.status}: {res.message}")
    return res.records


def reference_implementation() -> Implementation:
    """crosscurv's own functions as an :class:`Implementation` (``scheme_step``, the cross-curvature
    table's ``C_S``, ``run_protocol``): what every check passes on, and a template for yours."""
    return Implementation(
        _reference_step, _reference_cross_curvature, _reference_protocol, name="crosscurv"
    )
