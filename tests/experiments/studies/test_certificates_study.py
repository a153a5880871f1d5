"""The problem zoo and the certificates study: a fast subset of the zoo, certificates measured
against it."""

import json
import os
import subprocess
import sys

import pytest
import torch
from crosscurv.experiments.problems.zoo import ZOO, lambda_max0, zoo_problem

#: the fast subset: two zoo problems (one of each half), a rate well inside and one near the edge
SUBSET = [
    ("logistic", 0.5),
    ("logistic", 1.5),
    ("matrix_factorisation", 0.5),
    ("matrix_factorisation", 1.5),
]
K = 40


def test_the_zoo_has_eight_kinds_of_small_float64_problems_in_two_halves():
    assert len({p.name for p in ZOO}) >= 8
    assert {p.half for p in ZOO} == {"tune", "held-out"}
    assert sum(p.half == "tune" for p in ZOO) == sum(p.half == "held-out" for p in ZOO)
    for p in ZOO:
        task = p.task(0)
        assert 2 <= task.n_blocks <= 4 and task.dtype == torch.float64, p.name
        assert min(p.lr_factors) <= 0.1 and 1.8 <= max(p.lr_factors) < 2.0, p.name
        assert float(task.loss(task.params)) == float(
            p.task(0).loss(p.task(0).params)
        )  # a pure function
    with pytest.raises(KeyError, match="matrix_factorisation"):
        zoo_problem("nope")


def test_crosscurv_run_takes_a_zoo_factory(tmp_path):
    p = zoo_problem("matrix_factorisation")
    lr = 0.5 / lambda_max0(p.task(0))
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosscurv",
            "run",
            p.spec,
            "--lr",
            repr(lr),
            "--iters",
            "5",
            "--pattern",
            "gs",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(out / "records.csv")
    import crosscurv.experiments.problems.zoo as zoo  # the same factory as FILE:factory

    spec = f"{zoo.__file__}:quartic"
    cmd = [sys.executable, "-m", "crosscurv", "run", spec, "--lr", "0.1", "--iters", "2",
           "--pattern", "gs", "--out", str(tmp_path / "file")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def subset_runs(tmp_path_factory):
    from crosscurv.experiments.studies.zoo_runs import cached_zoo_run

    out = str(tmp_path_factory.mktemp("zoo"))
    runs = [cached_zoo_run(zoo_problem(name), c, 0, out, K) for name, c in SUBSET]
    again = cached_zoo_run(
        zoo_problem(SUBSET[0][0]), SUBSET[0][1], 0, out, K
    )  # read back, not rerun
    assert again["cpu_s"] == runs[0]["cpu_s"]
    return runs


def test_certificates_are_right_on_the_fast_subset(subset_runs):
    """Precision >= 99% for advise and every record estimate on each (problem, rate) of the subset,
    with
    coverage pooled over the subset above a fifth of the decided iterations."""
    from crosscurv.experiments.studies.certificates_report import (
        advice_counts,
        record_counts,
    )
    from crosscurv.numeric.certificate import SAFETY

    pooled = [0, 0, 0]
    for run in subset_runs:
        a = advice_counts(run, SAFETY)
        assert a["decided"] > 0
        assert a["right"] >= 0.99 * a["certified"], (run["problem"], run["c"], a["wrong_k"])
        for e, (right, cert, dec) in record_counts(run, SAFETY).items():
            assert right >= 0.99 * cert, (run["problem"], run["c"], e)
            pooled = [pooled[0] + right, pooled[1] + cert, pooled[2] + dec]
        pooled = [pooled[0] + a["right"], pooled[1] + a["certified"], pooled[2] + a["decided"]]
    assert pooled[1] > 0.2 * pooled[2], pooled


def test_the_report_states_the_factor_and_every_problem(subset_runs, tmp_path):
    from crosscurv.experiments.studies.certificates_report import write_report

    text = write_report(subset_runs, str(tmp_path / "certificates.md"), "make certificates-study")
    assert (
        text.startswith("# Certificates on the problem zoo") and "`make certificates-study`" in text
    )
    for name, c in SUBSET:
        assert f"| {name} | {c:g} |" in text
    assert "## Certified advice that was wrong" in text
    json.dumps(subset_runs, allow_nan=True)  # the cached form


def test_table1_shows_the_certificate_of_records_written_before_it(tmp_path):
    """Table 1 recomputes a plain run's certificates from its columns: records whose *_cert columns
    hold an
    older rule (here: zeros) show the certificate crosscurv run records now."""
    import csv

    from crosscurv.experiments.reports.table import load_run, table_rows
    from crosscurv.numeric.certificate import record_certificates
    from crosscurv.numeric.metrics import certified_metrics
    from crosscurv.numeric.protocol import run_protocol

    out = tmp_path / "run"
    res = run_protocol(zoo_problem("logistic").task(0), "gs", 1.0, 20, out_dir=str(out))
    path = out / "records.csv"
    rows = list(csv.DictReader(open(path)))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(
            [
                {**r, **{f"{e}_cert": "0.0" for e in ("recursive", "cumulative", "jc_only")}}
                for r in rows
            ]
        )
    got = {r["estimate"]: r for r in table_rows(load_run(out))}
    cols = {c: [r[c] for r in res.records] for c in res.records[0]}
    want = record_certificates(cols, 1.0)
    for e in ("recursive", "jc_only"):
        m = certified_metrics(cols["gap"], cols[e], want[e], cols["gap_err"])
        assert m["certified"] > 0 and got[e]["coverage"] == pytest.approx(m["coverage"]), e


def test_advise_validate_leads_with_regret_and_counts_the_wrong_certificates(tmp_path):
    """advise --validate on the zoo's matrix completion (as a user runs it): regret first, then
    agreement, then 'N of M certified iterations were wrong'; the figure is written."""
    out, fig = tmp_path / "adv", tmp_path / "adv.png"
    spec = zoo_problem("matrix_factorisation").spec
    cmd = [sys.executable, "-m", "crosscurv", "advise", spec, "--lr", "12", "--iters", "30",
           "--validate", "--out", str(out), "--figure", str(fig)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stdout.splitlines() if x.startswith("validation:")]
    assert lines[0].startswith("validation: regret ") and "of the spread" in lines[0]
    assert "certified iterations were wrong" in lines[2]
    val = json.load(open(out / "validation.json"))
    s = val["summary"]
    assert lines[2].startswith(f"validation: {len(s['wrong_k'])} of {s['certified']} certified")
    assert s["certified"] > 0 and s["precision"] == 100.0
    assert fig.stat().st_size > 10_000
