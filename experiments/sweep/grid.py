"""Expansion of a :class:`~crosscurv.experiments.sweep.spec.SweepSpec` into runs.

Each grid point is one ``crosscurv run`` with its own folder ``OUT/runs/<name>/``. Names are
readable and stable (a rerun of the same grid finds the same folders): the task, then every setting
that was given, e.g. ``mlp-smoke-lr0.05-seed1-gs``; a point whose readable name collides with
another's (two patterns that slug alike) gets a short hash of its settings.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass

from crosscurv.experiments.sweep.spec import AXES, SweepSpec

__all__ = ["RunPoint", "expand", "run_name"]


@dataclass(frozen=True)
class RunPoint:
    """One grid point: the settings of one ``crosscurv run``.

    ``None`` means "the run's own default" (preset, learning rate, pattern, iterations, dtype).
    """

    task: str
    preset: str | None
    lr: float | None
    seed: int
    pattern: str | None
    iters: int | None = None
    dtype: str | None = None
    name: str = ""

    def settings(self) -> dict:
        """The requested settings (JSON-able)."""
        return {"task": self.task, "preset": self.preset, "lr": self.lr, "seed": self.seed,
                "pattern": self.pattern, "iters": self.iters, "dtype": self.dtype}

    def description(self, threads: int | None = None):
        """The :class:`crosscurv.experiments.runs.RunDescription` of this run (with ``threads``
        intra-op threads)."""
        from crosscurv.experiments.runs import RunDescription

        return RunDescription(self.task, preset=self.preset, pattern=self.pattern,
                              lr=None if self.lr is None else float(self.lr), iters=self.iters,
                              seed=self.seed, dtype=self.dtype, threads=threads)

    def argv(self, out_dir: str, resume: bool = False) -> list[str]:
        """The ``crosscurv`` command line of this run (``crosscurv run ... --out OUT_DIR
        [--resume]``).
        """
        return ["run", *self.description().to_args(), "--out", str(out_dir)] + (["--resume"]
                                                                                if resume else [])


def _slug(text: str) -> str:
    s = text.replace("<-", "from").replace(":", "_")
    return re.sub(r"[^A-Za-z0-9_.]+", "_", s).strip("_") or "x"


def _task_label(task: str) -> str:
    if ":" not in task:
        return task
    where, _, attr = task.rpartition(":")
    base = os.path.basename(where)
    if base.endswith(".py"):
        base = base[:-3]
    return f"{base}_{attr}"


def run_name(p: RunPoint) -> str:
    """Readable folder name of a point (without the collision hash)."""
    parts = [_slug(_task_label(p.task))]
    if p.preset is not None:
        parts.append(p.preset)
    if p.lr is not None:
        parts.append(f"lr{float(p.lr)!r}")
    parts.append(f"seed{p.seed}")
    if p.pattern is not None:
        parts.append(_slug(p.pattern))
    if p.iters is not None:
        parts.append(f"K{p.iters}")
    if p.dtype is not None:
        parts.append(p.dtype)
    return "-".join(parts)


def _digest(p: RunPoint) -> str:
    return hashlib.sha1(json.dumps(p.settings(), sort_keys=True).encode()).hexdigest()[:8]


def expand(spec: SweepSpec) -> list[RunPoint]:
    """All grid points, in the order tasks x presets x lrs x seeds x patterns, each with a unique
    name.
    """
    points = [
        RunPoint(task=t, preset=pr, lr=lr, seed=s, pattern=pa, iters=spec.iters, dtype=spec.dtype)
        for t, pr, lr, s, pa in itertools.product(*(getattr(spec, a) for a in AXES))
    ]
    names = [run_name(p) for p in points]
    clash = {n for n in names if names.count(n) > 1}
    out = []
    for p, n in zip(points, names):
        if n in clash:
            n = f"{n}-{_digest(p)}"
        out.append(RunPoint(**{**p.settings(), "name": n}))
    return out
