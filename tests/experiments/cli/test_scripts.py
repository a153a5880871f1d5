"""The study commands' entry points (``crosscurv.experiments.cli.scripts``): bad input is one line
on standard error and exit status 2, in-process and through the modules' ``python -m`` paths."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crosscurv.experiments.cli import scripts


@pytest.mark.parametrize(
    "name, argv, message",
    [
        (
            "one_step_along_jc",
            ["{tmp}/none"],
            "one_step_along_jc: no run folder among the paths given",
        ),
        (
            "contest",
            ["{tmp}/none", "--out", "{tmp}/c.md"],
            "contest: sweep folder {tmp}/none does not exist",
        ),
        (
            "rounding",
            ["--dtypes", "float16"],
            "rounding: bad --dtypes 'float16' (float32, float64)",
        ),
        (
            "rounding",
            ["--presets", "huge:3", "--tasks", "mlp"],
            "rounding: bad --presets entry 'huge:3'",
        ),
        (
            "portability",
            ["--emulations", "nope", "--out", "{tmp}/p.md"],
            "portability: unknown emulation(s) ['nope']",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(name, argv, message, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert getattr(scripts, name)(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message.format(tmp=tmp_path))


def test_a_module_path_runs_its_entry_point(tmp_path):
    """``python -m crosscurv.experiments.reports.one_step_along_jc`` is
    :func:`scripts.one_step_along_jc`."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosscurv.experiments.reports.one_step_along_jc",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "one_step_along_jc: no run folder among the paths given"


def test_every_entry_point_is_a_module_main():
    """Each function of :data:`scripts.__all__` is called by the ``__main__`` block of the module
    its docstring names, so that every ``python -m`` path of the Makefile and the docs reaches
    it."""
    import ast
    import importlib.util

    lines = [
        ln.split() for ln in scripts.__doc__.splitlines() if ln.strip().startswith("python -m")
    ]
    table = {ln[-1].rstrip("()"): ln[2] for ln in lines}
    assert sorted(table) == sorted(scripts.__all__)
    for func, module in table.items():
        tree = ast.parse(open(importlib.util.find_spec(module).origin, encoding="utf-8").read())
        guards = [
            n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)
        ]
        assert guards and f"scripts import {func}" in ast.unparse(guards[-1]), module


def test_a_study_command_describes_itself_with_the_whole_first_sentence():
    """``--help`` carries the module docstring's whole first paragraph, however it is wrapped."""
    import subprocess
    import sys

    from crosscurv.experiments.motivation import rate_scan

    out = subprocess.run([sys.executable, "-m", "crosscurv.experiments.motivation.rate_scan",
                          "--help"], capture_output=True, text=True, timeout=120).stdout
    first = " ".join(rate_scan.__doc__.split("\n\n")[0].split())
    assert len(rate_scan.__doc__.split("\n\n")[0].splitlines()) > 1  # wrapped in the source
    assert first.endswith("?") and first in " ".join(out.split())
