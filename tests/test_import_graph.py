"""The package's import graph: acyclic, the library free of the command line and of argparse.

The graph is read from the source with :mod:`ast`: one node per module of ``crosscurv`` (the folders
``crosscurv/``, ``theory/``, ``numeric/``, ``experiments/``), an edge for every import of another
module of the package, at module level or inside a function (a lazy import is an import); ``from
package import name`` is an edge to the module ``package.name`` where there is one, else to
``package``. Imports under ``if TYPE_CHECKING:`` (annotations only, never run) and under ``if
__name__ == "__main__":`` (a module's entry point, run as the separate module ``__main__``) are not
edges.
"""

from __future__ import annotations

import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the folders of the package (``crosscurv/`` is the namespace itself, the others its layers)
LIBRARY = ("crosscurv", "theory", "numeric", "experiments")
CLI = "crosscurv.experiments.cli"
#: cycles known and left, each with its reason; the test fails on any other cycle and on one of
#: these gone (then delete its line)
KNOWN_CYCLES: list = []


def modules():
    """``(module name, path, is_package)`` of every module of the package."""
    for top in LIBRARY:
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, f), REPO)[:-3].split(os.sep)
                    rel = rel[1:] if rel[0] == "crosscurv" else rel
                    if rel[-1] == "__init__":
                        rel = rel[:-1]
                    yield (
                        ".".join(["crosscurv", *rel]),
                        os.path.join(dirpath, f),
                        f == "__init__.py",
                    )


def _skipped(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if __name__ == "__main__":``."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    if isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING":
        return True
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _statements(name: str, path: str, is_package: bool):
    """``(module, names, line)`` of every import statement in ``path`` that runs when the module is
    used (relative imports resolved; ``names`` empty for ``import module``)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    package = name if is_package else name.rpartition(".")[0]
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _skipped(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, tuple(a.name for a in node.names), node.lineno
        todo.extend(ast.iter_child_nodes(node))


def imports(name: str, path: str, is_package: bool):
    """``(module, line)`` of every import in ``path`` that runs when the module is used; ``from a
    import b`` yields ``a`` and ``a.b``."""
    for mod, names, line in _statements(name, path, is_package):
        yield mod, line
        for n in names:  # from crosscurv.experiments import cli
            yield f"{mod}.{n}", line


def import_graph() -> dict:
    """``{module: {module of the package it imports: first line}}``.

    ``from package import name`` is an edge to the module ``package.name`` when there is one, else
    to ``package`` (the names it defines); the parent packages every import runs first are not
    edges.
    """
    found = {name: (path, pkg) for name, path, pkg in modules()}
    graph: dict = {}
    for name, (path, pkg) in found.items():
        edges = graph.setdefault(name, {})
        for mod, names, line in _statements(name, path, pkg):
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in found]
            targets = subs + ([mod] if len(subs) < len(names) or not names else [])
            for target in targets:
                if target in found and target != name:
                    edges[target] = min(line, edges.get(target, line))
    return graph


def cycles(graph: dict) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative), each
    sorted."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _describe(graph: dict, comp: list[str]) -> str:
    inside = set(comp)
    edges = [
        f"{a} -> {b} (line {line})"
        for a in comp
        for b, line in sorted(graph[a].items())
        if b in inside
    ]
    return "cycle: " + "; ".join(edges)


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 150 and "crosscurv.numeric.lanczos" in graph["crosscurv.numeric.estimates"]
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, "\n".join(_describe(graph, c) for c in new)
    assert all(c in found for c in KNOWN_CYCLES), (
        "a known cycle is gone: delete it from KNOWN_CYCLES"
    )


def test_the_cycle_check_sees_a_lazy_import_and_skips_annotations_and_entry_points(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from .b import g\n")
    b.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
        "if __name__ == '__main__':\n    from crosscurv.experiments.cli import main\n"
    )
    got_a = [m for m, _ in imports("crosscurv.x.a", str(a), False)]
    got_b = [m for m, _ in imports("crosscurv.x.b", str(b), False)]
    assert "crosscurv.x.b" in got_a and "crosscurv.x.b.g" in got_a
    assert got_b == ["typing", "typing.TYPE_CHECKING"]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_library_does_not_import_the_command_line():
    """Only ``crosscurv.experiments.cli`` itself and the entry points (``__main__`` modules and
    blocks) import the command line."""
    found = []
    for name, path, is_package in modules():
        if (
            name == CLI
            or name.startswith(CLI + ".")
            or name.endswith(".__main__")
            or name == "crosscurv"
        ):
            continue
        for mod, line in imports(name, path, is_package):
            parts = mod.split(".")
            if parts[:3] == CLI.split(".") or parts[:2] == ["experiments", "cli"]:
                found.append(f"{os.path.relpath(path, REPO)}:{line} imports {mod}")
    assert not found, "\n".join(found)


def test_only_the_command_line_parses_arguments():
    """argparse is imported by ``crosscurv.experiments.cli`` alone: library modules take typed
    parameters (a study's ``python -m`` entry point is its function in
    :mod:`crosscurv.experiments.cli.scripts`)."""
    found = [
        f"{os.path.relpath(path, REPO)}:{line}"
        for name, path, is_package in modules()
        if not (name == CLI or name.startswith(CLI + "."))
        for mod, line in imports(name, path, is_package)
        if mod == "argparse"
    ]
    assert not found, "argparse outside the command line: " + ", ".join(found)


def test_the_check_resolves_a_relative_import_of_the_command_line(tmp_path):
    """``from ..cli import main`` in ``experiments/sweep/x.py`` is the command line."""
    f = tmp_path / "x.py"
    f.write_text(
        "from ..cli import main\nfrom .. import cli\nimport crosscurv.experiments.cli.threads\n"
    )
    mods = [m for m, _ in imports("crosscurv.experiments.sweep.x", str(f), False)]
    assert "crosscurv.experiments.cli" in mods and "crosscurv.experiments.cli.main" in mods
    assert "crosscurv.experiments.cli.threads" in mods
