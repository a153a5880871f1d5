"""Table 1 at a contested setting: K = 500 over seeds, the baselines and the paper beside ours.

For the sweep folders given (one learning rate per task, chosen in ``reports/contest.md`` where both
schemes win a real share of the iterations), this report says, per run, whether the run stayed
contested to its end (:func:`crosscurv.experiments.studies.contest.contest_rows`: each scheme has
the lower loss in ``>= 10%`` of the decided iterations, the winner changes at least once, and
``eta * sharpness_k < 2`` throughout), and gives Table 1 over the complete runs of each setting
(:func:`crosscurv.experiments.studies.seeds.seed_rows`: ``mean [min, max]`` over seeds) with the
two baseline rows (``majority``: always the scheme measured lower most often; ``one_step``: the
sign of ``eta^2 C_S`` at the JC iterate, from ``one_step.csv`` beside each run's records) and the
paper's one-run Table 1.  Runs not finished are listed with the ``K`` they reached, their shares
*so far* in the per-run table, and left out of Table 1.

Writes ``OUT`` (markdown, the findings first), e.g.::

    python -m crosscurv.experiments.studies.contest_seeds reports/sweeps/contest-mlp-k500 \\
        --out reports/contest_k500.md
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

__all__ = ["read_study", "study_rows", "findings", "unfinished", "paper_line", "paper_task",
           "render", "write_contest_seeds"]


def paper_task(task: str) -> str:
    """The paper's task a study task is compared with: ``lora`` for LoRA on the pretrained T5
    (:data:`crosscurv.experiments.studies.contest_lora.TASK`), else ``task`` itself."""
    from crosscurv.experiments.studies.contest_lora import TASK

    return "lora" if task == TASK else task


def _complete(r) -> bool:
    return r.status == "complete" and r.K >= r.planned_K


def read_study(path):
    """The sweep folder ``path`` (:func:`~crosscurv.experiments.studies.collect.read_sweep`), and
    its unfinished runs that have records so far, as a second
    :class:`~crosscurv.experiments.studies.collect.SweepRuns` (their shares are *so far*).

    Raises:
        DataError: ``path`` is not a sweep folder, or holds no run with records.
    """
    from crosscurv.experiments.reports.table import load_run
    from crosscurv.experiments.studies.collect import StudyRun, SweepRuns, read_sweep
    from crosscurv.experiments.tasks.errors import DataError
    from crosscurv.numeric.records import read_summary

    path = Path(path)
    try:
        done = read_sweep(path)
    except DataError:
        if not (path / "runs").is_dir():
            raise
        names = sorted(d.name for d in (path / "runs").iterdir() if d.is_dir())
        done = SweepRuns(path, [], names, {})
    partial = []
    for name in done.unfinished:
        d = path / "runs" / name
        if not (d / "summary.json").is_file() or not (d / "records.csv").is_file():
            continue
        if read_summary(str(d / "summary.json")).get("settings") is None:
            continue
        try:
            partial.append(StudyRun(name, load_run(d)))
        except DataError:  # no record written yet
            continue
    if not done.runs and not partial:
        raise DataError(f"{path} holds no run with records")
    return done, SweepRuns(path, partial, [], {})


def study_rows(sweeps, partial=()) -> tuple[list[dict], list]:
    """``(contest rows of every run, finished or not, the complete runs)`` of the sweeps given."""
    from crosscurv.experiments.studies.contest import contest_rows

    rows = [{**r, "task": paper_task(r["task"]), "run_task": r["task"], "finished": True}
            for r in contest_rows(sweeps)]
    rows += [{**r, "task": paper_task(r["task"]), "run_task": r["task"], "finished": False}
             for r in contest_rows(partial)]
    rows.sort(key=lambda d: (d["task"], d["lr"], d["seed"], d["K"]))
    done = [r for sw in sweeps for r in sw.runs if _complete(r)]
    return rows, done


def _mean(xs) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan


def findings(rows: list[dict], table: list[dict]) -> list[str]:
    """Per task and rate: how many of the finished seeds stayed contested at K, the JC iterations
    per seed beside the paper's, and Correct of the recursive estimate beside the baselines."""
    from crosscurv.experiments.reports.table import PAPER_TABLE1

    lines = []
    for task, lr in sorted({(r["task"], r["lr"]) for r in rows}):
        rs = [r for r in rows if r["task"] == task and r["lr"] == lr]
        fin = [r for r in rs if r["finished"]]
        yes = [r for r in fin if r["contested"] == "yes"]
        jc_iters = [_jc_iterations(r) for r in fin]
        paper = PAPER_TABLE1.get(task, {}).get("recursive")
        text = (
            f"- {task}, eta = {lr:g}: {len(yes)} of {len(fin)} finished seeds contested at K = "
            f"{max(r['K'] for r in fin)}"
            if fin
            else f"- {task}, eta = {lr:g}: no finished seed yet"
        )
        if fin:
            text += (
                f"; JC lower in {_mean(jc_iters):.1f} iterations per seed "
                f"[{min(jc_iters)}, {max(jc_iters)}]"
                + (f" (the paper: {paper['jc_hits'][1]} of 500)" if paper else "")
            )
        corr = {
            t["estimate"]: t["correct"].mean
            for t in table
            if t["task"] == task and t["lr"] == lr and t["correct"].n
        }
        if corr:
            text += "; Correct " + ", ".join(
                f"{e} {corr[e]:.1f}%" for e in ("recursive", "cumulative", "majority", "one_step")
                if e in corr
            )
        lines.append(text + ".")
    return lines


def unfinished(sweeps) -> list[str]:
    """``name (K = k reached)`` of each run not finished (left out of Table 1)."""
    out = []
    for sw in sweeps:
        for name in sw.unfinished:
            rec = sw.path / "runs" / name / "records.csv"
            k = max(0, len(rec.read_text().splitlines()) - 1) if rec.is_file() else 0
            out.append(f"{_short_name(name)} (K = {k} reached)")
    return out


def _short_name(name: str) -> str:
    """A run folder's name with the pretrained LoRA factory's module path cut to ``lora-pretrained``
    (the findings line stays short)."""
    from crosscurv.experiments.studies.contest_lora import TASK

    prefix = TASK.replace(":", "_")
    return "lora-pretrained" + name[len(prefix):] if name.startswith(prefix) else name


def _jc_iterations(r: dict) -> int:
    """The iterations where JC was measured lower (``jc_lo = n_JC / max(K, TARGET_K)``)."""
    from crosscurv.experiments.studies.contest import TARGET_K

    return round(r["jc_lo"] * max(r["K"], TARGET_K))


def paper_line() -> str:
    """The paper's three runs by the same rule: JC's share and what the majority winner scores, from
    :data:`crosscurv.experiments.reports.table.PAPER_TABLE1`."""
    from crosscurv.experiments.reports.table import PAPER_TABLE1, TASK_LABELS

    parts = []
    for task, rows in PAPER_TABLE1.items():
        n_jc, n_s = rows["recursive"]["jc_hits"][1], rows["recursive"]["s_hits"][1]
        share = n_jc / (n_jc + n_s)
        parts.append(
            f"{TASK_LABELS[task]} JC lower in {n_jc} of {n_jc + n_s} ({100 * share:.1f}%: "
            f"{'contested' if share >= 0.1 else 'not contested'}; the majority winner would "
            f"score {100 * max(share, 1 - share):.1f}%)"
        )
    return "The paper's runs by the same rule (its Table 1's hit counts): " + "; ".join(parts) + "."


def render(rows: list[dict], table: list[dict], command: str, left=()) -> str:
    """The report: findings, the rule, the per-run table and Table 1 over seeds."""
    from tabulate import tabulate

    from crosscurv.experiments.studies.contest import SHARE, _ks, _pct

    body = [
        [
            r["task"], f"{r['lr']:g}", str(r["seed"]), str(r["K"]), _pct(r["jc"]), _pct(r["gs"]),
            str(len(r["switches"])), _ks(r["switches"]),
            f"{r['top']:.3g}" if r["top"] == r["top"] else "n/a",
            "never" if r["cross"] is None else str(r["cross"]),
            r["contested"] if r["finished"] else f"not finished ({r['contested']})",
            "?" if r["seconds"] is None else f"{r['seconds']:.0f}",
        ]
        for r in rows
    ]
    head = ["task", "eta", "seed", "K", "JC wins", "GS wins", "switches", "first switches at k",
            "max eta*sharpness", "first k at 2", "contested at K", "seconds"]
    lines = [
        "# Table 1 where the winner is in doubt: K = 500 over seeds",
        "",
        *findings(rows, table),
        *([f"- Not finished, left out: {', '.join(left)}."] if left else []),
        "",
        f"Generated by `{command}` from the records of the sweep folders named; do not edit.",
        "",
        f"A run is *contested* when each scheme has the lower loss in at least {100 * SHARE:.0f}% "
        f"of the decided iterations (`|gap| > gap_err`), the winner changes at least once, and "
        f"`eta * sharpness_k` stays below 2. The rates: those `reports/contest.md` found contested "
        f"at shorter K, and for the MLP also half its lowest: the JC phase is early in training, "
        f"and a smaller rate stretches it over more iterations. Only there can Table 1 fail; a "
        f"predictor that always names the majority winner is the row to beat.",
        *_renamed(rows),
        "",
        paper_line(),
        "",
        tabulate(body, headers=head, tablefmt="github", disable_numparse=True),
        "",
        "## Table 1 over the finished seeds, the baselines and the paper beside ours",
        "",
        "Cells: mean [min, max] over the seeds; the paper's column: its one run at K = 500 (its "
        "rates and sizes, not ours). Baselines: majority winner (the constant predictor, known "
        "only afterwards); one-step `eta^2 C_S` at the JC iterate (`one_step.csv`, written by "
        "`python -m crosscurv.experiments.reports.one_step_along_jc SWEEP`).",
        "",
        *(_group_tables(rows, table) if table else ["No finished run.", ""]),
    ]
    return "\n".join(lines)


def _renamed(rows: list[dict]) -> list[str]:
    """A line naming the study tasks shown under the paper's task name (:func:`paper_task`)."""
    named = sorted({(r["task"], r["run_task"]) for r in rows if r["task"] != r["run_task"]})
    return [
        "",
        "Tasks under the paper's name: "
        + "; ".join(f"`{t}` is `{run}` (its base weights pretrained by "
                    f"`{run.split(':')[0]}`, not random)" for t, run in named)
        + ".",
    ] if named else []


def _group_tables(rows: list[dict], table: list[dict]) -> list[str]:
    """One Table 1 per task and rate over its finished seeds, and, where only some of them are
    contested, a second one over the contested seeds alone."""
    from crosscurv.experiments.studies.seeds import render_seeds_table

    out = []
    for task, lr in sorted({(t["task"], t["lr"]) for t in table}):
        group = [t for t in table if t["task"] == task and t["lr"] == lr]
        out += [f"### {task}, eta = {lr:g}: every finished seed", "",
                render_seeds_table(group, paper=True), ""]
        yes = sorted(r["seed"] for r in rows
                     if r["task"] == task and r["lr"] == lr and r["finished"]
                     and r["contested"] == "yes")
        if yes and len(yes) < len(group[0]["seeds"]):
            sub = [_restrict(t, yes) for t in group]
            out += [f"### {task}, eta = {lr:g}: the contested seeds only", "",
                    render_seeds_table([t for t in sub if t], paper=True), ""]
    return out


def _restrict(row: dict, seeds: list[int]) -> dict | None:
    """A :func:`~crosscurv.experiments.studies.seeds.seed_rows` row over ``seeds`` only."""
    from crosscurv.experiments.studies.seeds import SCALARS, Spread

    have = {s: v for s, v in row["per_seed"].items() if s in seeds}
    if not have:
        return None
    out = {**row, "seeds": sorted(have), "per_seed": have}
    for key in SCALARS:
        out[key] = Spread([have[s][key] for s in sorted(have)])
    return out


def _table(done) -> list[dict]:
    from crosscurv.experiments.reports.table import TABLE_ROWS
    from crosscurv.experiments.studies.seeds import seed_rows

    rows = seed_rows(done, TABLE_ROWS) if done else []
    return [{**t, "task": paper_task(t["task"])} for t in rows]


def write_contest_seeds(sweep_dirs: list[str], out: str) -> str:
    """Write the report ``out`` (markdown) from the sweep folders ``sweep_dirs`` (finished and
    unfinished runs); returns ``out``.

    Raises:
        crosscurv.theory.errors.InputError: a folder that is not a sweep.
    """
    from crosscurv.numeric.records import atomic_write_text

    read = [read_study(p) for p in sweep_dirs]
    command = ("python -m crosscurv.experiments.studies.contest_seeds " + " ".join(sweep_dirs)
               + f" --out {out}")
    sweeps = [done for done, _ in read]
    rows, done = study_rows(sweeps, [partial for _, partial in read])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(rows, _table(done), command, unfinished(sweeps)))
    return out


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import contest_seeds

    sys.exit(contest_seeds())
