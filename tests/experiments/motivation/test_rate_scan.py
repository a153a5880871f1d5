"""The mlp panel over SGD rates: reversal, divergence and the clean reversal per run."""

from __future__ import annotations

import math
import subprocess
import sys

from crosscurv.experiments.motivation.rate_scan import findings, scan_row


def _records(seq, sim):
    """Evaluated rows (``eval_*``) at k = 10, 20, ... and one unevaluated row between."""
    rows = []
    for i, (a, b) in enumerate(zip(seq, sim), start=1):
        rows.append({"k": 10 * i - 5, "eval_seq": math.nan, "eval_sim": math.nan,
                     "eval_diff": math.nan})
        rows.append({"k": 10 * i, "eval_seq": a, "eval_sim": b, "eval_diff": a - b})
    return rows


def test_scan_row_tells_a_clean_reversal_from_a_divergence():
    sim = [2.0, 1.8, 1.6, 1.4, 1.2, 1.0]
    clean = scan_row(_records([1.9, 1.7, 1.6, 1.5, 1.3, 1.1], sim), 0.01, 0)
    assert clean["reversal"] and clean["diverged"] is None and clean["clean"]
    blow = scan_row(_records([1.9, 1.7, 1.6, 5.0, math.inf, 1e9], sim), 0.05, 0)
    assert blow["reversal"] and blow["diverged"] == 40 and not blow["clean"]
    ahead = scan_row(_records([1.9, 1.7, 1.5, 1.3, 1.1, 0.9], sim), 0.02, 1)
    assert not ahead["reversal"] and ahead["diverged"] is None
    lines = findings([clean, blow, ahead])
    assert lines[0].endswith("at eta = 0.01 (1/1).")
    assert lines[1] == ("- The in-place run diverges (loss past twice its start) at eta = 0.05 "
                        "(1/1), from step 40.")
    assert lines[2].endswith("stays ahead at the end at eta = 0.02 (1/1).")
    two = findings([clean, {**ahead, "lr": 0.01}])
    assert two[0].endswith("at eta = 0.01 (1/2).") and two[2].endswith("at eta = 0.01 (1/2).")
    assert findings([ahead])[0].endswith("at eta = none.")


def test_rate_scan_command_runs_the_smoke_panel_and_refuses_bad_rates(tmp_path):
    report = tmp_path / "scan.md"
    cmd = [sys.executable, "-m", "crosscurv.experiments.motivation.rate_scan", "--preset", "smoke",
           "--rates", "0.05", "--out", str(tmp_path / "runs"), "--report", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = report.read_text().splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith("- mlp panel, 1 runs:")
    row = next(ln for ln in lines if ln.startswith("| 0.05 "))
    assert row.split("|")[8].strip() == "3"  # smoke: 6 steps, evaluated every 2
    bad = subprocess.run(cmd[:-4] + ["--rates", "-1", "--out", str(tmp_path / "r2"), "--report",
                                     str(report)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_the_fl_panel_names_its_own_implementations_and_an_unknown_panel_is_refused(tmp_path):
    import pytest

    from crosscurv.experiments.motivation.rate_scan import render, run_scan
    from crosscurv.theory.errors import InputError

    sim = [2.0, 1.8, 1.6, 1.4, 1.2, 1.0]
    row = scan_row(_records([1.9, 1.7, 1.6, 5.0, math.inf, 1e9], sim), 0.04, 0)
    text = render([row], "cmd", "default", "fl")
    assert text.startswith("# Figure 1's fl panel over learning rates")
    assert ("- The FedAlt run diverges (loss past twice its start) at eta = 0.04 (1/1), from "
            "step 40.") in text
    assert "| final L FedAlt " in text and "| final L FedSim " in text
    with pytest.raises(InputError, match="unknown panel 'resnet'"):
        run_scan([0.01], [0], str(tmp_path), str(tmp_path / "r.md"), panel="resnet")
    with pytest.raises(InputError, match="needs the lora panel"):
        run_scan([0.01], [0], str(tmp_path), str(tmp_path / "r.md"), panel="fl", model="t5")


def test_the_python_api_takes_the_commands_defaults(tmp_path, monkeypatch):
    """``run_scan`` without rates or seeds scans the panel's default rates at seed 0, as the
    command does; without a folder or report it refuses in one line."""
    import pytest

    from crosscurv.experiments.motivation import rate_scan as mod
    from crosscurv.experiments.motivation import runner
    from crosscurv.theory.errors import InputError

    ran = []
    sim = [2.0, 1.8, 1.6]
    monkeypatch.setattr(runner, "run_panel", lambda panel, settings, seed, run_dir, **kw:
                        ran.append((panel, settings["optimizer"]["lr"], seed)))
    monkeypatch.setattr(runner, "load_run", lambda run_dir: {
        "records": _records([1.9, 1.7, 1.5], sim), "summary": {}})
    rows = mod.run_scan(out=str(tmp_path / "runs"), report=str(tmp_path / "r.md"), panel="fl")
    assert [lr for _, lr, _ in ran] == list(mod.DEFAULT_RATES["fl"])
    assert {seed for *_, seed in ran} == {0} and len(rows) == len(mod.DEFAULT_RATES["fl"])
    with pytest.raises(InputError, match="needs a run folder"):
        mod.run_scan([0.01])
