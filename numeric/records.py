"""The run directory of the controlled protocol: ``records.csv``, ``summary.json``,
``checkpoint.pt``.

Per-iteration record (docs/protocol.md), one CSV row per iteration ``k = 1..K`` with the columns of
:data:`FIELDS`:

* ``k``: iteration (number of complete block sweeps);
* ``loss_jc``, ``loss_s``: measured losses ``L(theta_JC^k)``, ``L(theta_S^k)``;
* ``gap``: the measured ``L(theta_S^k) - L(theta_JC^k)``, without the cancellation of subtracting
  the two losses: the integral of the gradient along the segment ``theta_JC^k -> theta_S^k``
  (:func:`crosscurv.numeric.gap.segment_gap`, 5-point Gauss-Lobatto, float64 accumulation) where
  that is the more precise measurement and agrees with ``loss_s - loss_jc``, else that difference
  (:func:`crosscurv.numeric.gap.reconcile`);
* ``recursive``: Theorem 2 (loss evolution recursion) with the measured ``Delta theta^{k-1}``;
* ``cumulative``: Theorem 3 (signed cumulative terminal comparison);
* ``jc_only``: the cumulative estimate built from the JC trajectory alone;
* ``bound_bk``: Theorem 3's magnitude bound ``G b_k + L b_k^2 / 2``;
* ``sharpness``: the power-iteration estimate ``p_k^T H_JC^k p_k`` of the largest eigenvalue of
  ``H_JC^k`` (``eta * sharpness`` is the regime indicator; ``2`` is the edge of stability);
* ``gap_err``: an error bound of ``gap`` (the segment rule's quadrature and round-off estimate, or
  the losses' rounding for a plain difference); an iteration with ``|gap| <= gap_err`` is
  *undecided* (:mod:`crosscurv.numeric.metrics`).

* ``lambda_max``, ``lambda_min``: the largest and the most negative eigenvalue of ``H_JC^k``,
  converged to a relative residual ``crosscurv.numeric.estimates.SHARPNESS_TOL`` by Lanczos on HVPs
  (:func:`crosscurv.numeric.estimates.track_extremes`; ``eta * lambda_max`` is the converged regime
  indicator); ``sharpness_hvps``: the Hessian-vector products they cost at ``k``;
* ``recursive_err``, ``cumulative_err``, ``jc_only_err``: a-posteriori error estimates of the three
  estimates (:mod:`crosscurv.numeric.error_estimates`; for optimizer runs the bar of the defect
  interval of the records before, ``inf`` until it has ten);
* ``recursive_cert``, ``cumulative_cert``, ``jc_only_cert``: the certified winner (``1`` JC, ``-1``
  the scheme ``S``, ``0`` not certified: ``|estimate| <= err`` or ``eta * lambda_max >= 2``; for
  optimizer runs ``lambda_max`` at or beyond the optimizer's own edge of stability, and Adam never).

Records an older crosscurv wrote (the first columns of :data:`FIELDS` only, :func:`is_older_header`)
are refused in one line: recompute the run.  Records of another implementation are read by
:func:`read_columns` (:data:`CORE_FIELDS` and any optional columns).

Floats are written with ``repr(float(x))`` (shortest round-trip form; ``nan`` and ``inf`` included),
so :func:`read_records` returns exactly the values that were computed. Rows are flushed as they are
written, so a killed run leaves every complete row on disk. Files that are replaced (the checkpoint,
the summary, a truncated CSV) are written to a temporary file in the same folder and moved into
place with :func:`os.replace`, so a kill never leaves a torn file behind.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Mapping, Sequence

from crosscurv.theory.errors import RecordsError

__all__ = [
    "FIELDS",
    "CORE_FIELDS",
    "is_older_header",
    "ERROR_COLUMNS",
    "CERT_COLUMNS",
    "ESTIMATES",
    "RECORDS_FILE",
    "SUMMARY_FILE",
    "CHECKPOINT_FILE",
    "make_record",
    "RecordsError",
    "RecordWriter",
    "format_row",
    "parse_row",
    "read_records",
    "read_columns",
    "read_text",
    "write_records",
    "count_rows",
    "truncate_records",
    "atomic_write_text",
    "atomic_torch_save",
    "write_summary",
    "read_summary",
    "json_safe",
    "records_columns",
]

#: CSV columns, in order.
FIELDS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk",
          "sharpness", "gap_err", "lambda_max", "lambda_min", "sharpness_hvps", "recursive_err",
          "cumulative_err", "jc_only_err", "recursive_cert", "cumulative_cert", "jc_only_cert")
#: The columns every records file holds, crosscurv's or another implementation's
#: (:func:`read_columns`): the
#: losses, the measured gap, the paper's three estimates and Theorem 3's bound.
CORE_FIELDS = FIELDS[:8]
#: Signed estimates of ``gap`` (the columns the paper's metrics apply to).
ESTIMATES = ("recursive", "cumulative", "jc_only")
#: ``{estimate: its error column}`` and ``{estimate: its certified-winner column}``
#: (:mod:`crosscurv.numeric.error_estimates`).
ERROR_COLUMNS = {e: f"{e}_err" for e in ESTIMATES}
CERT_COLUMNS = {e: f"{e}_cert" for e in ESTIMATES}

RECORDS_FILE = "records.csv"
SUMMARY_FILE = "summary.json"
CHECKPOINT_FILE = "checkpoint.pt"

_HEADER = ",".join(FIELDS)


def make_record(k: int, **values) -> dict:
    """A record dict with the keys of :data:`FIELDS` in order (``k`` int, the rest Python floats).

    The fields after :data:`CORE_FIELDS` default to NaN (not measured).

    Raises:
        KeyError: a field of :data:`CORE_FIELDS` missing; ``ValueError``: an unknown field.
    """
    extra = set(values) - set(FIELDS[1:])
    if extra:
        raise ValueError(f"unknown record fields: {sorted(extra)}")
    return {"k": int(k), **{f: float(values[f] if f in CORE_FIELDS else values.get(f, math.nan))
                            for f in FIELDS[1:]}}


def format_row(record: Mapping, fields: Sequence[str] = FIELDS) -> str:
    """The CSV line (no newline) of a row dict with the columns ``fields``: ``k`` as an integer,
    text as it is (CSV-quoted where it holds a comma or quote), every other value as a float in
    round-trip ``repr`` form (``nan``, ``inf`` included)."""
    cells = [str(int(record[f])) if f == "k" else record[f] if isinstance(record[f], str) else repr(
        float(record[f]))
             for f in fields]
    if not any(("," in c or '"' in c or "\n" in c) for c in cells):
        return ",".join(cells)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    return buf.getvalue()


def parse_row(line: str, where: str = "records.csv") -> dict:
    """Inverse of :func:`format_row`; :class:`RecordsError` for a malformed line."""
    parts = line.strip().split(",")
    if len(parts) != len(FIELDS):
        raise RecordsError(f"{where}: expected {len(FIELDS)} columns, got {len(parts)}: "
                           f"{line.strip()!r}")
    try:
        return make_record(int(parts[0]), **{f: float(p) for f, p in zip(FIELDS[1:], parts[1:])})
    except ValueError:
        raise RecordsError(f"{where}: not a number in row {line.strip()!r}") from None


class RecordWriter:
    """Append rows to a streamed CSV table (a run's ``records.csv`` by default), flushing after
    every row.

    The one writer of every per-iteration table crosscurv streams (the protocol's records, the
    motivation runs' records and probes, advise's ``advice.csv``): a header line, one row per
    :meth:`write` in :func:`format_row` form, flushed as soon as it is written, so a killed run
    leaves every complete row on disk.

    Args:
        path: the CSV file. append: keep the existing rows (the file must start with the header);
            otherwise the file is created with the header (it must not exist or be empty: partial
            output is never overwritten here).
        fields: the columns (default :data:`FIELDS`, the protocol's records).
    """

    def __init__(self, path: str, append: bool = False, fields: Sequence[str] = FIELDS):
        self.path, self.fields = path, tuple(fields)
        header = ",".join(self.fields)
        if append:
            with open(path, "r", encoding="utf-8") as fh:
                first = fh.readline().strip()
            if first != header:
                what = ("a crosscurv records file" if self.fields == FIELDS
                        else f"a table with the columns {header!r}")
                raise RecordsError(f"{path}: not {what} (header {first!r})")
            self._fh = open(path, "a", encoding="utf-8", newline="")
        else:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                raise RecordsError(f"{path} already exists; refusing to overwrite it")
            self._fh = open(path, "w", encoding="utf-8", newline="")
            self._fh.write(header + "\n")
            self._fh.flush()

    def write(self, record: Mapping) -> None:
        self.write_rows([record])

    def write_rows(self, records: Sequence[Mapping]) -> None:
        """Several rows in one write and one flush (the rows of one iteration together)."""
        self._fh.write("".join(format_row(r, self.fields) + "\n" for r in records))
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_text(path: str, what: str = "records file") -> str:
    """The text of ``path`` (UTF-8), or one-line :class:`RecordsError` when it cannot be read.

    Every file the command line reads as text (records, summaries, golden cases) goes through here,
    so a missing, unreadable, binary or wrongly-encoded file is named in one line instead of a
    traceback.
    """
    if not os.path.exists(path):
        raise RecordsError(f"{what} {path} does not exist")
    if os.path.isdir(path):
        raise RecordsError(f"{path} is a directory, not a {what}")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise RecordsError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordsError(
            f"{what} {path} is not UTF-8 text (undecodable byte at offset {exc.start}): "
            "a binary file, or text in another encoding"
        ) from None
    if "\x00" in text:
        raise RecordsError(f"{what} {path} holds NUL bytes: a binary file, not text")
    return text.removeprefix("\ufeff")  # a byte-order mark written by some spreadsheet programs


def is_older_header(header: str) -> bool:
    """Whether ``header`` is the header of records an older crosscurv wrote: the first columns of
    :data:`FIELDS` (at least :data:`CORE_FIELDS`), fewer than this version writes.  Such records are
    refused (one line: recompute the run), never read."""
    names = header.strip().split(",")
    return len(CORE_FIELDS) <= len(names) < len(FIELDS) and tuple(names) == FIELDS[:len(names)]


def _complete_lines(path: str) -> list[str]:
    """Header + complete (newline-terminated) data lines of ``path``."""
    lines = read_text(path).split("\n")
    complete = lines[:-1]  # the last piece has no newline: torn or empty
    header = complete[0].strip() if complete else ""
    if is_older_header(header):
        raise RecordsError(f"{path}: records of an older crosscurv ({header.count(',') + 1} "
                           "columns, not the "
                           f"{len(FIELDS)} of this version); recompute the run with this crosscurv")
    if header != _HEADER:
        raise RecordsError(f"{path}: not a crosscurv records file")
    return complete


def read_records(path: str) -> list[dict]:
    """Every complete row of a run's ``records.csv`` as record dicts (a torn last line from a kill
    is ignored).

    This is the strict reader of the files crosscurv writes (header exactly :data:`FIELDS`);
    :func:`read_columns` reads records written by others.

    Raises:
        RecordsError: missing or undecodable file, wrong header, malformed
            row, or rows whose ``k`` is not ``1, 2, 3, ...``.
    """
    out = []
    for n, line in enumerate(_complete_lines(path)[1:], start=1):
        if not line.strip():
            continue
        rec = parse_row(line, path)
        if rec["k"] != n:
            raise RecordsError(f"{path}: row {n} has k={rec['k']}; rows must be k = 1, 2, 3, ...")
        out.append(rec)
    return out


def read_columns(path: str, columns: Sequence[str] = CORE_FIELDS, optional: Sequence[
        str] = ()) -> dict:
    """Records written by anyone (a user's CSV) as ``{column: [float]}`` (``k`` as ints).

    Columns may come in any order; extra columns are ignored; the last line needs no newline.
    ``nan`` and ``inf`` are accepted as numbers. The ``optional`` columns are read when the header
    has them and left out of the result otherwise.

    Raises:
        RecordsError: file missing, undecodable or empty, a required column
            missing (all named), a non-numeric value (line and column named),
            a non-integer or repeated ``k``.
    """
    text = read_text(path)
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise RecordsError(f"{path}: not a CSV file ({exc})") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise RecordsError(f"{path} is empty (expected a header with columns {', '.join(columns)})")
    header = [c.strip() for c in rows[0]]
    missing = [c for c in columns if c not in header]
    columns = list(columns) + [c for c in optional if c in header and c not in columns]
    if missing:
        raise RecordsError(f"{path}: missing column(s) {', '.join(missing)} (header: "
                           f"{','.join(header)})")
    idx = {c: header.index(c) for c in columns}
    out = {c: [] for c in columns}
    if len(rows) < 2:
        raise RecordsError(f"{path} has a header but no rows")
    for n, row in enumerate(rows[1:], start=2):
        for c in columns:
            i = idx[c]
            cell = row[i].strip() if i < len(row) else ""
            try:
                v = float(cell)
            except ValueError:
                raise RecordsError(
                    f"{path}: line {n}, column {c}: not a number ({cell!r})") from None
            if c == "k":
                if not math.isfinite(v) or v != int(v):
                    raise RecordsError(f"{path}: line {n}: k must be an integer, got {cell!r}")
                v = int(v)
            out[c].append(v)
    if "k" in out:
        seen = set()
        for n, k in enumerate(out["k"], start=2):
            if k in seen:
                raise RecordsError(f"{path}: line {n}: k={k} appears twice")
            seen.add(k)
    return out


def count_rows(path: str) -> int:
    """Number of complete data rows in ``path`` (0 when the file does not exist)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return 0
    return len(read_records(path))


def truncate_records(path: str, k: int) -> None:
    """Keep the header and rows ``1..k`` of ``path`` (atomic rewrite).

    Raises:
        RecordsError: the file holds fewer than ``k`` complete rows.
    """
    rows = read_records(path)
    if len(rows) < k:
        raise RecordsError(f"{path} holds {len(rows)} complete records, the checkpoint needs {k}")
    write_records(path, rows[:k])


def write_records(path: str, rows: Sequence[Mapping]) -> None:
    """Replace ``path`` by the header and ``rows`` (atomic: a kill leaves the old file or the new
    one).
    """
    buf = io.StringIO()
    buf.write(_HEADER + "\n")
    for rec in rows:
        buf.write(format_row(rec) + "\n")
    atomic_write_text(path, buf.getvalue())


def _tmp_path(path: str) -> str:
    return f"{path}.tmp{os.getpid()}"


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and :func:`os.replace`."""
    tmp = _tmp_path(path)
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
    os.replace(tmp, path)


def atomic_torch_save(obj, path: str, sources=None) -> None:
    """``torch.save(obj, path)`` through a temporary file and :func:`os.replace`. ``sources``: the
    storages whose bytes are copied from files
    (:func:`crosscurv.numeric.file_save.save_from_files`)."""
    import torch

    tmp = _tmp_path(path)
    if sources is not None:
        from crosscurv.numeric.file_save import save_from_files

        save_from_files(obj, tmp, sources)
    else:
        with open(tmp, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
    os.replace(tmp, path)


def json_safe(obj):
    """``obj`` with non-finite floats replaced by ``None`` (strict JSON has no NaN/inf)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_summary(path: str, summary: dict) -> str:
    """Write ``summary`` as indented strict JSON (atomic); returns the JSON text."""
    text = json.dumps(json_safe(summary), indent=2, allow_nan=False)
    atomic_write_text(path, text + "\n")
    return text


def read_summary(path: str) -> dict:
    """A run's ``summary.json`` as a dict.

    Raises:
        RecordsError: missing, undecodable or empty file, invalid JSON, or
            JSON that is not an object.
    """
    text = read_text(path, "summary")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RecordsError(f"summary {path} is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise RecordsError(f"summary {path} is not a JSON object (found {type(obj).__name__})")
    return obj


def records_columns(records: Sequence[Mapping]) -> dict:
    """``{field: [values]}`` for a list of record dicts (column view)."""
    return {f: [r[f] for r in records] for f in FIELDS}
