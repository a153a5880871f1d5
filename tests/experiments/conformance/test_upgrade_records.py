"""crosscurv.experiments.conformance.upgrade_records: an older run folder upgraded in place equals the run the current code writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import crosscurv.numeric.protocol
from crosscurv.experiments.conformance.upgrade_records import upgrade_run
from tests.numeric.cases import relu_mlp
from crosscurv.numeric.protocol import run_protocol
from crosscurv.numeric.records import read_records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _summary(path):
    with open(os.path.join(path, "summary.json")) as fh:
        return json.load(fh)


def test_an_upgraded_old_run_equals_the_current_run(tmp_path, monkeypatch):
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    run_protocol(relu_mlp(), "gs", 0.5, 25, out_dir=new)
    with monkeypatch.context() as m:  # the code before reconcile: the segment rule's values as they come
        m.setattr(crosscurv.numeric.protocol, "reconcile", lambda gap, err, *losses: (gap, err))
        m.setattr(crosscurv.numeric.protocol, "plain_suffices", lambda *losses: False)
        run_protocol(relu_mlp(), "gs", 0.5, 25, out_dir=old)
    before = read_records(os.path.join(old, "records.csv"))
    changed, plain, _ = upgrade_run(old)
    assert changed > 0 and plain > 0  # the case exercises the rule
    assert read_records(os.path.join(old, "records.csv")) == read_records(os.path.join(new, "records.csv"))
    assert [r["gap"] for r in before] != [r["gap"] for r in read_records(os.path.join(old, "records.csv"))]
    s_old, s_new = _summary(old), _summary(new)
    assert s_old["metrics"] == s_new["metrics"]
    assert s_old["bound_bk_coverage"] == s_new["bound_bk_coverage"]
    assert upgrade_run(old)[0] == 0  # idempotent


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "crosscurv.experiments.conformance.upgrade_records", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_upgrades_a_committed_run_once_and_refuses_a_folder_without_runs(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(os.path.join(ROOT, "reports", "sweeps", "threads1-control", "runs", "mlp-default-seed0-K5"), run)
    (tmp_path / "motivation").mkdir()
    (tmp_path / "motivation" / "records.csv").write_text("k,epoch,loss_seq\n1,0,2.3\n")
    (tmp_path / "motivation" / "summary.json").write_text("{}")
    out = _cli(str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n") == 1 and "0 of 5 rows changed" in out.stdout  # committed runs are up to date
    bad = _cli(str(tmp_path / "motivation"))
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
    assert _cli(str(tmp_path / "missing")).returncode == 2
