"""benchmarks/bench_versions.py: the ``--same-work`` arm really switches the measured gap's segment off.

The arm patches ``crosscurv.numeric.gap.SegmentGap`` by attribute name inside the timed process; if a rename
left the patch adding a new attribute instead, the arm would silently time the full work.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_versions as bv  # noqa: E402

# the wrapper's patch, then a segment whose interior would take three gradients of a loss that counts them
PROBE = """
import torch
calls = []
def loss(p):
    calls.append(1)
    return (p["w"] ** 3).sum()
from crosscurv.numeric.gap import segment_gap
a, b = {"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([0.5, 1.0])}
ga, gb = {"w": 3 * a["w"] ** 2}, {"w": 3 * b["w"] ** 2}
print(segment_gap(loss, a, b, ga, gb), len(calls))
"""


def _run(program: str) -> str:
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_same_work_arm_skips_the_segment_gradients():
    patch = bv.WITHOUT_GAP.split("; from crosscurv.experiments.cli")[0]
    assert _run(patch + "\n" + PROBE) == "(0.0, 0.0) 0"
    full = _run(PROBE)  # unpatched: the three inner gradients are taken and the gap is not zero
    value, calls = full.rsplit(" ", 1)
    assert int(calls) == 3 and not value.startswith("(0.0,")
