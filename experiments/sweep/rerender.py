"""Render a sweep folder's ``sweep.md`` again from its ``sweep.csv``, without running anything.

``python -m crosscurv.experiments.sweep.rerender FOLDER...``: each folder's rows are read back
(:func:`crosscurv.experiments.sweep.aggregate.read_csv`) and written by
:func:`crosscurv.experiments.sweep.aggregate.write_markdown`, the same renderer ``crosscurv sweep``
uses; only a diverged run's folder is read (where it stood before diverging).
"""

from __future__ import annotations

import os
from typing import Sequence

from crosscurv.experiments.sweep import aggregate

__all__ = ["rerender", "main"]


def rerender(folder: str) -> str:
    """Write ``FOLDER/sweep.md`` again from ``FOLDER/sweep.csv`` (no run is read but the diverged
    ones' last state); returns its path."""
    rows = aggregate.read_csv(os.path.join(folder, "sweep.csv"))
    path = os.path.join(folder, "sweep.md")
    name = os.path.basename(os.path.normpath(folder))
    aggregate.write_markdown(path, rows, title=f"Sweep {name}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m crosscurv.experiments.sweep.rerender FOLDER...``: re-render each sweep.md."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m crosscurv.experiments.sweep.rerender",
                                 description="Write each sweep folder's sweep.md again from its "
                                             "sweep.csv.")
    ap.add_argument("folders", nargs="+", metavar="FOLDER")
    args = ap.parse_args(argv)
    for folder in args.folders:
        if not os.path.isfile(os.path.join(folder, "sweep.csv")):
            print(f"error: {folder}: no sweep.csv (not a sweep folder)", file=sys.stderr)
            return 2
        print(rerender(folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
