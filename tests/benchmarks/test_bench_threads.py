"""bench_threads.py: seconds per iteration with 1 and 2 threads and what ``--threads auto`` picks,
on the smoke MLP (a check that the benchmark runs and reports its pick, not figures to quote)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_has_the_pick_of_threads_auto_and_whether_it_agrees():
    proc = subprocess.run([sys.executable, "benchmarks/bench_threads.py", "--tasks", "mlp",
                           "--preset", "smoke", "--iters", "1", "--repeats",
                           "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| mlp |")]
    assert len(rows) == 1, proc.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 8 and cells[6] in ("1", "2"), cells
    faster, verdict = cells[7].split()
    assert faster in ("1", "2") and verdict == ("(agrees)" if faster == cells[6] else "(differs)")
