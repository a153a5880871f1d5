"""Reading the streamed CSV tables of the motivation runs (``records.csv``, ``probes.csv``).

They are written by :class:`crosscurv.numeric.records.RecordWriter` with the runs' own columns: a
header line, one row per step flushed as soon as it is computed, floats in round-trip ``repr`` form
(``nan`` for a value not measured at that step). Here they are read back (a torn last line from a
kill ignored) and cut to a checkpoint through :func:`crosscurv.numeric.records.atomic_write_text`.
"""

from __future__ import annotations

import io
import os
from typing import Mapping, Sequence

from crosscurv.numeric.records import RecordsError, atomic_write_text, format_row

__all__ = ["read_table", "truncate_table", "table_columns"]


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
        buf.write(format_row(r, fields) + "\n")
    atomic_write_text(path, buf.getvalue())


def table_columns(rows: Sequence[Mapping], fields: Sequence[str]) -> dict:
    """``{field: [values]}`` (column view)."""
    return {f: [r[f] for r in rows] for f in fields}
