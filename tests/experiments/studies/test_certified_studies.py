"""The default and edge studies apart, certified winners per run, and the figure of precision and
coverage against eta * sharpness, on hand-made sweep folders (every expected number computed by hand
below)."""

from __future__ import annotations

import json
import subprocess
import sys

from crosscurv.experiments.studies.collect import read_sweep, read_sweeps
from crosscurv.experiments.studies.figures import certified_regime_figure, pooled_certified_bins
from crosscurv.experiments.studies.seeds import certified_rows, is_edge_run, seed_groups, split_edge
from crosscurv.experiments.tasks import preset_settings
from crosscurv.numeric.records import RecordWriter, make_record

from .test_studies import REPO


def write_cert_run(folder, name, *, task="mlp", lr, seed=0, preset="default", gaps, est, certs,
                   lam):
    """A run whose three estimates are ``est`` with certificates ``certs`` and converged
    ``lambda_max = lam``."""
    d = folder / "runs" / name
    d.mkdir(parents=True)
    with RecordWriter(str(d / "records.csv")) as w:
        for k, (g, e, c, lm) in enumerate(zip(gaps, est, certs, lam), start=1):
            w.write(make_record(k, loss_jc=1.0, loss_s=1.0 + g, gap=g, recursive=e, cumulative=e,
                                jc_only=e, bound_bk=10.0, sharpness=lm, gap_err=0.0, lambda_max=lm,
                                lambda_min=-lm, recursive_err=0.0, cumulative_err=0.0,
                                jc_only_err=0.0, recursive_cert=c, cumulative_cert=c,
                                jc_only_cert=c))
    settings = {"task": task, "preset": preset, "lr": lr, "seed": seed, "pattern_spec": "gs",
                "dtype": "float32", "iters": len(gaps)}
    (d / "summary.json").write_text(json.dumps({"status": "complete", "settings": settings,
                                                "constants": {"G": 1.0, "L": 1.0}}))
    return d


def _folders(tmp_path):
    d_lr, e_lr = preset_settings("mlp", "default")["lr"], preset_settings("mlp", "edge")["lr"]
    seeds, edge_old, edge_new = tmp_path / "seeds", tmp_path / "edge-old", tmp_path / "edge-new"
    # default: gap > 0 (JC wins) at k = 1, 2, then < 0; certificates: k = 1 right (+1), k = 3 right
    # (-1), k = 4 wrong (+1); eta * lambda = d_lr * lam: 1e-3 .. well below 2
    write_cert_run(seeds, "mlp-default-seed0", lr=d_lr, gaps=[0.5, 0.2, -0.1, -0.2], est=[0.4, 0.1,
        -0.1, 0.1],
                   certs=[1, 0, -1, 1], lam=[0.1 / d_lr, 0.1 / d_lr, 0.1 / d_lr, 0.1 / d_lr])
    # edge under its old name (preset default at the edge rate) and under its name: the same seed 0,
    # the longer kept
    write_cert_run(edge_old, "mlp-default-seed0", lr=e_lr, gaps=[0.5, -0.5], est=[0.5, -0.5],
                   certs=[1, -1], lam=[1.0 / e_lr, 3.0 / e_lr])
    write_cert_run(edge_new, "mlp-edge-seed0", lr=e_lr, preset="edge", gaps=[0.5, -0.5, -0.5],
                   est=[0.5, -0.5, 0.5], certs=[1, 0, 1], lam=[1.0 / e_lr, 3.0 / e_lr, 3.0 / e_lr])
    return seeds, edge_old, edge_new


def test_default_and_edge_runs_are_two_studies_and_one_seed_each(tmp_path):
    seeds, edge_old, edge_new = _folders(tmp_path)
    sw = read_sweeps([seeds, edge_old, edge_new])
    inside, edge = split_edge(sw.runs)
    assert [r.name for r in inside] == ["mlp-default-seed0"] and inside[0].preset == "default"
    assert sorted(r.preset for r in edge) == ["default", "edge"] and all(is_edge_run(r)
                                                                         for r in edge)
    groups = seed_groups(edge)
    assert len(groups) == 1
    (key, members), = groups.items()
    assert key[1] == "edge" and [r.K for r in members] == [3]  # the longer of the two seed-0 runs


def test_certified_rows_split_at_the_first_crossing(tmp_path):
    seeds, edge_old, edge_new = _folders(tmp_path)
    rows = {r["estimate"]: r for r in certified_rows(read_sweep(seeds).runs)}
    m = rows["recursive"]["bound"]
    assert (m["decided"], m["certified"], m["correct"]) == (4, 3, 2)
    # 4 records: no defect interval yet (10 past defects needed); the recorded bound 0 certifies
    # every nonzero estimate
    d = rows["recursive"]["defect_all"]
    assert (d["decided"], d["certified"], d["correct"]) == (4, 4, 3)
    assert rows["recursive"]["cross"] is None and rows["recursive"]["defect_before"] == d
    edge = {r["estimate"]: r for r in certified_rows(read_sweep(edge_new).runs)}["cumulative"]
    # eta * lambda: 1, 3, 3 -> first crossing of 2 at k = 2; before it: k = 1 certified right; none
    # after
    assert edge["cross"] == 2 and edge["max_eta_lambda"] == 3.0
    assert (edge["defect_before"]["certified"], edge["defect_before"]["correct"]) == (1, 1)
    assert (edge["defect_all"]["decided"], edge["defect_all"]["certified"]) == (3, 1)
    assert (edge["bound"]["certified"], edge["bound"]["correct"]) == (2, 1)


def test_pooled_bins_sum_the_counts_and_the_figure_is_drawn(tmp_path):
    seeds, edge_old, edge_new = _folders(tmp_path)
    runs = read_sweep(edge_old).runs + read_sweep(edge_new).runs
    bins = pooled_certified_bins(runs, "recursive", kind="bound")
    # eta * lambda = 1 (k = 1 of both runs) and 3 (k = 2 of both, k = 3 of the new one)
    by = {(b["lo"] <= 1.0 < b["hi"], b["lo"] <= 3.0 < b["hi"]): b for b in bins}
    one, three = by[(True, False)], by[(False, True)]
    assert (one["decided"], one["certified"], one["correct"], one["precision"]) == (2, 2, 2, 100.0)
    assert (three["decided"], three["certified"], three["correct"]) == (3, 2, 1)
    assert three["coverage"] == 100.0 * 2 / 3
    p = certified_regime_figure({"default": read_sweep(seeds).runs, "edge": runs}, tmp_path
                                / "f.png")
    assert p.stat().st_size > 1000


def test_studies_command_writes_both_studies_and_the_figure(tmp_path):
    seeds, edge_old, edge_new = _folders(tmp_path)
    out = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "crosscurv", "studies", "--seeds", str(seeds), str(
        edge_new),
                           str(edge_old), "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    md = (out / "studies.md").read_text()
    assert "## Table 1 over seeds (default presets, inside the regime)" in md
    assert "## Edge-of-stability study (the `edge` preset)" in md
    # bound: coverage 3/4, prec. 2/3
    assert "| mlp    | 0.007 | 0      | 4   | 0.1" in md and "75.0% / 66.7%" in md
    assert "100.0% / 75.0% (3/4 of 4)" in md  # defect: 4 certified, 3 right
    assert (out / "figures" / "studies_certified_regime.png").stat().st_size > 1000
    assert (out / "figures" / "studies_seeds_mlp_edge.png").stat().st_size > 1000
