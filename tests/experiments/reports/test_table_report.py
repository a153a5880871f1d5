"""Table 1, the study figures and the report index, on hand-made run directories."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.reports.pages import _findings, _hvp_line, _intervals
from crosscurv.experiments.reports.table import (PAPER_TABLE1, load_run, paper_comparison,
                                                 render_table, table_rows)
from crosscurv.numeric.records import RecordWriter, make_record


def _write_run(path, task, gaps, estimates, lr=0.1, L=2.0):
    path.mkdir(parents=True)
    with RecordWriter(str(path / "records.csv")) as w:
        for k, (g, e) in enumerate(zip(gaps, estimates), start=1):
            w.write(make_record(k, loss_jc=1.0, loss_s=1.0 + g, gap=g, recursive=e, cumulative=-e,
                                jc_only=e, bound_bk=10.0))
    summary = {
        "status": "complete",
        "settings": {"task": task, "lr": lr, "pattern": {"name": "gs", "pairs": [[2, 1]], "order": [
        1, 2]}},
        "constants": {"G": 1.0, "L": L},
        "bound_bk_coverage": {"covered": len(gaps), "K": len(gaps), "max_ratio": 0.1},
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path


GAPS = [0.5, 0.25, -0.1, -0.2, 0.0]
EST = [0.4, -0.1, -0.1, -0.3, 0.0]


def test_table_rows_follow_the_paper_metrics(tmp_path):
    run = load_run(_write_run(tmp_path / "r", "mlp", GAPS, EST))
    rows = {r["estimate"]: r for r in table_rows(run)}
    rec = rows["recursive"]
    # winners: gap JC,JC,GS,GS,tie ; recursive JC,GS,GS,GS,tie -> 4 of 5 agree
    assert rec["correct"] == pytest.approx(80.0)
    assert tuple(rec["jc_hits"]) == (1, 2) and tuple(rec["s_hits"]) == (2, 2)
    assert rec["mae"] == pytest.approx((0.1 + 0.35 + 0.0 + 0.1 + 0.0) / 5)
    assert rec["max_ae"] == pytest.approx(0.35)
    # negated: GS,JC,JC,JC,tie vs JC,JC,GS,GS,tie -> agrees at k=2 and the tie
    cum = rows["cumulative"]
    assert cum["correct"] == pytest.approx(40.0)
    assert tuple(cum["jc_hits"]) == (1, 2) and tuple(cum["s_hits"]) == (0, 2)


def test_render_marks_the_best_value_per_metric(tmp_path):
    run = load_run(_write_run(tmp_path / "r", "mlp", GAPS, EST))
    md = render_table([run], "github")
    assert "**80.0%**" in md and "40.0%" in md and "**40.0%**" not in md
    plain = render_table([run], "simple")
    assert "80.0%*" in plain
    cmp = paper_comparison([run], "github")
    assert "98.0% (K=500)" in cmp and f"{PAPER_TABLE1['mlp']['recursive']['correct']:.1f}%" in cmp


def test_table_cli_and_its_errors(tmp_path, capsys):
    d = _write_run(tmp_path / "r", "fl", GAPS, EST)
    assert main(["table", str(d), "--paper"]) == 0
    out = capsys.readouterr().out
    assert "FL" in out and "83.4% (K=500)" in out
    assert main(["table", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["table", str(empty)]) == 2
    assert "no records.csv" in capsys.readouterr().err


def test_report_rejects_unknown_studies_and_presets(capsys):
    assert main(["report", "--tasks", "mlp,nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["report", "--preset", "huge"]) == 2
    assert "huge" in capsys.readouterr().err


def test_winner_intervals_and_findings(tmp_path):
    assert _intervals([1, 2, -1, -3, 0]) == "JC k=1-2, GS k=3-4, tie k=5"
    assert _intervals([-1]) == "GS k=1"
    run = load_run(_write_run(tmp_path / "r", "lora", GAPS, EST, lr=0.5, L=4.0))
    text = "\n".join(_findings(run, run.summary["settings"]))
    assert "observed winner: JC k=1-2, GS k=3-4, tie k=5" in text
    assert "eta x L" in text and "= 2" in text and "not small" in text
    assert "covers |gap| at 5/5" in text


def test_figures_are_written(tmp_path):
    from crosscurv.experiments.reports.plotting import gap_figure, winner_timeline

    run = load_run(_write_run(tmp_path / "r", "mlp", GAPS, EST))
    g = gap_figure(run.columns, tmp_path / "f" / "gap.png", "t")
    w = winner_timeline(run.columns, tmp_path / "f" / "win.png", "t")
    for p in (g, w):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_gap_figure_shows_eta_sharpness_when_the_records_have_it(tmp_path):
    import matplotlib.image

    from crosscurv.experiments.reports.plotting import gap_figure
    from crosscurv.experiments.studies.regime import regime_series

    run = load_run(_write_run(tmp_path / "r", "mlp", GAPS, EST))
    cols = dict(run.columns, sharpness=np.array([1.0, 5.0, 25.0, 30.0, 10.0]))
    es, cross = regime_series(cols, 0.1)
    assert es == pytest.approx([0.1, 0.5, 2.5, 3.0, 1.0]) and cross == 3
    # NaN sharpness
    assert regime_series(cols, None) is None and regime_series(run.columns, 0.1) is None
    one = matplotlib.image.imread(gap_figure(run.columns, tmp_path / "one.png", "t", lr=0.1))
    two = matplotlib.image.imread(gap_figure(cols, tmp_path / "two.png", "t", lr=0.1))
    assert two.shape[0] > 1.3 * one.shape[0]  # a second panel below the gaps


def test_index_says_how_the_products_were_computed():
    summary = {"hvp": {"used": "reverse", "engine": "one retained double-backward graph per point"},
               "settings": {"offload": True}}
    assert _hvp_line(summary) == ("- Hessian-vector products: reverse (one retained "
                                  "double-backward graph per point)"
                                  "; carried vectors offloaded between uses: yes")
    assert _hvp_line({"hvp": {"used": "forward"},
                      "settings": {}}) == "- Hessian-vector products: forward"
    assert _hvp_line({}) is None


def test_table_gains_coverage_precision_and_calibration_from_the_certificates(tmp_path):
    gaps = [0.5, 0.25, -0.1, -0.2, 1e-12]
    est = [0.4, -0.1, -0.1, -0.3, 0.1]
    # |est - gap|: 0.1, 0.35, 0.0, 0.1, 0.1 -> covered at k = 1, 3
    errs = [0.2, 0.05, 0.3, 0.05, 0.01]
    cert = [1.0, -1.0, 0.0, -1.0, 1.0]  # k = 2 certified wrong; k = 5 undecided (|gap| <= gap_err)
    d = tmp_path / "r"
    d.mkdir()
    with RecordWriter(str(d / "records.csv")) as w:
        for k, (g, e, r, c) in enumerate(zip(gaps, est, errs, cert), start=1):
            w.write(make_record(k, loss_jc=1.0, loss_s=1.0 + g, gap=g, recursive=e, cumulative=e,
                                jc_only=e, bound_bk=1.0, gap_err=1e-9, recursive_err=r,
                                recursive_cert=c))
    (d / "summary.json").write_text(json.dumps({"status": "complete", "settings": {"task": "mlp",
                                                                                   "lr": 0.1}}))
    run = load_run(d)
    rows = {r["estimate"]: r for r in table_rows(run)}
    rec = rows["recursive"]
    assert rec["coverage"] == pytest.approx(75.0)  # 3 certified of 4 decided
    assert rec["precision"] == pytest.approx(200.0 / 3)  # k = 1 and 4 right, k = 2 wrong
    assert rec["calibrated"] == pytest.approx(40.0)
    assert np.isnan(rows["cumulative"]["coverage"])  # no certificates recorded for it: n/a
    md = render_table([run], "github")
    assert "Coverage" in md and "75.0%" in md and "66.7%" in md and "n/a" in md
    # the paper's Correct is unchanged: 3 of the 4 decided agree
    assert rec["correct"] == pytest.approx(75.0)


def test_crosscurv_run_records_errors_and_the_table_shows_them(tmp_path):
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--preset", "smoke",
                           "--iters", "4", "--out",
                           str(out)], cwd=repo, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    from crosscurv.numeric.records import FIELDS, read_records

    header = (out / "records.csv").read_text().splitlines()[0]
    assert header == ",".join(FIELDS)
    recs = read_records(str(out / "records.csv"))
    assert all(r["recursive_err"] >= 0 and r["lambda_max"] >= r["lambda_min"] for r in recs)
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "table", str(out)], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Coverage" in proc.stdout and "Precision" in proc.stdout and "Calibrated" in proc.stdout
