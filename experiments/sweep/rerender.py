"""Render a sweep folder's ``sweep.md`` again from its ``sweep.csv``, without running anything.

``python -m crosscurv.experiments.sweep.rerender FOLDER...``: each folder's rows are read back
(:func:`crosscurv.experiments.sweep.aggregate.read_csv`) and written by
:func:`crosscurv.experiments.sweep.aggregate.write_markdown`, the same renderer ``crosscurv sweep``
uses; only a diverged run's folder is read (where it stood before diverging).
"""

from __future__ import annotations

import os
from crosscurv.experiments.sweep import aggregate

__all__ = ["rerender"]


def rerender(folder: str) -> str:
    """Write ``FOLDER/sweep.md`` again from ``FOLDER/sweep.csv`` (no run is read but the diverged
    ones' last state); returns its path."""
    rows = aggregate.read_csv(os.path.join(folder, "sweep.csv"))
    path = os.path.join(folder, "sweep.md")
    name = os.path.basename(os.path.normpath(folder))
    aggregate.write_markdown(path, rows, title=f"Sweep {name}")
    return path


if __name__ == "__main__":  # pragma: no cover
    import sys

    from crosscurv.experiments.cli.scripts import sweep_rerender

    sys.exit(sweep_rerender())
