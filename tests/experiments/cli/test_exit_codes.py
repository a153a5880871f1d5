"""Exit codes: an internal error (a bug in crosscurv) exits 70 with one stderr line in every
command.

1 means "the check failed / the verdict is negative" for validate-step, validate-records, report
--check, derive and scaling, so a crash must never exit 1: a CI script has to tell a bug in the
suite from a bug in the code it checks.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from crosscurv.experiments import cli
from crosscurv.experiments.cli import COMMANDS, EXIT_CODES, EXIT_INTERNAL_ERROR, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _Bug(RuntimeError):
    pass


def _crash(*_a, **_k):
    raise _Bug("a deliberate bug\nsecond line of the message")


def _one_internal_error_line(err: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("crosscurv: internal error: _Bug: a deliberate bug"), lines[0]
    assert "second line" not in lines[0]


#: the smallest valid argv of every command (parsing must succeed so that the command's run is
#: reached)
ARGV = {
    "derive": ["derive"],
    "run": ["run", "mlp"],
    "advise": ["advise", "mlp", "--iters", "2"],
    "scaling": ["scaling", "--quick"],
    "table": ["table", "somewhere"],
    "report": ["report"],
    "validate-step": ["validate-step", "examples/lora_steps.py:alternating"],
    "validate-records": ["validate-records", "theirs.csv", "--task", "mlp"],
    "golden": ["golden", "--out", "somewhere"],
    "sweep": ["sweep", "--task", "mlp"],
    "motivation": ["motivation"],
    "studies": ["studies", "--seeds", "somewhere"],
}


def test_every_command_has_a_case():
    assert set(ARGV) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_internal_error_exits_70_with_one_line(name, monkeypatch, capsys):
    mod = importlib.import_module(f"crosscurv.experiments.cli.commands.{COMMANDS[name]}")
    monkeypatch.setattr(mod, "run", _crash)
    monkeypatch.delenv("CROSSCURV_DEBUG", raising=False)
    code = main(ARGV[name])
    assert code == EXIT_INTERNAL_ERROR == 70
    _one_internal_error_line(capsys.readouterr().err)


def test_report_check_internal_error_is_not_a_failed_check(monkeypatch, capsys):
    import crosscurv.experiments.reports.check as rc

    monkeypatch.setattr(rc, "check_runs", _crash)
    monkeypatch.delenv("CROSSCURV_DEBUG", raising=False)
    assert main(["report", "--check", "reports/runs/mlp"]) == 70
    _one_internal_error_line(capsys.readouterr().err)


def test_bad_input_still_exits_2_and_debug_still_raises(monkeypatch, capsys):
    assert main(["run", "no-such-task-xyz"]) == 2
    assert capsys.readouterr().err.strip().startswith("crosscurv: error:")
    mod = importlib.import_module("crosscurv.experiments.cli.commands.derive")
    monkeypatch.setattr(mod, "run", _crash)
    monkeypatch.setenv("CROSSCURV_DEBUG", "1")
    with pytest.raises(_Bug):
        main(["derive"])


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes" in out
    for code in (0, 1, 2, 3, 70, 130):
        assert code in EXIT_CODES
        assert f"{code:>3}  " in out, code
    assert "70: internal error" in cli.__doc__


def test_a_real_process_exits_70(tmp_path):
    """The interpreter's exit status, not main's return value: a crash inside validate-step's run.
    """
    code = ("import sys, crosscurv.experiments.cli.commands.validate_step as m\ndef boom(args):\n  "
            "  raise KeyError('deliberate')\nm.run = boom\nfrom crosscurv.experiments.cli import "
            "main\nsys.exit(main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if k != "CROSSCURV_DEBUG"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code, "validate-step",
                           "examples/lora_steps.py:alternating"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 70, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "crosscurv: internal error: KeyError: 'deliberate'"), proc.stderr
