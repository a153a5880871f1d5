"""Importing theory (and running the derivation) never imports torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_theory_never_imports_torch():
    code = (
        "import sys\n"
        "import theory, crosscurv.theory.derivation, crosscurv.theory.report, "
        "crosscurv.theory.lambdified, crosscurv.theory.recursion, " "crosscurv.theory.cumulative\n"
        "r = crosscurv.theory.derive(2, 1, 'gs')\n"
        "assert r.ok\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('TORCH' if bad else 'CLEAN')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "CLEAN"
