"""What the checks of :mod:`crosscurv.testing` call: your implementation of schemes and estimates.

With torch, an implementation is up to three functions over a :class:`crosscurv.numeric.Task`
(``task.params``: ``{name: float64 tensor}``, ``task.loss(params) -> scalar tensor``,
``task.blocks``: ``{block: [param names]}`` in block order, ``task.n_blocks``) and a
:class:`crosscurv.theory.DelayPattern` (``pattern.pairs``: the pairs ``(i, j)``, 0-based, where
block ``i`` uses the fresh block ``j``; ``pattern.is_jacobi``; ``pattern.order()``: an order of
the blocks in which every used block is updated first):

* ``step(task, params, pattern, lr) -> params``: one iteration of the scheme of ``pattern`` from
  ``params`` with step size ``lr`` (Definition 2:
  ``theta_i^+ = theta_i - lr grad_i L(theta with the blocks j, (i, j) in S, already moved)``); it
  returns a dict with the names, shapes and dtype of ``params`` and must not change ``params``;
* ``cross_curvature(task, params, pattern) -> float``: ``C_S = sum_{(i,j) in S} c_ij``,
  ``c_ij = g_i^T H_ij g_j`` at ``params`` (Theorem 1: ``L_S - L_JC = eta^2 C_S + O(eta^3)``);
* ``protocol(task, pattern, lr, iters) -> records``: the controlled protocol, JC and
  ``S`` from ``task.params``, one record per iteration ``k = 1..iters`` with at least the columns
  ``k, loss_jc, loss_s, gap, recursive, cumulative`` (``gap = loss_s - loss_jc``; ``recursive``:
  Theorem 2's estimate from the measured ``Delta theta^{k-1}``; ``cumulative``: Theorem 3's from
  the propagated ``z``; docs/protocol.md defines them); other columns of ``crosscurv.FIELDS`` are
  compared with crosscurv's where present. ``records`` is ``{column: values}``, a list of
  ``{column: value}`` rows or the path of a records CSV.

Without torch (NumPy, JAX, another language), plain data on the golden cases
(:mod:`crosscurv.testing.golden`; ``case`` is a golden ``case.json`` read as a dict):

* ``records(case, label) -> records``: the protocol's records on the case for the pattern
  ``case["patterns"][label]`` (``label``: ``jc``, ``gs``, ``partial``), as ``protocol`` returns
  them, or ``None`` for a case not covered; or a folder holding ``<case>/<label>/records.csv``;
* ``one_step(case) -> dict``: one-step quantities laid out like the case's ``one_step.json`` (any
  subset), or ``None``; or a folder holding ``<case>/one_step.json``.

Every function is optional; an implementation has at least one. A check that needs a function the
implementation lacks is skipped, and says which.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable

__all__ = ["Implementation", "as_implementation", "reference_implementation", "records_columns",
           "PAPER_COLUMNS", "FUNCTIONS"]

#: What an implementation may provide, in the order of :class:`Implementation`'s fields.
FUNCTIONS = ("step", "cross_curvature", "protocol", "records", "one_step")
#: The columns every protocol implementation returns (the paper's quantities).
PAPER_COLUMNS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative")


@dataclass(frozen=True)
class Implementation:
    """An implementation under test (module docstring: the contract of each function).

    Attributes:
        step: ``step(task, params, pattern, lr) -> params``, or ``None``.
        cross_curvature: ``cross_curvature(task, params, pattern) -> C_S``, or ``None``.
        protocol: ``protocol(task, pattern, lr, iters) -> records``, or ``None``.
        name: the name in the test ids (``<name>-<check>``).
        records: ``records(case, label) -> records`` or a folder (no torch), or ``None``.
        one_step: ``one_step(case) -> dict`` or a folder (no torch), or ``None``.
    """

    step: Callable | None = None
    cross_curvature: Callable | None = None
    protocol: Callable | None = None
    name: str = "implementation"
    records: Callable | str | os.PathLike | None = None
    one_step: Callable | str | os.PathLike | None = None

    def __post_init__(self) -> None:
        for what in FUNCTIONS:
            f = getattr(self, what)
            folder = what in ("records", "one_step") and isinstance(f, (str, os.PathLike))
            if f is not None and not callable(f) and not folder:
                raise TypeError(
                    f"{self.name}: {what} must be callable or None, got {type(f).__name__}"
                )
        if all(getattr(self, what) is None for what in FUNCTIONS):
            raise TypeError(
                f"{self.name}: no function to check; give step, cross_curvature, protocol, "
                "records or one_step (see crosscurv.testing.Implementation)"
            )

    def __repr__(self) -> str:  # the test id and pytest's parameter display
        return self.name


def as_implementation(obj, name: str | None = None) -> Implementation:
    """An :class:`Implementation` from itself or from any object or module with some of the
    attributes of :data:`FUNCTIONS` and optionally ``name``."""
    if isinstance(obj, Implementation):
        return obj if name is None else dataclasses.replace(obj, name=name)
    found = {what: getattr(obj, what, None) for what in FUNCTIONS}
    if all(f is None for f in found.values()):
        raise TypeError(
            f"{obj!r} has none of {', '.join(FUNCTIONS)}; see crosscurv.testing.Implementation"
        )
    label = (
        name or getattr(obj, "name", None) or getattr(obj, "__name__", None) or type(obj).__name__
    )
    return Implementation(name=str(label).rsplit(".", 1)[-1], **found)


def records_columns(records) -> dict:
    """``{column: [float]}`` from what a ``protocol`` returns: a mapping of columns, a list of rows
    or a records CSV path; the paper's columns required (read as ``validate-records`` reads them,
    :func:`crosscurv.experiments.conformance.golden_check.as_columns`).

    Raises:
        AssertionError: a missing column, a non-numeric value, columns of different lengths.
    """
    from crosscurv.experiments.conformance.golden_check import as_columns
    from crosscurv.theory.errors import InputError

    try:
        cols = as_columns(records)
    except InputError as exc:
        raise AssertionError(f"the protocol's records: {exc}") from None
    except (TypeError, ValueError, KeyError) as exc:
        raise AssertionError(f"the protocol's records are not records ({exc})") from None
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
