"""Run the performance benchmarks and write their results, with the machine they ran on, to one
Markdown file.

Every performance figure of the project is read from this file (``reports/performance.md``). Each
benchmark runs in its own subprocess with one intra-op thread; its output is written verbatim under
its command, with its wall time and the load average before and after. The header names the machine,
torch, the thread count, the date and the commit.

Usage::

    python benchmarks/bench_all.py [--out reports/performance.md] [--quick]
        [--only memory,memory-mlp,memory-mlp-resident,protocol,reductions,trust,hvp,threads,offload]

``--merge A.md B.md ...`` writes ``--out`` from the sections of earlier outputs (each section from
the last file holding it; header from the first). ``--quick`` runs each benchmark at its smallest
size (a check of the pipeline, not figures to quote).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable

#: name -> (title, what it measures, full argv, quick argv)
BENCHMARKS = {
    "memory": ("Peak memory of the protocol over one gradient step",
               "The `fl` ResNet-18 at base widths 16, 32 and 64 with the default offload "
               "policy (target <= 3x).",
               ["benchmarks/bench_memory.py", "--width", "16", "32", "64"],
               ["benchmarks/bench_memory.py", "--width", "4", "--iters", "1"]),
    "memory-mlp": ("Peak memory of the protocol on the MLP",
                   "The `mlp` task (782,186 parameters, no loss terms: one retained graph) with "
                   "the default offload policy (target <= 3x).",
                   ["benchmarks/bench_memory.py", "--task", "mlp"],
                   ["benchmarks/bench_memory.py", "--task", "mlp", "--preset", "smoke", "--iters",
                    "1"]),
    "memory-mlp-resident": ("Peak memory of the protocol on the MLP, nothing parked",
                            "The same run with `--offload off`: the carried vectors stay in "
                            "memory, which is what the default policy's parking saves on this "
                            "model (and what its parks and fetches cost in time: What offloading "
                            "costs).",
                            ["benchmarks/bench_memory.py", "--task", "mlp", "--offload", "off"],
                            ["benchmarks/bench_memory.py", "--task", "mlp", "--preset", "smoke",
                             "--iters", "1", "--offload", "off"]),
    "protocol": ("One protocol iteration against its lower bound",
                 "Per task: one iteration in gradients, its lower bound from the same primitives "
                 "timed alone, `iteration / bound` per round and the breakdown (target <= 1.1).",
                 ["benchmarks/bench_protocol.py", "--iters", "10", "--repeats", "3", "--rounds",
                  "2"],
                 ["benchmarks/bench_protocol.py", "--tasks", "mlp", "--preset", "smoke", "--iters",
                  "4", "--repeats", "1"]),
    "reductions": ("Float32 reductions: the body's and fused kernels",
                   "A dot product and a norm over the MLP's parameter vector as the body "
                   "forms them (pairwise "
                   "`Tensor.sum`) and by fused kernels (`torch.dot`, `torch.linalg.vector_norm`, "
                   "`torch._foreach_norm`): CPU time and error against the exact value.",
                   ["benchmarks/bench_reductions.py", "--repeats", "30"],
                   ["benchmarks/bench_reductions.py", "--preset", "smoke", "--repeats", "2"]),
    "trust": ("What the error estimates and the converged extremes cost",
              "Per task: the protocol with the error columns and the converged extreme eigenpairs "
              "against the same run without them, interleaved, CPU time (target <= 1.3x).",
              ["benchmarks/bench_trust_cost.py", "--iters", "41", "--rounds", "2"],
              ["benchmarks/bench_trust_cost.py", "--tasks", "mlp", "--preset", "smoke", "--iters",
               "4", "--rounds", "1"]),
    "hvp": ("HVP cost in gradients",
            "One Hessian-vector product against one gradient of the same loss, the three task "
            "models; the row `grad+hvp (retained graph)` is what the protocol pays per product.",
            ["benchmarks/bench_hvp.py", "--repeats", "3", "--threads", "1", "--clock", "cpu"],
            ["benchmarks/bench_hvp.py", "--repeats", "1", "--threads", "1", "--clock", "cpu",
             "--models", "mlp", "--batch", "0"]),
    "threads": ("One and two intra-op threads",
                "Wall seconds per protocol iteration with 1 and 2 threads, interleaved (the CLI's "
                "default is 1), and the count `--threads auto` picks from one gradient at each.",
                ["benchmarks/bench_threads.py", "--tasks", "mlp,fl", "--iters", "3", "--repeats",
                 "2"],
                ["benchmarks/bench_threads.py", "--tasks", "mlp", "--iters", "1", "--repeats",
                 "1"]),
    "offload": ("What offloading costs",
                "Protocol wall time with the carried vectors resident and parked, "
                "interleaved, min of repeats.",
                ["benchmarks/bench_offload.py", "--task", "mlp", "--iters", "6", "--repeats", "3"],
                ["benchmarks/bench_offload.py", "--task", "mlp", "--preset", "smoke", "--iters",
                 "2", "--repeats", "1"]),
}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    import torch

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True,
                                timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version(), "commit": commit,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"}


def run_one(name: str, quick: bool) -> dict:
    title, what, full, small = BENCHMARKS[name]
    argv = small if quick else full
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    env.pop("CROSSCURV_DEFAULT_THREADS", None)
    load0 = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    commit = machine()["commit"]  # the code the benchmark runs: taken before it starts
    t0 = time.perf_counter()
    proc = subprocess.run([PY, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return {"name": name, "title": title, "what": what, "command": "python " + " ".join(argv),
            "rc": proc.returncode, "out": proc.stdout.rstrip(), "err": proc.stderr.strip()[-2000:],
            "wall": wall, "load": (load0, os.getloadavg()[0]), "started": started, "commit": commit}


TITLE = "# Performance (generated)"


def _provenance(quick: bool) -> str:
    return (f"Generated by `python benchmarks/bench_all.py{' --quick' if quick else ''}` "
            "(`make performance`); do not edit by hand: rerun the command.")


def _span(values: list[float], spec: str = ".2f") -> str:
    lo, hi = min(values), max(values)
    return format(lo, spec) if format(lo, spec) == format(hi, spec) else f"{lo:{spec}}-{hi:{spec}}"


def _table_column(section: str, header_part: str) -> list[tuple[str, float]]:
    """``(first cell, value)`` of the Markdown table rows of ``section`` under the column whose
    header contains ``header_part``."""
    out, col = [], None
    for line in section.splitlines():
        cells = ([c.strip() for c in line.strip().strip("|").split("|")]
                 if line.startswith("|") else [])
        if not cells:
            col = None
        elif col is None:
            col = next((i for i, c in enumerate(cells) if header_part in c), None)
        elif not all(len(c) >= 3 and set(c) <= set("-: ") for c in cells) and col < len(cells):
            m = re.match(r"[0-9.]+", cells[col])
            if m:
                out.append((cells[0], float(m.group(0))))
    return out


def findings(text: str) -> list[str]:
    """At most five lines read off the sections of a report: which targets were missed, peak memory,
    the protocol iteration against its bound, the error estimates' cost, products, threads and
    offloading."""
    titles = {spec[0]: name for name, spec in BENCHMARKS.items()}
    sections = {}
    for part in ("\n" + text).split("\n## ")[1:]:
        title = part.split("\n", 1)[0].strip()
        if title in titles:
            sections[titles[title]] = part
    if not sections:
        return ["- No benchmark has run yet."]
    missed = [BENCHMARKS[n][0] for n, sec in sections.items() if ": target missed" in sec]
    out = [f"- {len(missed)} of {len(sections)} benchmarks exited with a missed target"
           + (f": {'; '.join(missed)}." if missed else ".")]
    mem = []
    for name, label in (("memory", "fl width "), ("memory-mlp", "mlp"),
                        ("memory-mlp-resident", "mlp nothing parked")):
        for first, v in _table_column(sections.get(name, ""), "protocol / gradient step"):
            mem.append(f"{label}{first if label.endswith(' ') else ''} {v:g}")
    if mem:
        out.append("- Peak memory, protocol / gradient step: " + ", ".join(mem) + " (target <= 3).")
    bound = [float(x) for x in re.findall(r"^  lower bound \(.*iteration / bound = ([0-9.]+)",
                                          sections.get("protocol", ""), re.M)]
    trust = [float(x) for x in re.findall(r"median: steady [0-9.]+, run of K = 500: ([0-9.]+)",
                                          sections.get("trust", ""))]
    if bound or trust:
        parts = ([f"one protocol iteration is {_span(bound)} of its lower bound (target <= 1.1)"]
                 if bound else [])
        parts += ([f"the error estimates cost {_span(trust)}x at K = 500 (target <= 1.3)"]
                  if trust else [])
        out.append("- Per task: " + "; ".join(parts) + ".")
    hvp = [v for _, v in _table_column(sections.get("hvp", ""), "/ grad (median)")]
    hvp_rows = [(first, v) for first, v in _table_column(sections.get("hvp", ""), "/ grad (median)")
                if first.startswith("point: hvp on the retained graph")]
    two = [v for _, v in _table_column(sections.get("threads", ""), "2 / 1")]
    park = re.findall(r"on/off = ([0-9.]+)", sections.get("offload", ""))
    parts = []
    if hvp and hvp_rows:
        parts.append(f"an HVP on the retained graph costs {_span([v for _, v in hvp_rows])} "
                     "gradients")
    if two:
        parts.append(f"2 threads take {_span(two)} of 1 thread's time")
    if park:
        parts.append(f"parking the carried vectors costs {_span([float(x) for x in park])}x")
    if parts:
        out.append("- Products and threads: " + "; ".join(parts) + ".")
    return out[:5]


def render(info: dict, results: list[dict], started: str, quick: bool) -> str:
    lines = [TITLE, "", "", _provenance(quick), "",
             f"- date: {started} (UTC)",
             f"- machine: {info['cpu']}, {info['cpus']} logical CPUs, GPU: {info['gpu']}",
             f"- torch {info['torch']}, Python {info['python']}, crosscurv commit {info['commit']}",
             "- threads: 1 intra-op thread per benchmark (`OMP_NUM_THREADS=1`), except the "
             "thread comparison",
             "- the machine may be shared: compare ratios measured inside one benchmark "
             "(interleaved), not absolute times across sections; each section gives the load "
             "average before and after it", ""]
    if quick:
        lines += ["**Quick run: smallest sizes, a check of the pipeline; no figure here is to be "
                  "quoted.**", ""]
    for r in results:
        status = "" if r[
            "rc"] == 0 else f" (exit code {r['rc']}{': target missed' if r['rc'] == 1 else ''})"
        lines += [f"## {r['title']}", "", r["what"], "",
                  f"`{r['command']}`: {r['wall']:.0f} s wall, load average {r['load'][0]:.1f} -> "
                  f"{r['load'][1]:.1f}{status}" + (
                  f"; run {r['started']} UTC at commit {r['commit']}"
                                                     if r.get("started") else ""), ""]
        out = r["out"]
        if r["name"] in ("memory", "memory-mlp", "memory-mlp-resident", "reductions",
                         "threads") and r["rc"] in (0, 1):
            lines += [out, ""]  # already Markdown
        else:
            lines += ["```", out or "(no output)", "```", ""]
        if r["rc"] not in (0, 1) and r["err"]:
            lines += ["stderr (end):", "", "```", r["err"], "```", ""]
    text = "\n".join(lines).rstrip() + "\n"
    lines[2:3] = findings(text) + [""]
    return "\n".join(lines).rstrip() + "\n"


def merge(paths: list[str]) -> str:
    """One report from the sections of several: the first file's header, then each known section in
    order."""
    titles = {spec[0]: name for name, spec in BENCHMARKS.items()}
    header, sections, sources = None, {}, 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            parts = ("\n" + fh.read()).split("\n## ")
        if header is None:
            header = parts[0].lstrip("\n")
        merged = re.search(r"^- assembled by `bench_all.py --merge` from ([0-9]+) reports", parts[
            0], re.M)
        # a merged report counts the reports it was made of
        sources += int(merged.group(1)) if merged else 1
        for part in parts[1:]:
            title = part.split("\n", 1)[0].strip()
            if title not in titles:
                raise SystemExit(f"bench_all: {path}: unknown section {title!r}")
            sections[titles[title]] = "## " + part.rstrip() + "\n"
    body = [sections[n] for n in BENCHMARKS if n in sections]
    note = (f"- assembled by `bench_all.py --merge` from {sources} reports of `--only` "
            f"invocations; the date and commit above are the first one's; each section names its "
            f"own command and load average, and its own date and commit where it has them (a "
            f"section without them ran at the date and commit above)")
    header_lines = header.rstrip().split("\n")
    quick = any(line.startswith(("Generated by", "Written by")) and " --quick`" in line
                for line in header_lines)
    first = next((i for i, line in enumerate(header_lines) if line.startswith("- date:")),
                 len(header_lines))  # the findings and provenance above the date are written anew
    kept = [line for line in header_lines[first:] if not line.startswith("- assembled by")]
    text = (TITLE + "\n\n\n\n" + _provenance(quick) + "\n\n" + "\n".join(kept).rstrip() + "\n"
            + note + "\n\n" + "\n".join(body)).rstrip() + "\n"
    return text.replace("\n\n\n\n", "\n\n" + "\n".join(findings(text)) + "\n\n", 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--out", default=os.path.join("reports", "performance.md"))
    ap.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of "
                    + ",".join(BENCHMARKS))
    ap.add_argument("--quick", action="store_true",
                    help="smallest sizes: a pipeline check, not figures")
    ap.add_argument("--merge", nargs="+", default=None, metavar="MD",
                    help="write --out from the sections of earlier outputs (no benchmark runs)")
    args = ap.parse_args(argv)
    if args.merge:
        text = merge(args.merge)
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"bench_all: merged {len(args.merge)} file(s) into {args.out}", file=sys.stderr)
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in names if n not in BENCHMARKS]
    if bad:
        ap.error(f"unknown benchmark(s) {', '.join(bad)} (known: {', '.join(BENCHMARKS)})")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    info = machine()
    results = []
    for name in names:
        print(f"bench_all: {name} ...", file=sys.stderr, flush=True)
        results.append(run_one(name, args.quick))
        text = render(info, results, started, args.quick)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        # written after each benchmark: a long run shows progress
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, args.out)
    print(f"bench_all: wrote {args.out}", file=sys.stderr)
    return 0 if all(r["rc"] in (0, 1) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
