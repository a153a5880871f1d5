"""``crosscurv report``'s studies call the library: a run is resumed, started over only when its settings
changed, and any other error is reported instead of deleting the run folder."""

from __future__ import annotations

import json
import os

import pytest

from crosscurv.experiments.reports.build import _run_study
from crosscurv.numeric.protocol import ResumeError
from crosscurv.numeric.records import read_records


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


def test_the_report_runs_its_studies_with_one_thread_and_aggregates_the_sweeps(tmp_path):
    """``build_report``: a study runs with one intra-op thread (recorded), a run with other settings is not
    reused, and the sweeps under ``OUT/sweeps`` give Table 1 over seeds in table1.md, studies.md and the index."""
    import torch

    from crosscurv.experiments.reports.build import STUDY_THREADS, build_report
    from tests.experiments.studies.test_studies import seeds_sweep

    out = tmp_path / "reports"
    seeds_sweep(out / "sweeps")  # OUT/sweeps/seeds with two finished mlp seeds
    stale = out / "runs" / "mlp"
    stale.mkdir(parents=True)
    (stale / "summary.json").write_text(json.dumps({"status": "complete",
                                                    "settings": {"preset": "smoke", "iters": 3, "seed": 0}}))
    (out / "optimizers.md").write_text("# optimizer studies\n")  # written by another command: linked, kept
    before = torch.get_num_threads()
    rc = build_report(out, "smoke", ("mlp",), scaling=False, derive=False, motivation=False, device="cpu")
    assert rc == 0 and torch.get_num_threads() == before  # restored
    with open(out / "runs" / "mlp" / "summary.json", encoding="utf-8") as fh:
        s = json.load(fh)
    assert s["settings"]["threads"] == STUDY_THREADS == 1 and s["settings"]["iters"] == 5  # rerun: K 3 != 5
    assert len(read_records(str(out / "runs" / "mlp" / "records.csv"))) == 5
    table1 = (out / "table1.md").read_text()
    assert "## Over seeds" in table1 and "87.5% [75.0%, 100.0%]" in table1
    index = (out / "README.md").read_text()
    assert "[studies.md](studies.md)" in index and "[seeds](sweeps/seeds): 2 finished runs, 1 not finished" in index
    assert "[optimizers.md](optimizers.md)" in index and (out / "optimizers.md").read_text() == "# optimizer studies\n"
    assert "threads = 1" in index and "## Reproducibility" in index and "## Table 1 over seeds" in index
    assert (out / "studies.md").is_file() and (out / "figures" / "gap_mlp.png").is_file()
    # the index opens with what was found (at most five lines), as headline.md; table1.md too
    lines = index.splitlines()
    found = lines[4:lines.index("", 4)]
    assert lines[2] == "## What the studies found" and 3 <= len(found) <= 5
    assert found[0].startswith("- Table 1 (2 seeds, K = 4): the recursive estimate names the "
                               "lower-loss scheme")
    assert "- Baselines: always naming the majority winner scores DNN" in found[1]
    assert "\n".join(found) in (out / "headline.md").read_text()
    assert table1.splitlines()[2] == found[0]
    assert "crosscurv studies --seeds reports/sweeps/seeds --out reports" in (out / "studies.md").read_text()
