"""The size of the house: lines of Python outside tests per layer, the largest modules and the
longest functions, against the targets in docs/design.md (``make house``).

    python tools/house.py            # the table and the modules/functions over their limits
    python tools/house.py --check    # exit 1 when a target is missed

Counts are physical lines (blank and comment lines included), as ``wc -l`` counts them; the
``code`` column leaves out blank lines, comment lines and docstrings, the floor under the total that
no rewording of prose can go below.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

#: the folders counted, in the order printed
LAYERS = ("theory", "numeric", "experiments", "crosscurv", "benchmarks", "tools")
#: the targets the figures are held to
MAX_TOTAL, MAX_MODULE, MAX_FUNCTION = 24_000, 600, 100


def python_files(root: str, layer: str) -> list[str]:
    """The ``.py`` files below ``root/layer``, sorted; ``tests`` folders excluded."""
    found = []
    for folder, dirs, files in os.walk(os.path.join(root, layer)):
        dirs[:] = sorted(d for d in dirs if d not in ("tests", "__pycache__"))
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


def long_functions(path: str, limit: int) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function in ``path`` longer than ``limit`` lines."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    n = child.end_lineno - child.lineno + 1
                    if n > limit:
                        out.append((name, n))
                visit(child, name + ".")

    visit(tree, "")
    return out


def code_lines(source: str) -> int:
    """Lines of ``source`` that are neither blank, nor comments, nor part of a docstring (of the
    module, a class or a function)."""
    lines = source.splitlines()
    skip = {i for i, ln in enumerate(lines) if not ln.strip() or ln.strip().startswith("#")}
    for node in ast.walk(ast.parse(source)):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        first = node.body[0] if isinstance(node, kinds) and node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                first.value.value, str):
            skip.update(range(first.lineno - 1, first.end_lineno))
    return len(lines) - len(skip)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    total, code_total, big, longf = 0, 0, [], []
    print(f"{'layer':<12} {'modules':>8} {'lines':>8} {'code':>8}")
    for layer in LAYERS:
        files = python_files(args.root, layer)
        lines = code = 0
        for path in files:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
            n = source.count("\n") + (0 if source.endswith("\n") or not source else 1)
            lines += n
            code += code_lines(source)
            rel = os.path.relpath(path, args.root)
            if n > MAX_MODULE:
                big.append((rel, n))
            longf += [(f"{rel}:{name}", m) for name, m in long_functions(path, MAX_FUNCTION)]
        total += lines
        code_total += code
        print(f"{layer:<12} {len(files):>8} {lines:>8} {code:>8}")
    print(f"{'total':<12} {'':>8} {total:>8} {code_total:>8}   (target <= {MAX_TOTAL} lines)")
    print(f"modules over {MAX_MODULE} lines: {len(big)}")
    for rel, n in sorted(big, key=lambda t: -t[1]):
        print(f"  {n:>5}  {rel}")
    print(f"functions over {MAX_FUNCTION} lines: {len(longf)}")
    for name, n in sorted(longf, key=lambda t: -t[1]):
        print(f"  {n:>5}  {name}")
    missed = total > MAX_TOTAL or big or longf
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
