"""What ``crosscurv report --check`` says about the committed studies under the kernels of other
CPUs.

    python -m crosscurv.experiments.conformance.portability [--iters N] [--runs DIR ...]
        [--out reports/portability.md] [--emulations NAME,...] [--tables] [--fresh] [--cached-only]

Each committed run folder is checked (:func:`crosscurv.experiments.reports.check.check_run`) in its
own subprocess under each emulated instruction set of :data:`EMULATIONS`; per task and emulation the
report says which promise held. ``--tables`` adds the table-level comparison of :mod:`.tables`.
Results are cached in ``--cache`` keyed by emulation, run files, iterations and tolerances, so
``make portability`` resumes (``--fresh``: measure again; ``--cached-only``: report the cache).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass

from .emulation import EMULATIONS, cached, file_digest, lookup, run_under, tolerance_digest

__all__ = ["EMULATIONS", "PortabilityOptions", "check_one", "check_under", "describe",
           "write_portability"]

RUNS = [os.path.join("reports", "runs", t) for t in ("mlp", "fl", "lora")]
CACHE = os.path.join("build", "portability")


@dataclass(frozen=True)
class PortabilityOptions:
    """What :func:`write_portability` measures: the command-line flags of the same names
    (:func:`crosscurv.experiments.cli.scripts.portability`); ``argv``: the command the report names.
    """

    iters: int = 30
    runs: tuple = tuple(RUNS)
    emulations: tuple | None = None
    out: str = os.path.join("reports", "portability.md")
    cache: str = CACHE
    fresh: bool = False
    cached_only: bool = False
    tables: bool = False
    sweeps: str = os.path.join("reports", "sweeps")
    argv: tuple = ()


def check_under(name: str, run_dir: str, iters: int, timeout: float = 7200) -> dict:
    """``report --check RUN_DIR --iters N`` under emulation ``name``
    (:data:`.emulation.EMULATIONS`), in a subprocess.

    Returns ``{"exit": code, "check": RunCheck.to_dict() or None, "error": last stderr line or None,
    "seconds": wall time}``; exit 0 agree, 1 disagree, anything else an error of the check itself.
    """
    t0 = time.perf_counter()
    proc = run_under(name, ["-m", "crosscurv.experiments.conformance.portability", "--one", run_dir,
                            "--iters", str(iters)], timeout=timeout)
    check = None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            check = json.loads(line)
    err = proc.stderr.strip().splitlines()
    return {"exit": proc.returncode, "check": check, "seconds": time.perf_counter() - t0,
            "error": None if check is not None else (err[-1] if err else "no output")}


def check_one(run_dir: str, iters: int) -> int:
    """``report --check RUN_DIR --iters N`` in this process: its :class:`RunCheck` as one line of
    JSON on standard output (the recomputed records included); returns 0 agree, 1 disagree."""
    from crosscurv.experiments.reports.check import check_run

    rc = check_run(run_dir, iters)
    out = rc.to_dict()
    out["recomputed"] = None if rc.recomputed is None else {c: [float(x) for x in v] for c,
                                                            v in rc.recomputed.items()}
    print(json.dumps(out, default=float))
    return 0 if rc.agree else 1


def _beyond_fixed(check: dict) -> int | None:
    """The first ``k`` beyond the fixed (measured-rounding) tolerances, or ``None`` where every
    value was within."""
    if check["verdict"] == "parts as predicted":
        return check["parts_at"]
    for note in check.get("notes", []):
        if note.startswith("beyond the fixed tolerances from k = "):
            return int(note[len("beyond the fixed tolerances from k = "):].split(";")[0])
    if check["verdict"] == "disagree" and check.get("first_disagreement"):
        return check["first_disagreement"]["k"]
    return None


def describe(result: dict) -> dict:
    """One row of the report from :func:`check_under`'s result: ``{"held", "beyond_fixed",
    "explained", "growth", "first"}`` (strings; ``explained``: whether the grown tolerances explain
    where it parts)."""
    check = result["check"]
    if check is None:
        return {"held": f"no verdict: exit {result['exit']}: {result['error']}",
                "beyond_fixed": "-", "explained": "-", "growth": "-", "first": "-"}
    verdict, n = check["verdict"], check["iterations"]
    beyond = _beyond_fixed(check)
    growth = f"{check['growth']:.2f}x" if check.get("growth") else "-"
    first = "-"
    if check.get("first_disagreement"):
        f = check["first_disagreement"]
        first = f"k = {f['k']}, `{f['column']}`"
        if f["column"] != "theta0" and f.get("tolerance") is not None and f.get(
                "committed") is not None:
            d = abs(f["recomputed"] - f["committed"])
            first += f": {d:.2e} > {f['tolerance']:.2e}"
    if verdict == "bitwise":
        held, explained = f"bitwise to k = {n}", "-"
    elif verdict == "within tolerance":
        held, explained = f"within tolerance to k = {n}", "-"
    elif verdict == "parts as predicted":
        held = (f"parts at k = {beyond}, as the trajectory's own sensitivity predicts (to k = {n})")
        explained = "yes"
    else:
        held = "disagree" + (f" at {first}" if first != "-" else "")
        explained = "no" if beyond is not None and beyond >= 2 else "-"
    return {"held": held, "beyond_fixed": "-" if beyond is None else str(beyond),
            "explained": explained, "growth": growth, "first": first}


def _task(run_dir: str) -> str:
    return os.path.basename(os.path.normpath(run_dir))


def _section_checks(rows: list, iters: int) -> list:
    md = ["## `report --check` under each emulation", "",
          f"`crosscurv report --check RUN --iters {iters}` (its verdict, computed in a subprocess "
          f"under the environment in the first column). *Beyond fixed from*: the first `k` whose "
          f"values lie beyond the fixed tolerances (the measured rounding of `MEASURED_ROUNDING` "
          f"times its safety factor); *explained*: whether the tolerances grown as a run started "
          f"from `theta0` perturbed at its unit roundoff parts (per iteration: *growth*, the "
          f"geometric mean) cover every value to the horizon.", "",
          "| run | kernels | exit | what held | beyond fixed from | explained by the grown "
          "tolerances | growth | first disagreement | s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, run, res in rows:
        d = describe(res)
        md.append(f"| `{run}` | {name} | {res['exit']} | {d['held']} | {d['beyond_fixed']} | "
                  f"{d['explained']} | {d['growth']} | {d['first']} | {res['seconds']:.0f} |")
    held = sum(1 for _, _, r in rows if r["exit"] == 0)
    md += ["", f"{held} of {len(rows)} checks held (exit 0).", ""]
    by_task: dict = {}
    for name, run, res in rows:
        by_task.setdefault(_task(run), []).append((name, describe(res), res))
    md += ["Per task:", ""]
    for task, items in by_task.items():
        kinds = {}
        for name, d, res in items:
            c = res["check"]
            key = "error" if c is None else c["verdict"]
            kinds.setdefault(key, []).append(name)
        parts = [f"{k} under {len(v)} ({', '.join(v)})" for k, v in kinds.items()]
        md.append(f"* `{task}`: " + "; ".join(parts) + ".")
    md.append("")
    return md


def findings(text: str) -> list[str]:
    """At most five lines read off a rendered report: how many checks held, what held per task, and
    the table-level verdicts (each emulation's recomputed Table 1 within the seeds' spread)."""
    import re

    out = []
    held = re.search(r"^([0-9]+) of ([0-9]+) checks held \(exit 0\)\.$", text, re.M)
    if held:
        out.append(f"- {held.group(1)} of {held.group(2)} `report --check` runs held under the "
                   "emulated kernels of other CPUs.")
    for task, kinds in re.findall(r"^\* `([^`]+)`: (.*)\.$", text, re.M)[:3]:
        parts = re.findall(r"(?:^|; )([^;]+?) under ([0-9]+) \(", kinds)
        total = sum(int(n) for _, n in parts)
        out.append(f"- {task}, of {total} kernel settings: "
                   + ", ".join(f"{what} under {n}" for what, n in parts) + ".")
    verdicts = re.findall(r"^Verdict per emulation: (.*)\.$", text, re.M)
    if verdicts:
        ok = sum(all(v.endswith(": pass") for v in line.split("; ")) for line in verdicts)
        out.append(f"- Table 1 over the checked iterations: every emulation within the seeds' "
                   f"spread for {ok} of {len(verdicts)} runs.")
    return out[:5] or ["- No check has run yet."]


def render(md: list) -> str:
    """The report from its rendered lines (title first): :func:`findings` put after the title."""
    from crosscurv.experiments.reports.opening import with_findings

    text = "\n".join(md)
    return with_findings(text, findings(text))


def write_portability(args: PortabilityOptions) -> int:
    """Check every run of ``args.runs`` under every emulation (cached, resumable) and write the
    report ``args.out``; returns 1 when a check (or the table-level comparison) failed, else 0.

    Raises:
        crosscurv.theory.errors.InputError: an emulation name not in :data:`EMULATIONS`.
    """
    from crosscurv.theory.errors import InputError

    names = list(EMULATIONS) if args.emulations is None else list(args.emulations)
    unknown = [n for n in names if n not in EMULATIONS]
    if unknown:
        raise InputError(f"unknown emulation(s) {unknown} (choose from {list(EMULATIONS)})")
    cache = None if args.fresh else args.cache
    tolerances = tolerance_digest()
    digests = {run: file_digest(os.path.join(run, "summary.json"), os.path.join(run, "records.csv"))
               for run in args.runs}
    results = {}
    # emulation by emulation, in the order given, so a partial measurement covers whole ones
    for name in names:
        for run in args.runs:
            key = {"what": "check", "emulation": name, "run": run, "digest": digests[run],
                   "iters": args.iters, "tolerances": tolerances}
            if args.cached_only:
                res = lookup(cache, key)
                if res is None:
                    continue
            else:
                res = cached(cache, key, lambda: check_under(name, run, args.iters))
            d = describe(res)
            print(f"[portability] {run}: {name}: exit {res['exit']}: {d['held']} "
                  f"({res['seconds']:.0f} s)",
                  file=sys.stderr, flush=True)
            results[(name, run)] = res
    rows = [(name, run, results[(name, run)]) for run in args.runs for name in EMULATIONS
            if (name, run) in results]
    missing = [(name, run) for run in args.runs for name in names if (name, run) not in results]
    shown = [a for a in args.argv if a != "--cached-only"]
    cmd = "python -m crosscurv.experiments.conformance.portability " + " ".join(shlex.quote(a)
                                                                                for a in shown)
    md = ["# Portability: the committed studies under the kernels of other CPUs", "",
          f"Generated by `{cmd}` (`make portability`) on one machine, emulating the kernels of "
          f"other CPUs with environment variables. Two promises (docs/reproducibility.md): on the "
          f"same machine, build and thread count, a rerun is bitwise equal; on another machine, "
          f"`crosscurv report --check` says which of \"bitwise\", \"within tolerance to k = ...\" "
          f"or \"parts at k = ..., as the trajectory's own sensitivity predicts\" holds, and exits "
          f"1 where none does.", ""]
    md += _section_checks(rows, args.iters)
    if missing:
        md += ["Not measured at this horizon (the measurement was stopped before them; `make "
               "portability` measures "
               "them): " + "; ".join(f"`{r}` under {n}" for n, r in missing) + ".", ""]
    failed = sum(1 for _, _, r in rows if r["exit"] != 0)
    if args.tables:
        from .tables import recomputed_section

        recomputed: dict = {}
        for name, run, res in rows:
            if res["check"] is not None and res["check"].get("recomputed"):
                recomputed.setdefault(run, []).append((name, res["check"]["recomputed"]))
        section, table_failed = recomputed_section(args.runs, recomputed, args.sweeps)
        md += section
        failed += table_failed
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(render(md))
    print(args.out)
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import portability

    sys.exit(portability())
