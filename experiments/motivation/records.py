"""Streamed CSV tables of the motivation runs (``records.csv``, ``probes.csv``).

The same conventions as :mod:`crosscurv.numeric.records` (whose writer is fixed to the
protocol's columns): a header line, one row per step written and flushed as
soon as it is computed, floats in round-trip ``repr`` form (``nan`` for a
value not measured at that step), a torn last line from a kill ignored, and
rewrites through :func:`crosscurv.numeric.records.atomic_write_text`.
"""

from __future__ import annotations

import io
import os
from typing import Mapping, Sequence

from crosscurv.numeric.records import RecordsError, atomic_write_text

__all__ = ["TableWriter", "read_table", "truncate_table", "table_columns"]


def _format(row: Mapping, fields: Sequence[str]) -> str:
    return ",".join(str(int(row[f])) if f == "k" else repr(float(row[f])) for f in fields)


class TableWriter:
    """Append rows with the columns ``fields`` to ``path`` (created with a header unless ``append``)."""

    def __init__(self, path: str, fields: Sequence[str], append: bool = False):
        self.path, self.fields = path, tuple(fields)
        header = ",".join(self.fields)
        if append:
            with open(path, "r", encoding="utf-8") as fh:
                first = fh.readline().strip()
            if first != header:
                raise RecordsError(f"{path}: unexpected header {first!r} (expected {header!r})")
            self._fh = open(path, "a", encoding="utf-8", newline="")
        else:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                raise RecordsError(f"{path} already exists; refusing to overwrite it (use --resume)")
            self._fh = open(path, "w", encoding="utf-8", newline="")
            self._fh.write(header + "\n")
            self._fh.flush()

    def write(self, row: Mapping) -> None:
        self._fh.write(_format(row, self.fields) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def read_table(path: str) -> tuple[list[str], list[dict]]:
    """``(fields, rows)``: every complete row of ``path`` (``k`` as int, the rest floats)."""
    if not os.path.exists(path):
        raise RecordsError(f"{path} does not exist")
    with open(path, "r", encoding="utf-8") as fh:
        text = fh.read()
    lines = text.split("\n")[:-1]  # the piece after the last newline is torn or empty
    if not lines:
        raise RecordsError(f"{path}: empty records file")
    fields = lines[0].strip().split(",")
    rows = []
    for line in lines[1:]:
        parts = line.strip().split(",")
        if len(parts) != len(fields):
            raise RecordsError(f"{path}: expected {len(fields)} columns in row {line.strip()!r}")
        try:
            rows.append({f: (int(p) if f == "k" else float(p)) for f, p in zip(fields, parts)})
        except ValueError:
            raise RecordsError(f"{path}: not a number in row {line.strip()!r}") from None
    return fields, rows


def truncate_table(path: str, n: int) -> None:
    """Keep the header and the first ``n`` rows of ``path`` (atomic rewrite)."""
    fields, rows = read_table(path)
    if len(rows) < n:
        raise RecordsError(f"{path} holds {len(rows)} complete rows, the checkpoint needs {n}")
    buf = io.StringIO()
    buf.write(",".join(fields) + "\n")
    for r in rows[:n]:
        buf.write(_format(r, fields) + "\n")
    atomic_write_text(path, buf.getvalue())


def table_columns(rows: Sequence[Mapping], fields: Sequence[str]) -> dict:
    """``{field: [values]}`` (column view)."""
    return {f: [r[f] for r in rows] for f in fields}
