"""The optimizer modules of theory (and their derivation) never import torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_optimizer_theory_never_imports_torch():
    code = (
        "import sys\nimport crosscurv.theory.optimizers\nr = "
        "crosscurv.theory.optimizers.derive_optimizers(2, 1, 'gs')\nassert r.ok\nbad = sorted(m "
        "for m in sys.modules if m == 'torch' or m.startswith('torch.'))\nprint('TORCH' if bad "
        "else 'CLEAN')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "CLEAN"
