"""``crosscurv table`` over several runs: the settings that tell their rows apart, and every column
explained."""

from __future__ import annotations

import json

import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.reports.table import COLUMN_NOTES, differing_settings, load_run
from tests.experiments.reports.test_table_report import EST, GAPS, _write_run


def _with_settings(path, **settings):
    summary = json.loads((path / "summary.json").read_text())
    summary["settings"].update(settings)
    (path / "summary.json").write_text(json.dumps(summary))
    return path


GS_VU = {"name": "gs:2,1", "n_blocks": 2, "pairs": [[1, 2]], "order": [2, 1]}


def test_rows_of_different_runs_carry_the_settings_that_differ(tmp_path, capsys):
    a = _with_settings(
        _write_run(tmp_path / "a", "mf.py:mf", GAPS, EST, lr=0.1),
        preset=None,
        seed=0,
        blocks={"U": 30, "V": 20},
    )
    b = _with_settings(
        _write_run(tmp_path / "b", "mf.py:mf", GAPS, EST, lr=0.2),
        pattern=GS_VU,
        seed=0,
        blocks={"U": 30, "V": 20},
    )
    assert differing_settings([load_run(a), load_run(b)]) == ["pattern", "lr"]
    assert main(["table", str(a), str(b), "--format", "plain"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "every run: seed 0, optimizer sgd"
    head = out[2].split()
    assert head[:4] == ["Task", "pattern", "lr", "Estimate"]
    end = out.index("", 4)
    rows = [line.split() for line in out[4:end]]
    # each run: its three estimates and the majority-winner baseline (no one_step.csv here)
    assert [r[1:3] for r in rows] == [["gs", "0.1"]] * 4 + [
        ["gs:V,U", "0.2"]
    ] * 4  # block names, not 2,1
    assert sum("majority" in " ".join(r) for r in rows) == 2
    # the footnote explains every column, as --help does
    notes = out[end + 1:]
    for column in (
        "Correct",
        "JC hits",
        "GS hits",
        "MAE",
        "Max. AE",
        "Undecided",
        "Coverage",
        "Precision",
        "Calibrated",
    ):
        assert any(line.startswith(f"{column}: ") for line in notes), column
    with pytest.raises(SystemExit):
        main(["table", "--help"])
    helptext = capsys.readouterr().out
    assert all(f"{column}: " in helptext for column in COLUMN_NOTES)


def test_a_diverged_run_is_flagged_under_the_table(tmp_path, capsys):
    run = _with_settings(_write_run(tmp_path / "d", "mlp", GAPS, EST), seed=0)
    summary = json.loads((run / "summary.json").read_text())
    summary.update(status="diverged", diverged_at=6)
    (run / "summary.json").write_text(json.dumps(summary))
    assert main(["table", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"{run} diverged at k = 6: its rows cover the 5 iterations before" in out
