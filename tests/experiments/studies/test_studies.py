"""Studies over seeds and the regime map (``crosscurv studies``) on hand-made sweep folders.

Every expected number below is computed by hand from the records written here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.studies.collect import read_sweep, read_sweeps
from crosscurv.experiments.studies.regime import (RegimePoint, observed_switches, regime_indicators,
                                                  regime_points, regime_sentence, small_step_note)
from crosscurv.experiments.studies.seeds import describe_coverage, render_seeds_table, seed_rows
from crosscurv.experiments.studies.threads import compare_runs, match_runs
from crosscurv.experiments.tasks.errors import DataError
from crosscurv.numeric.records import RecordWriter, make_record

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def write_run(folder, name, *, task="mlp", lr=0.1, seed=0, gaps, est, errs=None, sharp=None,
              status="complete", preset="default", iters=None, threads=None, seconds=10.0,
              pattern="gs"):
    """A run folder as ``crosscurv run`` writes it: recursive = est, cumulative = -est, jc_only =
    est.
    """
    d = folder / "runs" / name
    d.mkdir(parents=True)
    errs = errs if errs is not None else [0.0] * len(gaps)
    sharp = sharp if sharp is not None else [1.0] * len(gaps)
    with RecordWriter(str(d / "records.csv")) as w:
        for k, (g, e, ge, s) in enumerate(zip(gaps, est, errs, sharp), start=1):
            w.write(make_record(k, loss_jc=1.0, loss_s=1.0 + g, gap=g, recursive=e, cumulative=-e,
                                jc_only=e, bound_bk=10.0, sharpness=s, gap_err=ge))
    settings = {"task": task, "preset": preset, "lr": lr, "seed": seed, "pattern_spec": pattern,
                "dtype": "float32", "iters": iters or len(gaps)}
    if threads is not None:
        settings["threads"] = threads
    summary = {"status": status, "settings": settings, "constants": {"G": 1.0, "L": 1.0},
               "timing": {"elapsed_s_total": seconds}}
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def seeds_sweep(tmp_path, K_extra=0):
    """Two seeds of ``mlp`` (hand-checked metrics below) and one unfinished run."""
    sw = tmp_path / "seeds"
    pad = [-0.2] * K_extra
    write_run(sw, "mlp-default-seed0", seed=0, gaps=[0.5, 0.25, -0.1, -0.2] + pad,
              est=[0.4, 0.2, -0.1, -0.3] + pad, errs=[0.01, 0.3, 0.01, 0.01] + [0.0] * K_extra,
              sharp=[5, 10, 25, 15] + [1] * K_extra)
    write_run(sw, "mlp-default-seed1", seed=1, gaps=[0.5, -0.25, -0.1, -0.2] + pad,
              est=[0.4, 0.2, -0.1, -0.3] + pad, errs=[0.01] * 4 + [0.0] * K_extra)
    write_run(sw, "mlp-default-seed2", seed=2, gaps=[0.5], est=[0.5], status="running")
    (sw / "sweep.json").write_text(json.dumps({"threads": 1, "workers": 2}))
    return sw


def test_seeds_table_mean_and_range_of_every_metric(tmp_path):
    sweep = read_sweep(seeds_sweep(tmp_path))
    assert [r.seed for r in sweep.runs] == [0, 1] and sweep.unfinished == ["mlp-default-seed2"]
    assert all(r.threads == 1 for r in sweep.runs)  # from sweep.json
    rows = {r["estimate"]: r for r in seed_rows(sweep.runs)}
    rec = rows["recursive"]
    # seed 0: k=2 undecided (|0.25| <= 0.3); the 3 decided agree -> 100%, MAE (0.1+0.05+0+0.1)/4 =
    # 0.0625
    # seed 1: winners JC,GS,GS,GS vs estimate JC,JC,GS,GS -> 75%, MAE (0.1+0.45+0+0.1)/4 = 0.1625
    assert rec["correct"][:3] == pytest.approx((87.5, 75.0, 100.0))
    assert rec["mae"][:3] == pytest.approx((0.1125, 0.0625, 0.1625))
    assert rec["max_ae"][:3] == pytest.approx((0.275, 0.1, 0.45))
    assert rec["undecided"][:3] == pytest.approx((0.5, 0.0, 1.0))
    assert rec["h_jc"][:3] == (1, 1, 1) and rec["n_jc"][:3] == (1, 1, 1)
    assert rec["h_s"][:3] == (2, 2, 2) and rec["n_s"][:3] == (2.5, 2, 3)
    # negated estimate: GS,GS,JC,JC -> seed 0: 0/3, seed 1: k=2 right -> 1/4
    cum = rows["cumulative"]
    assert cum["correct"][:3] == pytest.approx((12.5, 0.0, 25.0))
    md = render_seeds_table(seed_rows(sweep.runs))
    line = next(ln for ln in md.splitlines() if "| Recursive" in ln)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:5] == ["DNN", "Recursive", "4", "2 (0, 1)", "87.5% [75.0%, 100.0%]"]
    assert cells[5] == "100.0%"  # the paper's recursive Correct for the DNN
    assert cells[6] == "1/1" and cells[8] == "2.0/2.5 (h 2, n 2-3)"
    assert cells[10] == "0.112 [0.0625, 0.162]" and cells[12] == "0.275 [0.1, 0.45]" and cells[
        14] == "0.5 [0, 1]"
    jc_only = next(ln for ln in md.splitlines() if "JC-only" in ln)
    assert "| -" in jc_only  # no paper number for the estimate beyond the paper


def test_seeds_pooled_from_several_folders_are_cut_to_their_common_K(tmp_path):
    """Seed 0 at K = 6 in one folder, seed 1 at K = 4 in another (and seed 0 again, shorter): the
    table covers k = 1..4 of both, the numbers of the K = 4 runs above."""
    a = tmp_path / "a"
    write_run(a, "mlp-default-seed0", seed=0, gaps=[0.5, 0.25, -0.1, -0.2, 0.3, 0.3],
              est=[0.4, 0.2, -0.1, -0.3, -1.0, -1.0], errs=[0.01, 0.3, 0.01, 0.01, 0.0, 0.0])
    b = tmp_path / "b"
    write_run(b, "mlp-default-seed1", seed=1, gaps=[0.5, -0.25, -0.1, -0.2], est=[0.4, 0.2, -0.1,
                                                                                  -0.3],
              errs=[0.01] * 4)
    write_run(b, "mlp-default-seed0", seed=0, gaps=[0.5], est=[0.5], iters=1)
    write_run(b, "fl-default-seed0", task="fl", seed=0, gaps=[0.5, 0.4], est=[0.5, 0.4], iters=6,
              status="diverged")
    pooled = read_sweeps([a, b])
    assert [(r.task, r.seed, r.K) for r in pooled.runs] == [("fl", 0, 2), ("mlp", 0, 6), ("mlp", 1,
                                                                                          4)]
    rec = {(r["task"], r["estimate"]): r for r in seed_rows(pooled.runs)}[("mlp", "recursive")]
    assert rec["K"] == 4 and rec["correct"][:3] == pytest.approx((87.5, 75.0, 100.0))
    assert rec["mae"][:3] == pytest.approx((0.1125, 0.0625, 0.1625))
    assert describe_coverage(pooled) == (
        "fl: 1 run(s), seeds 0, K = 6, seed 0 diverged after k = 2; "
        "mlp: 2 run(s), seeds 0, 1, K = 4 (seed 0 cut from K = 6).")


def test_regime_indicators_switches_and_prefix(tmp_path):
    sweep = read_sweep(seeds_sweep(tmp_path))
    s0 = sweep.runs[0]
    top, cross = regime_indicators(s0.columns(), 0.1)
    assert top == pytest.approx(2.5) and cross == 3
    assert regime_indicators(s0.columns(), 0.01) == (pytest.approx(0.25), None)
    assert observed_switches(s0.columns()) == 1  # JC, (undecided), GS, GS
    cut = s0.prefix(2)
    assert cut.K == 2 and cut.planned_K == 2 and regime_indicators(cut.columns(), 0.1) == (
        pytest.approx(1.0), None)
    with pytest.raises(DataError, match="fewer than"):
        s0.prefix(5)


def test_regime_points_take_the_default_rate_from_the_seeds_runs(tmp_path):
    seeds = read_sweep(seeds_sweep(tmp_path, K_extra=2))  # 6 records each, lr 0.1
    reg = tmp_path / "regime"
    for seed in (0, 1):
        write_run(reg, f"mlp-default-lr0.01-seed{seed}-K4", lr=0.01, seed=seed, gaps=[0.1, 0.1,
                                                                                      -0.1, -0.1],
                  est=[0.1, 0.1, -0.1, -0.1], sharp=[1, 2, 3, 4])
    write_run(reg, "mlp-default-lr1.0-seed0-K4", lr=1.0, seed=0, gaps=[0.1, -0.1], est=[0.1, 0.1],
              sharp=[1.0, 3.0], status="diverged", iters=4)
    points = regime_points([read_sweep(reg)], seeds)
    assert [(p.lr, p.seed, p.K) for p in points] == [(0.01, 0, 4), (0.01, 1, 4), (0.1, 0, 4), (0.1,
        1, 4),
                                                     (1.0, 0, 2)]
    p01 = points[2]
    assert "first 4 records" in p01.source and p01.first_cross == 3
    assert p01.metrics["recursive"]["correct"] == pytest.approx(100.0)
    # before the crossing (k = 1, 2: k = 2 undecided): 1/1; from it (k = 3, 4): 2/2
    assert p01.metrics["recursive"]["correct_before"] == 100.0 and p01.metrics["recursive"][
        "correct_after"] == 100.0
    assert points[-1].status == "diverged" and points[-1].first_cross == 2
    assert points[-1].metrics["recursive"]["correct"] == pytest.approx(50.0)


def _pt(x, correct, cross=None, lr=0.1, seed=0, switches=1):
    return RegimePoint("mlp", lr, seed, 100, "complete", "s", x, cross, switches,
                       {"recursive": {"correct": correct, "mae": 0.1}})


def test_regime_sentence_names_where_95_percent_holds_and_where_it_stops():
    pts = [_pt(0.3, 99.0, lr=0.01), _pt(0.35, 97.0, lr=0.01, seed=1), _pt(0.8, 96.0, lr=0.02),
           _pt(0.9, 90.0, lr=0.02, seed=1), _pt(2.5, 90.0, cross=40, lr=0.05),
           _pt(3.0, 80.0, cross=20, lr=0.05, seed=1)]
    s = regime_sentence(pts, "recursive")
    assert s == ("recursive: >= 95% in every seed at eta = 0.01; some seeds at 0.02 (1/2); no seed "
                 "at 0.05 x2; never above eta*sharpness 0.8 (3 runs go further).")
    none = regime_sentence([_pt(0.3, 50.0), _pt(1.0, 80.0, lr=0.2)], "recursive")
    assert none == "recursive: >= 95% in none of the 2 runs; best 80.0% (eta = 0.2, seed 0)."
    allgood = regime_sentence([_pt(0.3, 99.0), _pt(2.2, 98.0, cross=7, lr=0.2)], "recursive")
    assert allgood == ("recursive: >= 95% in every seed at eta = 0.1, 0.2 x2; up to the grid's "
                       "largest eta*sharpness, 2.2.")


def test_small_step_note_says_whether_the_winner_changes_inside_the_regime():
    assert "in none of them" in small_step_note([_pt(0.3, 99.0, switches=0), _pt(1.0, 99.0)])
    assert "changes in 1 of them (1 run(s) with 2 switch(es))" in small_step_note([_pt(0.3, 99.0,
                                                                                       switches=2)])
    assert "does not reach well inside" in small_step_note([_pt(0.7, 99.0)])


def test_thread_comparison_finds_the_first_difference(tmp_path):
    seeds = read_sweep(seeds_sweep(tmp_path))
    other = tmp_path / "t2"
    write_run(other, "mlp-default-seed0", seed=0, gaps=[0.5, 0.25, 0.1, -0.2], est=[0.4, 0.2, -0.1,
                                                                                    -0.3],
              errs=[0.01, 0.3, 0.01, 0.01], sharp=[5, 10, 25, 15], threads=2)
    pairs = match_runs(seeds.runs, read_sweep(other).runs)
    assert len(pairs) == 1 and pairs[0][0].seed == 0 and (pairs[0][0].threads, pairs[0][
        1].threads) == (1, 2)
    c = compare_runs(*pairs[0])
    assert c["first_record_diff"] == 3 and c["first_column"] == "loss_s" and c[
        "first_winner_diff"] == 3
    assert c["counts_a"] == (1, 2, 1) and c["counts_b"] == (2, 1, 1)
    rec = c["estimates"]["recursive"]
    assert rec["mae_a"] == pytest.approx(0.0625) and rec["mae_b"] == pytest.approx((0.1 + 0.05
        + 0.2 + 0.1) / 4)
    assert rec["mae_rel_diff"] == pytest.approx(0.05 / 0.0625)
    same = compare_runs(pairs[0][0], pairs[0][0])
    assert same["first_record_diff"] is None and same["first_winner_diff"] is None
    assert match_runs(seeds.runs, seeds.runs) == []  # a run is not compared with itself


def test_studies_command_writes_the_report(tmp_path):
    seeds = seeds_sweep(tmp_path, K_extra=2)
    reg = tmp_path / "regime-mlp"
    for seed in (0, 1):
        write_run(reg, f"mlp-default-lr0.01-seed{seed}-K4", lr=0.01, seed=seed, gaps=[0.1, 0.1,
                                                                                      -0.1, -0.1],
                  est=[0.1, 0.1, -0.1, -0.1], sharp=[1, 2, 3, 4])
    out = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "studies", "--seeds", str(seeds),
                           "--regime", str(reg), "--out",
                           str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    md = (out / "studies.md").read_text()
    # seeds table over K = 6: seed 0 5/5, seed 1 5/6; the regime map cuts the same runs to the
    # grid's K = 4
    assert "## Table 1 over seeds" in md and "91.7% [83.3%, 100.0%]" in md
    assert "| mlp    | 0.1   |" in md and "87.5% [75.0%, 100.0%]" in md
    assert "not finished (left out): mlp-default-seed2" in md
    assert "## Regime map" in md and "### mlp" in md and "recursive: >= 95%" in md
    for name in ("studies_seeds_mlp.png", "studies_regime_sharpness.png",
                 "studies_regime_crossing.png"):
        assert (out / "figures" / name).stat().st_size > 1000


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "plain").mkdir() or p / "plain", "not a sweep folder"),
    (lambda p: (p / "empty" / "runs").mkdir(parents=True) or p / "empty", "holds no finished run"),
])
def test_a_bad_sweep_folder_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    bad = make(tmp_path)
    assert main(["studies", "--seeds", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("crosscurv: error: ") and message in err[0]
    assert not (tmp_path / "out" / "studies.md").exists()


def test_a_torn_summary_and_no_folders_are_one_line(tmp_path, capsys):
    sw = seeds_sweep(tmp_path)
    (sw / "runs" / "mlp-default-seed0" / "summary.json").write_text("{not json")
    assert main(["studies", "--seeds", str(sw), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err
    assert main(["studies", "--out", str(tmp_path / "out")]) == 2
    assert "nothing to aggregate" in capsys.readouterr().err
