"""A trajectory run's folder: its records file, its summary and ``checkpoint.pt``.

A checkpoint holds what the next iteration needs and the run's settings::

    {"format": 2, "k": K_DONE, "start": NEXT, "done": bool, "settings": {...},
     "vectors": {name: {param: tensor} | None}, **state}

where ``k`` records are final and ``start`` is the next iteration to compute; ``state`` is what the
run's body keeps beside its vectors (scalar states, ``elapsed_s``). It is written atomically
(:func:`crosscurv.numeric.records.atomic_torch_save`) at ``k = 0``, on a cadence (:class:`Cadence`)
and always before the last iteration, so that a complete run can be *extended*: its last checkpoint
is then marked ``done`` (:meth:`RunFolder.mark_done`). Without ``resume`` a folder that already
holds a run is refused (partial output is never overwritten).
"""

from __future__ import annotations

import os
import time

import torch

from ..file_save import mapped_sources
from ..protocol_checks import ProtocolError
from ..records import CHECKPOINT_FILE, RecordsError, atomic_torch_save, count_rows
from ..run_folder import ResumeError, check_resumable, one_line, unreadable_checkpoint

__all__ = ["RunFolder", "Cadence", "CHECKPOINT_SECONDS", "FORMAT"]

#: Default checkpoint cadence: at most one checkpoint per this many seconds (and one before the last
#: iteration).
CHECKPOINT_SECONDS = 60.0
#: A checkpoint is also deferred while the time since the last one is under this many times what it
#: cost.
_CHECKPOINT_COST_FACTOR = 20.0
#: Checkpoint format (an older one is refused in one line: its run cannot be continued).
FORMAT = 2


class RunFolder:
    """The files of one run in ``path``: ``records`` (named ``records_file``), ``summary``
    (``summary_file``) and ``checkpoint``."""

    def __init__(self, path: str, records_file: str, summary_file: str):
        self.path = str(path)
        self.records = os.path.join(self.path, records_file)
        self.summary = os.path.join(self.path, summary_file)
        self.checkpoint = os.path.join(self.path, CHECKPOINT_FILE)

    def check_fresh(self) -> None:
        """:class:`ProtocolError` where the folder already holds a run (a checkpoint, or records
        with rows or of another kind); a header-only records file (a run killed before ``k = 0``) is
        removed."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ProtocolError(f"output path {self.path} exists and is not a directory")
        if os.path.exists(self.checkpoint) or (
            os.path.exists(self.records) and self._rows_or_foreign()
        ):
            name = os.path.basename(self.records)
            raise ProtocolError(
                f"{self.path} already holds a run ({name} or {CHECKPOINT_FILE}); "
                "use --resume to continue it or choose another --out"
            )
        if os.path.exists(self.records):  # header only: nothing to lose
            os.remove(self.records)

    def _rows_or_foreign(self) -> bool:
        """The records file holds at least one row, or is not a crosscurv records file."""
        try:
            return count_rows(self.records) > 0
        except (RecordsError, UnicodeDecodeError, ValueError):
            return True

    def create(self) -> None:
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:
            raise ProtocolError(
                f"cannot create output directory {self.path}: {exc.strerror}"
            ) from None

    def load_checkpoint(self, device, check=None) -> dict:
        """The checkpoint, checked to be a crosscurv checkpoint (:data:`FORMAT`, its entries
        present) and by ``check(ck)`` (which raises ``KeyError``, ``TypeError`` or ``ValueError``
        for a malformed one); else a one-line :class:`ResumeError`."""
        check_resumable(self.path)
        bad = unreadable_checkpoint(self.checkpoint)
        try:
            ck = torch.load(self.checkpoint, map_location=device, weights_only=True)
        except Exception as exc:  # truncated, undecodable, or pickled foreign objects
            raise ResumeError(f"{bad} ({type(exc).__name__}: {one_line(exc)})") from None
        if isinstance(ck, dict) and isinstance(ck.get("format"), int) and ck["format"] < FORMAT:
            raise ResumeError(
                f"{self.checkpoint} was written by an older crosscurv (checkpoint format "
                f"{ck['format']}); it cannot be continued: rerun it"
            )
        if not isinstance(ck, dict) or ck.get("format") != FORMAT:
            raise ResumeError(f"{bad} (unknown format)")
        try:
            for key in ("k", "start", "done", "settings", "vectors"):
                ck[key]  # noqa: B018 (presence)
            if not isinstance(ck["settings"], dict):
                raise TypeError("settings")
            if check is not None:
                check(ck)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResumeError(f"{bad} (missing or malformed entry {one_line(exc)})") from None
        return ck

    def save_checkpoint(
        self,
        k: int,
        start: int,
        settings: dict,
        vectors: dict,
        state: dict,
        sources=None,
        done: bool = False,
    ) -> None:
        """Atomic checkpoint (module docstring); ``sources`` as
        :func:`crosscurv.numeric.records.atomic_torch_save`."""
        atomic_torch_save(
            {
                "format": FORMAT,
                "k": k,
                "start": start,
                "done": done,
                "settings": settings,
                "vectors": vectors,
                **state,
            },
            self.checkpoint,
            sources=sources,
        )

    def mark_done(self, device, settings: dict, elapsed_s: float) -> None:
        """Mark the last checkpoint (the state before the last iteration) ``done``, with
        ``settings``. On the CPU it is mapped, not read, and its vectors are copied file to file."""
        cpu = torch.device(device).type == "cpu"
        ck = torch.load(self.checkpoint, map_location=device, weights_only=True, mmap=cpu)
        ck["done"] = True
        ck["settings"] = settings
        ck["elapsed_s"] = elapsed_s
        atomic_torch_save(
            ck, self.checkpoint, sources=mapped_sources(ck, self.checkpoint) if cpu else None
        )


class Cadence:
    """When to checkpoint after iteration ``k``: every ``every`` iterations, or (``every`` ``None``)
    once :data:`CHECKPOINT_SECONDS` have passed and the last save cost under 1/20 of the time since;
    always before the last iteration ``iters``."""

    def __init__(self, every: int | None, iters: int):
        self.every, self.iters = every, iters
        self.last_save = time.perf_counter()
        self.save_cost = 0.0

    def due(self, k: int) -> bool:
        if self.every is not None:
            due = k % self.every == 0
        else:
            since = time.perf_counter() - self.last_save
            due = since >= CHECKPOINT_SECONDS and since >= _CHECKPOINT_COST_FACTOR * self.save_cost
        return due or k + 1 == self.iters

    def saved(self, started: float) -> None:
        """A checkpoint begun at ``started`` (``time.perf_counter()``) was just written."""
        self.last_save = time.perf_counter()
        self.save_cost = self.last_save - started
