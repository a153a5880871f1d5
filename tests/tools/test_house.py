"""``make house`` (``tools/house.py``) as a maintainer runs it: the lines and code lines per layer,
and the exit status of ``--check``, on a small tree whose counts are known."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOUSE = os.path.join(REPO, "tools", "house.py")

MODULE = textwrap.dedent('''\
    """A module docstring
    over two lines."""

    # a comment
    import math


    def f(x):
        """One line."""
        return math.sqrt(x)  # a trailing comment is code
''')


def _house(root, *args):
    return subprocess.run([sys.executable, HOUSE, "--root", str(root), *args],
                          capture_output=True, text=True, timeout=60)


def _row(out: str, layer: str) -> list[str]:
    return next(ln.split() for ln in out.splitlines() if ln.split()[:1] == [layer])


def test_lines_and_code_lines_per_layer(tmp_path):
    (tmp_path / "numeric").mkdir()
    (tmp_path / "numeric" / "a.py").write_text(MODULE)
    (tmp_path / "numeric" / "tests").mkdir()  # tests are not counted
    (tmp_path / "numeric" / "tests" / "test_a.py").write_text(MODULE)
    r = _house(tmp_path, "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _row(r.stdout, "numeric") == ["numeric", "1", "10", "3"]  # import, def, return
    assert _row(r.stdout, "total")[:2] == ["total", "10"]


def test_check_exits_1_on_a_module_over_600_lines(tmp_path):
    (tmp_path / "theory").mkdir()
    (tmp_path / "theory" / "big.py").write_text("x = 1\n" * 601)
    r = _house(tmp_path, "--check")
    assert r.returncode == 1 and "theory/big.py" in r.stdout
    assert _house(tmp_path).returncode == 0  # without --check: a report, not a verdict


def test_the_repository_keeps_its_module_and_function_limits():
    """The house's own modules stay within 600 lines and its functions within 100 (the line total's
    target is reported by ``make house``, not held here)."""
    r = _house(REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "modules over 600 lines: 0" in r.stdout, r.stdout
    assert "functions over 100 lines: 0" in r.stdout, r.stdout
