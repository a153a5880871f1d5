"""Bring run folders written before :func:`crosscurv.numeric.gap.reconcile` up to date, in place.

    python -m crosscurv.experiments.conformance.upgrade_records DIR [DIR ...] [--dry-run]

Each ``DIR`` is a run folder (``records.csv`` and ``summary.json``) or a folder
searched recursively for them.  Earlier versions recorded the 5-point segment
rule's ``(gap, gap_err)`` as they came; a run now records
``reconcile(gap, gap_err, loss_s, loss_jc, dtype)``, a function of four columns
every record holds.  So an older folder is brought up to date without
recomputing anything (where the current code skips the segment integral, the
older one computed it; the rule records the plain difference there either way):
each row's ``gap`` and ``gap_err`` are replaced by
their reconciled values, and the summary's ``metrics`` and
``bound_bk_coverage`` (which count undecided iterations) recomputed from the
new columns.  The result is what the current code writes for the same run
(tests/experiments/test_upgrade_records.py runs both).  ``reconcile`` is
idempotent, so upgrading twice changes nothing.  Records without ``gap_err``
(the eight-column files of the first versions) are left alone: their ``gap``
is already the plain difference.

Prints one line per run folder (rows whose gap became the plain difference, and
among them those whose segment value the losses refute);
exit code 2 with one line for a folder that is not a run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from crosscurv.numeric.gap import difference_error, reconcile
from crosscurv.numeric.metrics import run_metrics
from crosscurv.numeric.records import (ESTIMATES, FIELDS, PREVIOUS_FIELDS, RECORDS_FILE, SUMMARY_FILE, RecordsError, read_records, read_summary,
                             records_columns, write_records, write_summary)

__all__ = ["upgrade_run", "run_folders", "main"]


def _is_protocol_run(folder: str) -> bool:
    if not os.path.isfile(os.path.join(folder, SUMMARY_FILE)):
        return False
    try:
        with open(os.path.join(folder, RECORDS_FILE), encoding="utf-8") as fh:
            return fh.readline().strip() in (",".join(FIELDS), ",".join(PREVIOUS_FIELDS))
    except OSError:
        return False


def run_folders(path: str) -> list[str]:
    """``path`` if it is a protocol run folder, else those below it (sorted); ``RecordsError`` if none.

    Folders whose ``records.csv`` has other columns (the motivation study's training curves) are skipped.
    """
    if not os.path.isdir(path):
        raise RecordsError(f"{path}: not a folder")
    found = sorted(root for root, _, _ in os.walk(path) if _is_protocol_run(root))
    if not found:
        raise RecordsError(f"{path}: no protocol run folder ({RECORDS_FILE} with the protocol's columns and "
                           f"{SUMMARY_FILE}) in it")
    return found


def upgrade_run(run_dir: str, dry_run: bool = False) -> tuple[int, int, int]:
    """Reconcile every row's gap of one run folder.

    Returns:
        ``(changed, plain, contradicted)``: rows changed, rows whose gap is now the plain difference,
        and among those the rows whose segment value was more than ``gap_err + r`` from it (its error
        estimate refuted by the losses) rather than only less precise.
    """
    records_path, summary_path = os.path.join(run_dir, RECORDS_FILE), os.path.join(run_dir, SUMMARY_FILE)
    rows = read_records(records_path)
    summary = read_summary(summary_path)
    dtype = (summary.get("settings") or {}).get("dtype", "float32")
    changed = plain = contradicted = 0
    for row in rows:
        if math.isnan(row["gap_err"]):
            continue
        new = reconcile(row["gap"], row["gap_err"], row["loss_s"], row["loss_jc"], dtype)
        d, r = row["loss_s"] - row["loss_jc"], difference_error(row["loss_s"], row["loss_jc"], dtype)
        if new == (d, r):
            plain += 1
            contradicted += abs(row["gap"] - d) > row["gap_err"] + r
        if new != (row["gap"], row["gap_err"]):
            changed += 1
            row["gap"], row["gap_err"] = new
    if changed and not dry_run:
        write_records(records_path, rows)
        summary["metrics"], summary["bound_bk_coverage"] = run_metrics(records_columns(rows), ESTIMATES)
        write_summary(summary_path, summary)
    return changed, plain, contradicted


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m crosscurv.experiments.conformance.upgrade_records", description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR", help="run folders, or folders holding them")
    ap.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")
    args = ap.parse_args(argv)
    try:
        runs = [run for d in args.dirs for run in run_folders(d)]
        for run in runs:
            rows = len(read_records(os.path.join(run, RECORDS_FILE)))
            changed, plain, contradicted = upgrade_run(run, args.dry_run)
            print(f"{run}: {changed} of {rows} rows changed; {plain} now the plain difference loss_s - loss_jc, "
                  f"{contradicted} of them where it refutes the segment estimate" + (" (dry run)" if args.dry_run else ""))
    except RecordsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
