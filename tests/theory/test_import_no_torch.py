"""Importing theory, its optimizer forms included, and running their derivations never imports
torch."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: the statements run in a fresh interpreter: imports, then a derivation that must succeed
CASES = {
    "theory": [
        "import theory, crosscurv.theory.derivation, crosscurv.theory.report",
        "import crosscurv.theory.lambdified, crosscurv.theory.recursion",
        "import crosscurv.theory.cumulative",
        "assert crosscurv.theory.derive(2, 1, 'gs').ok",
    ],
    "optimizers": [
        "import crosscurv.theory.optimizers",
        "assert crosscurv.theory.optimizers.derive_optimizers(2, 1, 'gs').ok",
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_theory_never_imports_torch(case):
    code = "\n".join(
        ["import sys", *CASES[case],
         "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))",
         "print('TORCH' if bad else 'CLEAN')"]
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "CLEAN"
