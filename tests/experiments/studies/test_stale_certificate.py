"""studies.md says so when the sweeps' recorded certificate is not the current one."""

from __future__ import annotations

from pathlib import Path

from crosscurv.experiments.reports.table import _with_certificates
from crosscurv.experiments.studies.collect import read_sweep
from crosscurv.experiments.studies.report import _stale_certificate_lines

SEEDS = Path(__file__).resolve().parents[3] / "reports" / "sweeps" / "seeds"


def test_a_recorded_certificate_other_than_the_current_one_is_marked():
    runs = read_sweep(SEEDS).runs
    marked = _stale_certificate_lines(runs)
    assert marked and marked[0].startswith(f"Stale: {len(runs)} of {len(runs)} seeds-study runs")
    for r in runs:  # the records as a run records them now: nothing stale
        r.run.columns = _with_certificates(r.run)
    assert _stale_certificate_lines(runs) == []
