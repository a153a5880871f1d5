"""Does the winner change for LoRA on pretrained base weights? A small grid at short K.

The paper's LoRA reversal (GS, then JC at K = 133-207, then GS) happens on a pretrained T5; on our
random-weight T5 the regime grid finds no change of winner.  This report puts, side by side, the
runs of the sweep folders given (typically the random-weight ``regime-lora`` grid and a grid of
the task :func:`crosscurv.experiments.tasks.lora_pretrained.lora_pretrained`, the same LoRA on
the T5 pretrained by :data:`crosscurv.experiments.tasks.lora_pretrained.RECIPE`), each judged by
:func:`crosscurv.experiments.studies.contest.contest_rows` (each scheme the lower loss in
``>= 10%`` of the decided iterations, at least one switch, ``eta * sharpness_k < 2``), with the
pretraining record (``recipe.json``: recipe, loss of its first and last 20 steps, seconds) on top.

Writes ``OUT`` (markdown, the findings first), e.g.::

    python -m crosscurv.experiments.studies.contest_lora reports/sweeps/regime-lora \\
        reports/sweeps/explore-lora-pretrained --out reports/contest_lora.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["TASK", "OTHER_PANELS", "FL_PANEL", "FL_SCALE", "PANELS", "short_task", "findings",
           "figure1_lines", "render", "write_contest_lora"]

#: the ``crosscurv run`` task spec of LoRA on the pretrained T5
TASK = "crosscurv.experiments.tasks.lora_pretrained:lora_pretrained"


def short_task(task: str, pattern: str = "gs") -> str:
    """``lora (pretrained T5)`` for :data:`TASK`, ``lora (random T5)`` for ``lora``; a delay pattern
    S other than the task's ``gs`` (B, then A) is named in the parentheses, e.g. ``lora (pretrained
    T5, S = gs:A,B)``."""
    name = {TASK: "lora (pretrained T5)", "lora": "lora (random T5)"}.get(task, task)
    if pattern == "gs":
        return name
    return name[:-1] + f", S = {pattern})" if name.endswith(")") else f"{name} (S = {pattern})"


def findings(rows: list[dict]) -> list[str]:
    """Per base model and delay pattern: the rates explored, the runs with a change of winner inside
    the regime, and the contested ones."""
    from crosscurv.experiments.studies.contest import _pct

    def label(r: dict) -> str:
        return short_task(r["task"], r.get("pattern", "gs"))

    lines = []
    for name in sorted({label(r) for r in rows}):
        rs = [r for r in rows if label(r) == name]
        inside = [r for r in rs if r["cross"] is None and r["top"] == r["top"]]
        switched = [r for r in inside if r["switches"]]
        cont = [r for r in rs if r["contested"] != "no"]
        rates = ", ".join(f"{x:g}" for x in sorted({r["lr"] for r in rs}))
        text = (
            f"- {name}: eta in {{{rates}}}, {len(rs)} runs, K = "
            f"{min(r['K'] for r in rs)}-{max(r['K'] for r in rs)}; {len(inside)} inside the "
            f"regime, {len(switched)} with a change of winner there, {len(cont)} contested"
        )
        if cont:
            best = max(cont, key=lambda r: min(r["jc"], r["gs"]))
            text += (
                f" (most balanced: eta = {best['lr']:g}, seed {best['seed']}: JC "
                f"{_pct(best['jc'])}, GS {_pct(best['gs'])}, {len(best['switches'])} switches)"
            )
        lines.append(text + ".")
    return lines


def _pretraining(sweeps) -> list[str]:
    """The pretraining record of the runs' model folders (``recipe.json``), one line each."""
    out = []
    seen = set()
    for sw in sweeps:
        for r in sw.runs:
            src = str(r.settings.get("model_source", ""))
            folder = src.split(" from ", 1)[1].split(" (", 1)[0] if " from " in src else None
            if not folder or folder in seen or not (Path(folder) / "recipe.json").is_file():
                continue
            seen.add(folder)
            rec = json.loads((Path(folder) / "recipe.json").read_text(encoding="utf-8"))
            out.append(
                f"- Pretraining (`{Path(folder).name}`): "
                f"{json.dumps(rec['recipe'], sort_keys=True)};"
                f" {rec['texts']} texts; span loss {rec['loss_first20']:.3f} (first 20 steps) -> "
                f"{rec['loss_last20']:.3f} (last 20); {rec['seconds']:.0f} s on one thread; "
                f"weights SHA-256 {rec['weights_sha256'][:16]}."
            )
    return out


#: the command behind the lora panel on the pretrained T5 (``make contest-study``)
MOTIVATION_COMMAND = (
    "OMP_NUM_THREADS=1 crosscurv motivation --panel lora --preset default --resume --model "
    "<the pretrained folder> --out runs/motivation-lora-pretrained --report "
    "reports/motivation-lora-pretrained"
)

#: why the other Figure 1 panels were not rerun (the CPU budget of the study)
OTHER_PANELS = (
    "The mlp and fl panels were not rerun. mlp: its practical in-place run diverges at the default "
    "preset (`reports/motivation.md`), and a panel that does not diverge needs a smaller rate or "
    "other clipping, which `crosscurv motivation` does not take as options; fl: the bundled data "
    "is 20 CIFAR-10 images, and the paper's panel (full CIFAR-10, width 64) needs the data set "
    "and hours of CPU that this study did not have."
)

#: the fl panel's reason when only the mlp panel was scanned over rates
FL_PANEL = (
    "The fl panel was not rerun: the bundled data is 20 CIFAR-10 images, and the paper's panel "
    "(full CIFAR-10, width 64) needs the data set and hours of CPU that this study did not have."
)

#: the scale of the fl scan against the paper's panel
FL_SCALE = (
    "The fl scan trains the `default` preset on the bundled data (20 CIFAR-10 images, width 8); "
    "the paper's panel (full CIFAR-10, width 64) needs the data set and hours of CPU that this "
    "study did not have."
)

#: what each panel compares, for the scans' introductions
PANELS = {
    "mlp": "in-place back-propagation vs JC, clipped SGD",
    "fl": "FedAlt vs FedSim, SGD with momentum",
    "lora": "alternating vs simultaneous LoRA, Adam",
}


def _scan_lines(scan: str) -> tuple[str | None, list[str]]:
    """``(panel, lines)``: a rate scan's findings quoted from its report ``scan`` (written by
    :mod:`crosscurv.experiments.motivation.rate_scan`), with its command; ``panel`` ``None`` when
    the report is missing."""
    path = Path(scan)
    if not path.is_file():
        return None, [f"`{path}`: not written (the rate scan did not run).", ""]
    text = path.read_text(encoding="utf-8").splitlines()
    command = next((ln.split("`")[1] for ln in text if ln.startswith("Generated by `")), "?")
    panel = next((p for p in PANELS if text and f"'s {p} panel" in text[0]), "mlp")
    quoted = [ln for ln in text if ln.startswith("- ")]
    what = PANELS[panel]
    if panel == "lora":
        what += ", on the T5 weights of `--model`" if "--model" in command else ", random T5"
    return panel, [
        f"The {panel} panel ({what}) at the default preset with the learning rate "
        f"scanned, from `{path}` (written by `{command}`, a stage of `make contest-study`):",
        "",
        *quoted,
        "",
    ]


def figure1_lines(motivation: str | None, scans: Sequence[str] = ()) -> list[str]:
    """The lora panel's findings quoted from ``MOTIVATION/motivation.md`` (written by ``crosscurv
    motivation --panel lora --model <the pretrained folder> --report MOTIVATION``), then each rate
    scan's findings quoted from its report in ``scans`` with, for the fl panel, :data:`FL_SCALE`
    (or :data:`FL_PANEL` when only the mlp panel was scanned); without scans
    :data:`OTHER_PANELS`."""
    if motivation is None:
        return []
    path = Path(motivation) / "motivation.md"
    quoted = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(("- lora:", "- The criterion"))
    ] if path.is_file() else []
    others: list[str] = []
    panels = set()
    for scan in scans:
        panel, lines = _scan_lines(scan)
        panels.add(panel)
        others += lines
    if not scans:
        others = [OTHER_PANELS]
    else:
        others.append(FL_SCALE if "fl" in panels else FL_PANEL)
    return [
        "## Figure 1 on the pretrained T5",
        "",
        f"The lora panel of Figure 1 (practical alternating and simultaneous LoRA with Adam) on "
        f"the pretrained T5, from `{path}` (written by `{MOTIVATION_COMMAND}`, a stage of `make "
        f"contest-study`; its own header omits `--panel` and `--model`):"
        if quoted
        else f"`{path}`: not written (the panel did not run).",
        "",
        *quoted,
        "",
        *others,
        "",
    ]


def render(rows: list[dict], sweeps, command: str, motivation: str | None = None,
           scans: Sequence[str] = ()) -> str:
    """The report: findings, provenance, the pretraining record, the per-run table of
    :func:`crosscurv.experiments.studies.contest.render` (its title dropped), then
    :func:`figure1_lines`."""
    from crosscurv.experiments.studies import contest

    named = [{**r, "task": short_task(r["task"], r.get("pattern", "gs"))} for r in rows]
    table = contest.render(named, command).split("\n")
    start = next(i for i, line in enumerate(table) if line.startswith("A run is *contested*"))
    lines = [
        "# LoRA on pretrained base weights: does the winner change inside the regime?",
        "",
        *findings(rows),
        "",
        f"Generated by `{command}` from the records of the sweep folders named in the table; do "
        "not edit. The pretrained T5 is built and cached by "
        "`crosscurv.experiments.tasks.lora_pretrained` (recipe in its docstring); the LoRA task on "
        "it is the built-in `lora` at the default preset (8 sentiment sentences, r = 8) with "
        "`--model` set to that folder. Table 1 over the seeds of the K = 500 sweep, with the "
        "baselines and the paper's LoRA row beside it: `reports/contest_k500.md`.",
        "",
        *(["## The pretrained base model", "", *_pretraining(sweeps), ""] if _pretraining(sweeps)
          else []),
        *table[start:],
        *figure1_lines(motivation, scans),
    ]
    return "\n".join(lines)


def write_contest_lora(sweep_dirs: list[str], out: str, motivation: str | None = None,
                       scans: Sequence[str] = ()) -> str:
    """Write the report ``out`` (markdown) from the sweep folders ``sweep_dirs`` and, quoted, the
    lora Figure 1 panel's ``--report`` folder ``motivation`` and the rate scans' reports ``scans``;
    returns ``out``.

    Raises:
        crosscurv.theory.errors.InputError: a folder that is not a sweep.
    """
    from crosscurv.experiments.studies.collect import read_sweep
    from crosscurv.experiments.studies.contest import contest_rows
    from crosscurv.numeric.records import atomic_write_text

    sweeps = [read_sweep(p) for p in sweep_dirs]
    command = (
        "python -m crosscurv.experiments.studies.contest_lora " + " ".join(sweep_dirs)
        + f" --out {out}" + (f" --motivation {motivation}" if motivation else "")
        + "".join(f" --scan {scan}" for scan in scans)
    )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(contest_rows(sweeps), sweeps, command, motivation, scans))
    return out


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import contest_lora

    sys.exit(contest_lora())
