"""The JC run of :func:`crosscurv.numeric.advice.advise` as a body of the trajectory runner
(:mod:`crosscurv.numeric.trajectory`): per iteration the candidates' predictions at ``theta_JC^k``
(:mod:`crosscurv.numeric.advice_steps`) and the JC step; the runner keeps ``advice.csv``, the
checkpoint, resume and extension.

A checkpoint holds the JC iterate ``theta``, every candidate's ``y`` (``y:NAME``), the update rule's
vectors (``yhat``, optimizer states), the power vector ``p`` and, beside them, ``lambda_max0`` (the
converged ``lambda_max(H_JC^0)``) and ``check_k0`` (the one-step check at ``theta^0``).
"""

from __future__ import annotations

import csv
import math
import os
from typing import Mapping, Sequence

from . import tree
from .error_estimates import in_regime, regime_so_far
from .estimates import init_power_vector, power_step, solve_extremes
from .records import atomic_write_text, format_row, read_text
from .trajectory import Diverged, RecordsKind, Run, diverged_outside_domain

__all__ = ["COLUMNS", "AdviceRun", "advice_records", "read_advice_records", "inside_regime"]

#: Columns of ``advice.csv`` (one row per iteration and candidate, the JC row all zeros).
COLUMNS = ("k", "pattern", "loss_jc", "sharpness", "estimate", "error", "corrected", "one_step")
#: The columns of an older crosscurv's ``advice.csv`` (no ``sharpness``): refused in one line.
_OLDER_COLUMNS = ("k", "pattern", "loss_jc", "estimate", "error", "corrected", "one_step")
#: A row's per-candidate entries, in the order of :data:`COLUMNS`.
_PARTS = ("estimates", "errors", "corrected", "one_step")


def _rows(row: Mapping) -> list[dict]:
    """The ``advice.csv`` rows of one iteration's ``row`` (:data:`COLUMNS`), one per candidate."""
    return [dict(zip(COLUMNS, (row["k"], name, row["loss_jc"], row["sharpness"],
                               *(row[p][name] for p in _PARTS))))
            for name in row["estimates"]]


def read_advice_records(path: str, error=ValueError) -> list[dict]:
    """The complete rows of ``advice.csv`` as per-iteration dicts (``k`` ascending; a torn last line
    is ignored); ``error`` (one line) for a file that is not advice records or a malformed row."""
    text = read_text(path, "advice records")
    lines = text.split("\n")[:-1]
    if lines and lines[0] == ",".join(_OLDER_COLUMNS):
        raise error(f"{path}: advice records of an older crosscurv (no sharpness column): advise "
                    "again into a new folder")
    if not lines or lines[0] != ",".join(COLUMNS):
        raise error(f"{path}: not a crosscurv advice records file")
    out: list[dict] = []
    try:
        for row in csv.reader(lines[1:]):
            k, name = int(row[0]), row[1]
            loss_jc, sharp, *vals = (float(x) for x in row[2:8])
            if not out or out[-1]["k"] != k:
                if out and k != out[-1]["k"] + 1:
                    raise ValueError(f"k={k} after k={out[-1]['k']}")
                out.append({"k": k, "loss_jc": loss_jc, "sharpness": sharp,
                            **{p: {} for p in _PARTS}})
            for p, v in zip(_PARTS, vals):
                out[-1][p][name] = v
    except (ValueError, IndexError) as exc:
        raise error(f"{path}: malformed row ({exc})") from None
    return out


def advice_records(names: Sequence[str], error) -> RecordsKind:
    """``advice.csv`` for the runner: a row per candidate ``names``; on resume the file is cut back
    to its first complete iterations (every candidate present)."""

    def keep(path: str, k: int) -> list:
        rows = read_advice_records(path, error) if os.path.exists(path) else []
        rows = [r for r in rows if list(r["estimates"]) == list(names)]
        if len(rows) < k:
            raise error(f"{path} holds {len(rows)} complete iterations, the checkpoint needs {k}")
        rows = rows[:k]
        atomic_write_text(path, ",".join(COLUMNS) + "\n" + "".join(
            format_row(line, COLUMNS) + "\n" for r in rows for line in _rows(r)))
        return rows

    return RecordsKind(COLUMNS, _rows, keep)


def inside_regime(rows: Sequence[Mapping], lr: float) -> list[bool]:
    """Per row: the JC run has stayed below the edge of stability so far (``eta * sharpness_j < 2``
    for every ``j <= k``, :func:`crosscurv.numeric.error_estimates.regime_so_far`)."""
    return regime_so_far([lr * float(r["sharpness"]) for r in rows])


class AdviceRun:
    """The body: the JC iterate, the candidates' states and the regime gate (module docstring).

    ``active``: the non-JC :class:`crosscurv.numeric.advice_steps.Candidate`; ``columns``: the fresh
    blocks' readers (``{j: [param keys]}``); ``rule``: the update rule's steps.
    """

    def __init__(self, task, lr: float, settings: dict, engine, rule, keys, columns, active,
                 reference: str, seed: int):
        self.task, self.lr, self.settings, self.engine, self.rule = task, lr, settings, engine, rule
        self.keys, self.columns, self.active, self.reference = keys, columns, active, reference
        self.seed = int(seed or 0)
        self.theta = tree.clone(task.params)
        self.ys = {c.name: tree.zeros_like(task.params) for c in active}
        self.pvec, self.lam0, self.check0 = None, None, None
        self.inside = True

    def start(self) -> None:
        self.rule.start(self.task.params, [c.name for c in self.active])

    def load(self, ck: dict, rows: Sequence[Mapping]) -> None:
        """The state of a checkpoint ``ck`` whose records are ``rows``."""
        vec = ck["vectors"]
        self.theta = vec["theta"]
        self.ys = {c.name: vec[f"y:{c.name}"] for c in self.active}
        self.rule.load(vec, int(ck["start"]), [c.name for c in self.active])
        self.pvec, self.lam0, self.check0 = vec.get("p"), ck.get("lambda_max0"), ck.get("check_k0")
        self.inside = inside_regime(rows, self.lr)[-1] if rows else True

    # -- the runner's interface ---------------------------------------------------------------
    def vectors(self) -> dict:
        out = {"theta": self.theta, **{f"y:{n}": v for n, v in self.ys.items()},
               **self.rule.vectors()}
        if self.pvec is not None:
            out["p"] = self.pvec
        return out

    def state(self) -> dict:
        return {"check_k0": self.check0, "lambda_max0": self.lam0}

    def sources(self, vectors):
        return None

    def summary(self, run, status, message, diverged_at):
        return None  # advice.json is written once, when the run ends

    def sharpness(self, point) -> float:
        """The regime gate's ``lambda_max(H_JC^k)``: ``lambda_max(H_JC^0)`` converged
        (:func:`crosscurv.numeric.estimates.solve_extremes`), then the power iteration started from
        its eigenvector, one product per iteration; the larger of the two."""
        if self.pvec is None:
            try:
                ext = solve_extremes(point.hvp, self.theta, seed=self.seed)
                self.lam0, self.pvec = float(ext.lam_max), ext.v_max
            except (ValueError, RuntimeError, ArithmeticError):  # non-finite products
                self.lam0, self.pvec = math.nan, init_power_vector(self.theta, self.seed)
        rq, self.pvec = power_step(self.pvec, point.hvp(self.pvec))
        return max((x for x in (self.lam0, rq) if x is not None and math.isfinite(x)),
                   default=math.nan)

    def iteration(self, k: int, run: Run) -> None:
        """The candidates' predictions at ``theta_JC^k`` (the row of ``k >= 1``) and, unless ``k =
        K``, the JC step."""
        last = k == run.iters
        with diverged_outside_domain(k, "at theta_JC", initial=k == 0):
            point = self.engine.point(self.task.loss, self.theta)
        loss_jc = float(point.value)
        if not math.isfinite(loss_jc):
            raise Diverged(k, f"diverged at k={k}: loss_jc = {loss_jc}")
        g = point.grad
        sharp = self.sharpness(point)
        vals = self.rule.iteration(self.engine, self.task, point, self.keys, self.columns,
                                   self.active, self.reference, g, self.ys, self.theta, self.lr, k,
                                   last)
        del point
        if not last:
            self.theta = self.rule.step(self.task, self.theta, g, self.lr)
        if k >= 1:
            self.inside = self.inside and in_regime(self.lr, sharp)
            row = {"k": k, "loss_jc": loss_jc, "sharpness": sharp,
                   **{p: {n: v[i] for n, v in vals.items()} for i, p in enumerate(_PARTS)}}
            run.emit(k, row)

