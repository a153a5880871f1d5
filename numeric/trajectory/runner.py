"""The trajectory runner: the loop over iterations ``k = start..K`` of a run's *body* and everything
around it that does not depend on what the body computes.

A body advances its trajectories (the JC run ``theta^{k+1} = theta^k - eta g(theta^k)`` and, for the
protocol, the pattern-``S`` run) and hands the record of each iteration ``k >= 1`` to
:meth:`Run.emit`, which passes it to the observers in order: the records kept in memory, the records
file (flushed), ``on_record`` and ``progress(k, K)``.  The runner owns the rest, once for every kind
of run:

* a fresh run: the folder checked to hold no run, created, checkpointed at ``k = 0``;
* resume: the checkpoint loaded and checked, the settings compared
  (:func:`crosscurv.numeric.trajectory.settings.check_resume_settings`), the records file cut back
  to the checkpoint's ``k`` (:meth:`RecordsKind.keep`) and the run recomputed from there; a larger
  ``iters`` *extends* a complete run from its last checkpoint (the state before its last iteration);
* checkpoints after iteration ``k`` when due (:class:`crosscurv.numeric.trajectory.folder.Cadence`),
  the last one marked done when the run completes;
* the status: ``"complete"``, ``"diverged"`` (the body raised :class:`Diverged`; every record before
  stays on disk) or, for any exception (an interrupt, an ``on_record`` that raised), the body's
  ``"interrupted"`` summary written before the exception propagates.

A body provides ``settings`` (the run's, checkpointed), ``iteration(k, run)``, ``vectors()`` and
``state()`` (what a checkpoint holds beside them), ``sources(vectors)`` (or ``None``: where the
vectors' bytes may be copied from, :func:`crosscurv.numeric.records.atomic_torch_save`) and
``summary(run, status, message, diverged_at)`` (the summary dict, or ``None`` where the body writes
none at that stage).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..records import RecordWriter, write_summary
from .folder import Cadence, RunFolder

__all__ = ["Diverged", "RecordsKind", "Run", "Outcome"]


class Diverged(Exception):
    """Iteration ``k`` met a non-finite loss: the run stops there."""

    def __init__(self, k: int, message: str):
        super().__init__(message)
        self.k = k


#: what a loss raises outside its domain (a Cholesky factor of a matrix not positive definite, a
#: parameter outside a distribution's support); a shape or type error raises at ``theta^0`` already
UNDEFINED = (RuntimeError, ValueError, ArithmeticError)


def outside_domain(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a loss at a point, says the point is outside the loss's domain
    (:data:`UNDEFINED`, out-of-memory errors excepted)."""
    import torch

    return isinstance(exc, UNDEFINED) and not isinstance(exc, torch.OutOfMemoryError)


def raised_text(exc: BaseException) -> str:
    """``"LinAlgError: linalg.cholesky: The factorization could not be completed ..."``: the
    exception's type and the first line of its message, at most 100 characters."""
    text = str(exc).strip()
    first = text.splitlines()[0].split(" (")[0] if text else ""
    return f"{type(exc).__name__.lstrip('_')}: {first[:100]}"


@contextmanager
def diverged_outside_domain(k: int, where: str, initial: bool = False):
    """Inside it, a loss that raises outside its domain (:func:`outside_domain`) stops the run at
    ``k`` as :class:`Diverged`, ``"diverged at k=K: the loss raised WHERE (what it raised)"``;
    ``initial``: the point is ``theta^0``, where the error propagates (the task is at fault, not the
    run); other errors propagate."""
    try:
        yield
    except Exception as exc:
        if initial or not outside_domain(exc):
            raise
        raise Diverged(k, f"diverged at k={k}: the loss raised {where} "
                          f"({raised_text(exc)})") from exc


@dataclass(frozen=True)
class RecordsKind:
    """How one kind of record goes to its file: the columns, the rows of one record, and
    ``keep(path, k)``: the file cut back to its first ``k`` iterations (created when missing), whose
    records it returns."""

    fields: Sequence[str]
    rows: Callable[[dict], list]
    keep: Callable[[str, int], list]


@dataclass
class Outcome:
    """How a run ended: ``status`` (``"complete"`` or ``"diverged"``), one-line ``message``,
    ``diverged_at`` (the iteration whose loss was not finite)."""

    status: str
    message: str = ""
    diverged_at: int | None = None


@dataclass
class Run:
    """One run's loop state: the folder (``None``: in memory), the records so far, the clock.

    ``records`` holds the records ``k = 1..``; ``computed`` counts those computed in this session;
    ``resumed_from`` is the checkpoint's ``k`` on a resumed run (else ``None``).
    """

    iters: int
    folder: RunFolder | None
    kind: RecordsKind
    every: int | None = None
    on_record: Callable[[dict], None] | None = None
    progress: Callable[[int, int], None] | None = None
    records: list = field(default_factory=list)
    resumed_from: int | None = None
    prior_elapsed: float = 0.0
    computed: int = 0
    t0: float = field(default_factory=time.perf_counter)
    writer: RecordWriter | None = None

    def clock(self) -> float:
        """Seconds of the run over every session."""
        return self.prior_elapsed + time.perf_counter() - self.t0

    def timing(self) -> dict:
        el = time.perf_counter() - self.t0
        return {
            "resumed_from": self.resumed_from,
            "iterations_this_session": self.computed,
            "elapsed_s_this_session": el,
            "iterations_per_s": self.computed / el if el > 0 and self.computed else None,
            "elapsed_s_total": self.clock(),
        }

    def emit(self, k: int, record: dict) -> None:
        """The record of iteration ``k`` to the observers (module docstring)."""
        self.records.append(record)
        self.computed += 1
        if self.writer is not None:
            self.writer.write_rows(self.kind.rows(record))
        if self.on_record is not None:
            self.on_record(record)
        if self.progress is not None:
            self.progress(k, self.iters)

    # -- checkpoints -------------------------------------------------------------------------
    def resume_point(self, ck: dict) -> tuple[bool, int, int]:
        """``(done, k0, start)`` of a loaded checkpoint for this run's ``iters``: a done run asked
        for its own ``iters`` has nothing left; otherwise ``k0`` records are kept and ``start`` is
        next."""
        done = bool(ck["done"]) and self.iters == ck["settings"].get("iters")
        k0 = ck["settings"]["iters"] if done else int(ck["k"])
        self.resumed_from = k0
        self.prior_elapsed = float(ck.get("elapsed_s", 0.0))
        self.records = self.kind.keep(self.folder.records, k0)
        return done, k0, int(ck["start"])

    def checkpoint(self, body, k: int, start: int) -> None:
        t = time.perf_counter()
        vectors = body.vectors()
        self.folder.save_checkpoint(
            k,
            start,
            body.settings,
            vectors,
            {**body.state(), "elapsed_s": self.clock()},
            sources=body.sources(vectors),
        )
        self.cadence.saved(t)

    # -- the loop ---------------------------------------------------------------------------
    def execute(self, body, start: int, done: bool, device) -> Outcome:
        """Iterations ``start..iters`` of ``body`` (module docstring); on a fresh run with a folder
        the checkpoint of ``k = 0`` first."""
        folder = self.folder
        self.cadence = Cadence(self.every, self.iters)
        if folder is not None:
            if self.resumed_from is None:
                self.checkpoint(body, 0, 0)
            self.writer = RecordWriter(
                folder.records, append=self.resumed_from is not None, fields=self.kind.fields
            )
            self._write_summary(body, "running", "running", None)
        out = Outcome("complete")
        try:
            if not done:
                try:
                    for k in range(start, self.iters + 1):
                        body.iteration(k, self)
                        if k < self.iters and folder is not None and self.cadence.due(k):
                            self.checkpoint(body, k, k + 1)
                    if folder is not None:
                        folder.mark_done(device, body.settings, self.clock())
                except Diverged as exc:
                    out = Outcome("diverged", str(exc), exc.k)
        except BaseException as exc:
            note = (
                "interrupted"
                if isinstance(exc, KeyboardInterrupt)
                else f"interrupted: {type(exc).__name__}: {exc}"
            )
            self._write_summary(body, "interrupted", note, None)
            raise
        finally:
            if self.writer is not None:
                self.writer.close()
        return out

    def _write_summary(self, body, status: str, message: str, diverged_at) -> None:
        if self.folder is None:
            return
        summary = body.summary(self, status, message, diverged_at)
        if summary is not None:
            write_summary(self.folder.summary, summary)
