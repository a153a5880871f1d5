"""bench_all.py writes reports/performance.md: machine header, each benchmark under its command (no
benchmark run here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_all  # noqa: E402
import bench_memory  # noqa: E402

INFO = {"cpu": "Test CPU 9000", "cpus": 2, "torch": "2.13.0", "python": "3.11", "commit": "abc1234",
        "gpu": "none"}


def _result(name, out, rc=0):
    return {"name": name, "title": bench_all.BENCHMARKS[name][0], "what": bench_all.BENCHMARKS[
        name][1],
            "command": "python benchmarks/bench_x.py", "rc": rc, "out": out,
            "err": "Traceback: boom",
            "wall": 12.3, "load": (1.0, 2.0)}


def test_the_report_names_machine_threads_date_and_each_command():
    text = bench_all.render(INFO, [_result("memory", "| width |\n|---|"), _result("protocol",
        "iteration / bound"),
                                   _result("hvp", "", rc=2)], "2026-01-02 03:04", quick=False)
    assert "Test CPU 9000, 2 logical CPUs" in text and "torch 2.13.0" in text
    assert "commit abc1234" in text
    assert "- date: 2026-01-02 03:04 (UTC)" in text and "1 intra-op thread per benchmark" in text
    assert "`python benchmarks/bench_x.py`: 12 s wall, load average 1.0 -> 2.0" in text
    assert "\n| width |\n|---|\n" in text  # the memory table as Markdown
    assert "```\niteration / bound\n```" in text  # other outputs verbatim
    assert "(exit code 2)" in text and "Traceback: boom" in text  # a crash shows its stderr
    assert "Quick run" not in text
    assert "Quick run" in bench_all.render(INFO, [], "2026-01-02 03:04", quick=True)


def test_every_benchmark_command_exists_and_parses_its_flags():
    for name, (_, _, full, quick) in bench_all.BENCHMARKS.items():
        assert full[0] == quick[0] and (ROOT / full[0]).is_file(), name
        proc = subprocess.run([sys.executable, str(ROOT / full[0]), "--help"], capture_output=True,
                              text=True, timeout=120, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        flags = {a for a in full[1:] + quick[1:] if a.startswith("--")}
        assert all(f in proc.stdout for f in flags), (name, flags)


def test_bench_memory_help_states_the_policy_and_the_table_marks_the_target():
    help_text = bench_memory.parser().format_help()
    assert "16 MiB" in help_text and "2M" not in help_text
    args = argparse.Namespace(device="cpu", hvp="auto", chunk=None, offload="auto", iters=3,
                              threads=1, task="fl")
    rows = [{"width": 16, "n_params": 787258, "offloaded": True, "how": "VmHWM", "grad_mib": 24.5,
             "protocol_mib": 58.6,
             "ratio": 58.6 / 24.5, "examples": [7, 7, 6], "later_mib": 50.0, "later_ratio": 50.0
             / 24.5,
             "point_ratio": 1.5, "engine": "termwise"},
            {"width": 32, "n_params": 3137130, "offloaded": True, "how": "VmHWM", "grad_mib": 50.0,
             "protocol_mib": 200.0, "ratio": 4.0, "examples": [7, 7, 6], "later_mib": None,
             "later_ratio": None, "point_ratio": 1.875, "engine": "termwise"}]
    table = bench_memory.table(rows, args)
    assert "| 16 | 787,258 | yes | 24.5 | 58.6 | 2.39 | 50.0 | 2.04 | 1.50 |" in table
    assert "target <= 3" in table
    # no peak reset: not made up
    assert "| 32 | 3,137,130 | yes | 50.0 | 200.0 | 4.00 | n/a | n/a | 1.88 |" in table
    assert "engine termwise" in table


def test_merge_keeps_the_first_header_and_orders_the_sections(tmp_path):
    a = tmp_path / "a.md"
    b = tmp_path / "b.md"
    a.write_text(bench_all.render(INFO, [_result("memory", "| mem |")], "2026-01-02 03:04",
                                  quick=False))
    later = dict(INFO, commit="def5678")
    b.write_text(bench_all.render(later, [_result("threads", "| thr |"), _result("protocol",
        "iteration / bound")],
                                  "2026-01-02 05:06", quick=False))
    text = bench_all.merge([str(a), str(b)])
    assert text.count(
        "# Performance (generated)") == 1 and "commit abc1234" in text and "def5678" not in text
    heads = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert heads == ["## " + bench_all.BENCHMARKS[n][0] for n in ("memory", "protocol", "threads")]
    assert "| mem |" in text and "| thr |" in text and "iteration / bound" in text
    assert "assembled by `bench_all.py --merge` from 2 reports" in text and text.count(
        "- assembled by") == 1
    # a merged report merged again counts the reports it was made of
    merged = tmp_path / "merged.md"
    merged.write_text(text)
    again = bench_all.merge([str(merged), str(a)])
    assert "assembled by `bench_all.py --merge` from 3 reports" in again and again.count(
        "- assembled by") == 1


MEMORY = ("| width | parameters | protocol / gradient step (target <= 3) |\n|---|---|---|\n"
          "| 16 | 787,258 | 2.39 |\n| 32 | 3,137,130 | 4.00 |")
TRUST = "mlp\n  median: steady 1.136, run of K = 500: 1.145 (target <= 1.3)\nfl\n" \
        "  median: steady 1.065, run of K = 500: 1.076 (target <= 1.3)"


def test_the_report_opens_with_findings_read_off_its_sections(tmp_path):
    text = bench_all.render(INFO, [_result("memory", MEMORY, rc=1), _result("trust", TRUST),
                                   _result("offload",
                                           "offload off: 5 s   on: 6 s   on/off = 1.160")],
                            "2026-01-02 03:04", quick=False)
    lines = text.splitlines()
    assert lines[2:6] == [
        "- 1 of 3 benchmarks exited with a missed target: "
        "Peak memory of the protocol over one gradient step.",
        "- Peak memory, protocol / gradient step: fl width 16 2.39, fl width 32 4 (target <= 3).",
        "- Per task: the error estimates cost 1.08-1.15x at K = 500 (target <= 1.3).",
        "- Products and threads: parking the carried vectors costs 1.16x.",
    ]
    assert lines[6] == "" and lines[7].startswith("Generated by `python benchmarks/bench_all.py`")
    path = tmp_path / "p.md"
    path.write_text(text)
    merged = bench_all.merge([str(path)]).splitlines()  # rendered again from the saved report
    assert merged[:8] == lines[:8]
    assert any(ln.startswith("- assembled by `bench_all.py --merge` from 1 reports")
               for ln in merged)
