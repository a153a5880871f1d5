"""``crosscurv report``'s studies call the library: a run is resumed, started over only when its settings
changed, and any other error is reported instead of deleting the run folder."""

from __future__ import annotations

import json
import os

import pytest

from experiments.report import _run_study
from numeric.protocol import ResumeError
from numeric.records import read_records


def _mark_interrupted(run_dir):
    path = run_dir / "summary.json"
    s = json.loads(path.read_text())
    s["status"] = "interrupted"
    path.write_text(json.dumps(s))


def test_a_study_resumes_and_an_unreadable_checkpoint_is_reported_not_deleted(tmp_path):
    run_dir = tmp_path / "mlp"
    rc, _ = _run_study("mlp", "smoke", run_dir, fresh=False, device="cpu")
    assert rc == 0
    before = (run_dir / "records.csv").read_bytes()
    assert len(read_records(str(run_dir / "records.csv"))) == 5
    _mark_interrupted(run_dir)
    rc, _ = _run_study("mlp", "smoke", run_dir, fresh=False, device="cpu")  # resumed: nothing left to compute
    assert rc == 0 and (run_dir / "records.csv").read_bytes() == before
    (run_dir / "checkpoint.pt").write_bytes(os.urandom(2048))
    _mark_interrupted(run_dir)
    with pytest.raises(ResumeError, match="not a readable crosscurv checkpoint"):
        _run_study("mlp", "smoke", run_dir, fresh=False, device="cpu")
    assert (run_dir / "records.csv").read_bytes() == before  # kept: not a change of settings
