"""Where Table 1 can fail: settings inside the regime at which both schemes win a real share of
iterations.

A study tests the estimates only where the winner is in doubt. For each run of the sweep folders
given, from its records (:mod:`crosscurv.experiments.studies.regime`):

* the shares of decided iterations where JC and where the scheme S has the lower loss;
* the observed winner's switches and the first ``k`` of each (up to three);
* the regime: the largest ``eta * sharpness_k`` and the first ``k`` where it reaches 2;
* whether the run is *contested*: both shares ``>= 10%``, at least one switch, and
  ``eta * sharpness_k < 2`` throughout.  A run shorter than the target ``K`` (500) is contested
  *so far*: a switch after it can only lower the share of the scheme that won before it, so the
  shares at ``K`` are bounded from the records (``JC >= n_JC / K``, ``GS >= n_GS / K``, the rest
  unknown).

Writes ``OUT`` (markdown; the findings first), e.g.::

    python -m crosscurv.experiments.studies.contest reports/sweeps/regime-mlp \\
        reports/sweeps/explore-mlp --out reports/contest.md
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["SHARE", "TARGET_K", "contest_rows", "render", "write_contest"]

#: the share each scheme must win, and the study length the shares are judged at
SHARE, TARGET_K = 0.10, 500


def _switch_ks(columns) -> list[int]:
    """The ``k`` at which the observed winner changes (ties and undecided iterations skipped)."""
    from crosscurv.experiments.studies.regime import _observed

    seq = [(int(k), w) for k, w in zip(columns["k"], _observed(columns)) if w in ("JC", "GS")]
    return [k for (_, a), (k, b) in zip(seq, seq[1:]) if a != b]


def contest_rows(sweeps) -> list[dict]:
    """One dict per run of the :class:`~crosscurv.experiments.studies.collect.SweepRuns` given
    (module docstring): ``sweep, task, pattern, lr, seed, K, jc, gs`` (shares of the decided
    iterations; ``pattern`` the delay pattern S of the run, e.g. ``gs``), ``switches`` (their
    ``k``), ``top`` (largest ``eta * sharpness``), ``cross`` (first ``k`` at 2 or ``None``),
    ``jc_lo``, ``gs_lo`` (the shares at :data:`TARGET_K` bounded below), ``contested`` (``"yes"``,
    ``"so far"`` or ``"no"``), ``seconds`` (the run's wall time)."""
    from crosscurv.experiments.studies.regime import _observed, regime_indicators

    out = []
    for sw in sweeps:
        for r in sw.runs:
            cols = r.columns()
            w = _observed(cols)
            n_jc, n_gs = w.count("JC"), w.count("GS")
            decided = n_jc + n_gs
            top, cross = regime_indicators(cols, r.lr)
            ks = _switch_ks(cols)
            jc = n_jc / decided if decided else math.nan
            gs = n_gs / decided if decided else math.nan
            inside = cross is None and top == top
            K = r.K
            jc_lo, gs_lo = n_jc / max(K, TARGET_K), n_gs / max(K, TARGET_K)
            ok_now = bool(inside and ks and jc >= SHARE and gs >= SHARE)
            if K >= TARGET_K:
                contested = "yes" if ok_now else "no"
            elif ok_now and min(jc_lo, gs_lo) >= SHARE:
                contested = "yes at K = 500 if it stays inside"
            else:
                contested = "so far" if ok_now else "no"
            out.append(
                {
                    "sweep": sw.path.name,
                    "task": r.task,
                    "pattern": r.pattern,
                    "lr": r.lr,
                    "seed": r.seed,
                    "K": K,
                    "jc": jc,
                    "gs": gs,
                    "switches": ks,
                    "top": top,
                    "cross": cross,
                    "jc_lo": jc_lo,
                    "gs_lo": gs_lo,
                    "contested": contested,
                    "seconds": r.seconds,
                }
            )
    out.sort(key=lambda d: (d["task"], d["pattern"], d["lr"], d["seed"], d["K"]))
    return out


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.0f}%"


def _ks(ks: list[int]) -> str:
    if not ks:
        return "none"
    return ", ".join(map(str, ks[:3])) + (f" (+{len(ks) - 3})" if len(ks) > 3 else "")


def _findings(rows: list[dict]) -> list[str]:
    """At most five lines: per task, the learning rates whose longest runs are all contested, the
    most balanced run inside the regime, and the runs whose records already guarantee the shares at
    :data:`TARGET_K`."""
    lines = []
    for task in sorted({r["task"] for r in rows}):
        rs = [r for r in rows if r["task"] == task]
        every = []
        for lr in sorted({r["lr"] for r in rs}):
            K = max(r["K"] for r in rs if r["lr"] == lr)
            at = [r for r in rs if r["lr"] == lr and r["K"] == K]
            if all(r["contested"] != "no" for r in at):
                every.append(f"{lr:g} ({len(at)} seed{'s' if len(at) > 1 else ''}, K = {K})")
        inside = [r for r in rs if r["cross"] is None and r["jc"] == r["jc"]]
        text = (
            f"- {task}: every seed contested at eta = {', '.join(every)}"
            if every
            else f"- {task}: no learning rate contested in every seed"
        )
        if inside:
            best = max(
                inside,
                key=lambda r: (min(r["jc"], r["gs"]) >= SHARE, r["K"], min(r["jc"], r["gs"])),
            )
            text += (
                f". Most balanced of the longest: eta = {best['lr']:g}, seed {best['seed']}, K = "
                f"{best['K']}: "
                f"JC {_pct(best['jc'])}, GS {_pct(best['gs'])}, {len(best['switches'])} switches"
            )
        lines.append(text + ".")
    sure = [r for r in rows if r["contested"].startswith("yes")]
    lines.append(
        f"- Contested at K = {TARGET_K} by the records alone: "
        + (
            ", ".join(f"{r['task']} eta = {r['lr']:g} seed {r['seed']}" for r in sure)
            if sure
            else "none"
        )
        + "."
    )
    return lines[:5]


def render(rows: list[dict], command: str) -> str:
    """The report: findings, then the rule and the table of every run."""
    from tabulate import tabulate

    body = [
        [
            r["task"],
            f"{r['lr']:g}",
            str(r["seed"]),
            str(r["K"]),
            _pct(r["jc"]),
            _pct(r["gs"]),
            str(len(r["switches"])),
            _ks(r["switches"]),
            f"{r['top']:.3g}" if r["top"] == r["top"] else "n/a",
            "never" if r["cross"] is None else str(r["cross"]),
            f">= {100 * r['jc_lo']:.1f}% / >= {100 * r['gs_lo']:.1f}%"
            if r["K"] < TARGET_K
            else "-",
            r["contested"],
            "?" if r["seconds"] is None else f"{r['seconds']:.0f}",
            r["sweep"],
        ]
        for r in rows
    ]
    head = [
        "task",
        "eta",
        "seed",
        "K",
        "JC wins",
        "GS wins",
        "switches",
        "first switches at k",
        "max eta*sharpness",
        "first k at 2",
        f"JC / GS at K = {TARGET_K}",
        "contested",
        "seconds",
        "sweep",
    ]
    lines = [
        "# Where Table 1 can fail: contested settings inside the regime",
        "",
        *_findings(rows),
        "",
        f"Generated by `{command}` from the records of the sweep folders named in the table; do "
        "not edit.",
        "",
        f"A run is *contested* when each scheme has the lower loss in at least {100 * SHARE:.0f}% "
        f"of the decided iterations, the winner changes at least once, and `eta * sharpness_k` "
        f"stays below 2. Only there can Table 1 fail. The studies run to K = {TARGET_K}; a shorter "
        f"run is contested *so far*. Its shares at that K are bounded below from the records. "
        f"Shares: of the decided iterations (`|gap| > gap_err`).",
        "",
        tabulate(body, headers=head, tablefmt="github", disable_numparse=True),
        "",
    ]
    secs = [r["seconds"] for r in rows if r["seconds"] is not None]
    if secs:
        lines.append(
            f"The {len(rows)} runs took {sum(secs) / 60:.0f} minutes of wall time in all "
            "(`summary.json`)."
        )
    return "\n".join(lines) + "\n"


def write_contest(sweeps: Sequence[str], out: str) -> str:
    """Read the sweep folders ``sweeps`` (``crosscurv sweep --out``), write the contest table to the
    Markdown file ``out`` and return ``out``.

    Raises:
        crosscurv.theory.errors.InputError: a folder that is no sweep folder (one line).
    """
    from crosscurv.experiments.studies.collect import read_sweep
    from crosscurv.numeric.records import atomic_write_text

    read = [read_sweep(p) for p in sweeps]
    command = ("python -m crosscurv.experiments.studies.contest " + " ".join(sweeps)
               + f" --out {out}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(contest_rows(read), command))
    return out


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import contest

    sys.exit(contest())
