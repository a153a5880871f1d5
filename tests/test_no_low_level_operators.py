"""The packages call no low-level operator that assumes a memory layout.

The suite once had a hand-written convolution double backward on
``torch.ops.aten.convolution_backward``; when ``crosscurv run fl --preset smoke`` crashed inside
that kernel it was the first suspect (the cause was a channels-last batch, README, Performance).
Public ``torch`` / ``torch.nn.functional`` operators and autograd's own derivative formulas check
and adapt their operands' layout; direct ``aten`` calls and custom ``autograd.Function`` rules skip
those checks, and their derivatives need their own proofs. So the suite uses none: this test fails
if one appears, and whoever adds one must also add it here with a test that feeds it non-contiguous,
expanded and channels-last operands in float32 and float64.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "numeric", "experiments")

#: (file, construct) pairs that are allowed, each with its layout test: - the NumPy loss bridge of
#: ``numpy_user_step`` (its value and gradient are the user's NumPy callables; layout test:
#: tests/numeric/test_numpy_step.py::test_the_numpy_bridge_reads_any_layout)
ALLOWED: set[tuple[str, str]] = {
    ("numeric/validation/numpy_step.py", "class _Loss(autograd.Function)"),
}


def _low_level_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = []
            cur: ast.AST = node
            while isinstance(cur, ast.Attribute):
                dotted.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                dotted.append(cur.id)
            name = ".".join(reversed(dotted))
            if name.startswith("torch.ops.") or name.endswith("_C._VariableFunctions"):
                found.append(f"line {node.lineno}: {name}")
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if ast.unparse(base).endswith("autograd.Function"):
                    found.append(f"line {node.lineno}: class {node.name}(autograd.Function)")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch.ops"):
            found.append(f"line {node.lineno}: from {node.module} import ...")
    return found


def test_the_detector_sees_the_constructs_it_guards_against(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import torch\n_aten = torch.ops.aten\nclass F(torch.autograd.Function):\n    pass\n",
        encoding="utf-8")
    uses = _low_level_uses(sample)
    assert any("torch.ops.aten" in u for u in uses)
    assert any("class F" in u for u in uses)


def test_no_package_module_calls_low_level_operators():
    offenders = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for use in _low_level_uses(path):
                if (rel, use.split(": ", 1)[1]) not in ALLOWED:
                    offenders.append(f"{rel} {use}")
    assert not offenders, (
        "low-level operators bypass the layout checks of the public torch API; "
        "use torch / torch.nn.functional, or allow-list them with a layout test:\n" + "\n".join(
        offenders))
