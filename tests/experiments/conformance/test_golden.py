"""Golden conformance cases: files, self-description, and an independent NumPy reproduction.

The NumPy implementation of ``numpy_protocol.py`` (no torch) reads only ``case.json`` and reproduces
``one_step.json`` and every ``records.csv`` of the quadratic and quartic cases from the definitions
in the golden README (paper Definitions 1-2, Theorems 1-3, the protocol's G/L estimates).
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.conformance.golden import (CASES, GoldenError, build_case, load_case,
                                                      write_golden)
from crosscurv.numeric.record_comparison import compare_records, reference_tolerances

from .numpy_protocol import NumpyProblem, pattern as _pattern

#: numerically sensitive: `make test-portable` runs this file under emulated instruction sets
pytestmark = pytest.mark.portable

LABELS = ("jc", "gs", "partial")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    write_golden(str(out))
    return str(out)


# -- an independent NumPy implementation: numpy_protocol.py -----------------------------------
def _arr(obj):
    if isinstance(obj, (int, float)):
        return float(obj)
    return np.asarray(obj["values"], dtype=np.float64).reshape(obj["shape"])


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {c: [(int(r[c]) if c == "k" else float(r[c])) for r in rows] for c in rows[0]}


@pytest.mark.parametrize("name", ["quadratic", "quartic"])
def test_numpy_reproduces_records(golden, name):
    with open(os.path.join(golden, name, "case.json")) as fh:
        case = json.load(fh)
    prob = NumpyProblem(case)
    for label in LABELS:
        pairs, order = _pattern(case, label)
        mine = prob.protocol(pairs, order, float(case["lr"]), int(case["iters"]))
        ref = _read_csv(os.path.join(golden, name, label, "records.csv"))
        assert len(ref["k"]) == case["iters"]
        comp = compare_records(mine, ref, tolerances=reference_tolerances(ref, case["dtype"]))
        assert comp.ok, f"{name}/{label}: {comp.summary()}\n{comp.text()}"
        if label == "jc":
            assert all(v == 0.0 for c in ("gap", "recursive", "cumulative", "jc_only") for v in ref[
                c])
        else:
            assert any(abs(v) > 1e-4 for v in ref["gap"])  # the case is not trivial


@pytest.mark.parametrize("name", ["quadratic", "quartic"])
def test_numpy_reproduces_one_step(golden, name):
    with open(os.path.join(golden, name, "case.json")) as fh:
        case = json.load(fh)
    with open(os.path.join(golden, name, "one_step.json")) as fh:
        exp = json.load(fh)
    prob = NumpyProblem(case)
    x, lr = prob.x0, float(case["lr"])
    g, H = prob.grad(x), prob.hess(x)
    n = len(prob.blocks)
    c = np.array([[g[prob.blocks[i]] @ H[np.ix_(prob.blocks[i], prob.blocks[j])] @ g[prob.blocks[j]]
                   for j in range(n)] for i in range(n)])
    np.testing.assert_allclose(np.array(exp["c"]), c, rtol=1e-11, atol=1e-13)
    assert exp["C_cross"] == pytest.approx(c.sum() - np.trace(c), rel=1e-11)
    assert exp["loss_0"] == pytest.approx(prob.loss(x), rel=1e-14, abs=1e-14)
    xj = x - lr * g
    assert exp["loss_jc_1"] == pytest.approx(prob.loss(xj), rel=1e-13, abs=1e-13)
    for label in LABELS:
        pairs, order = _pattern(case, label)
        e = exp["patterns"][label]
        assert e["C_S"] == pytest.approx(sum(c[i, j] for i, j in pairs), rel=1e-11, abs=1e-13)
        xs = prob.step(x, pairs, order, lr)
        got = np.concatenate([_arr(e["theta_s_1"][k]).ravel() for k in prob.names])
        np.testing.assert_allclose(got, xs, rtol=1e-14, atol=1e-15)
        assert e["gap_1"] == pytest.approx(prob.loss(xs) - prob.loss(xj), rel=1e-9, abs=1e-13)
        # eta^3 coefficient: -g.(M+H)Mg - 1/2 sum_i D3L[E_i g, P_i g, P_i g]
        Mg = prob.masked(H, pairs, g)
        cubic = 0.0
        for i in range(n):
            Ei = np.zeros_like(g)
            Ei[prob.blocks[i]] = g[prob.blocks[i]]
            Pi = np.zeros_like(g)
            for a, j in pairs:
                if a == i:
                    Pi[prob.blocks[j]] = g[prob.blocks[j]]
            cubic += prob.third(x, Ei, Pi, Pi)
        c3 = -(g @ prob.masked(H, pairs, Mg) + g @ H @ Mg) - 0.5 * cubic
        assert e["c3"] == pytest.approx(c3, rel=1e-10, abs=1e-12)
        assert e["eta3_estimate"] == pytest.approx(lr**2 * e["C_S"] + lr**3 * c3, rel=1e-10,
                                                   abs=1e-13)
        if label != "jc":  # the eta^3 estimate is closer to the measured one-step gap than eta^2
            assert abs(e["eta3_estimate"] - e["gap_1"]) < abs(e["eta2_estimate"] - e["gap_1"])


def test_files_and_self_description(golden):
    with open(os.path.join(golden, "index.json")) as fh:
        index = json.load(fh)
    assert index["format"] == "crosscurv-golden" and index["version"] == 1
    assert [c["name"] for c in index["cases"]] == list(CASES)
    for entry in index["cases"]:
        for f in entry["files"]:
            assert os.path.getsize(os.path.join(golden, f)) > 0, f
        with open(os.path.join(golden, entry["name"], "case.json")) as fh:
            case = json.load(fh)
        assert case["dtype"] == "float64"
        assert case["loss"]["words"] and case["loss"]["formula"]
        assert set(case["patterns"]) == set(LABELS)
        assert case["patterns"]["jc"]["pairs"] == []
        nb = len(case["blocks"])
        assert len(case["patterns"]["gs"]["pairs"]) == nb * (nb - 1) // 2
        assert 0 < len(case["patterns"]["partial"]["pairs"]) < nb * (nb - 1) // 2
        # no torch file in the folder
        assert not any(f.endswith(".pt") for _, _, fs in os.walk(os.path.join(golden, entry[
            "name"])) for f in fs)
    readme = open(os.path.join(golden, "README.md")).read()
    for word in ("case.json", "one_step.json", "records.csv", "pairs", "bound_bk", "Tolerances"):
        assert word in readme


def test_json_defines_the_case(golden):
    """The task rebuilt from case.json gives the recorded loss and the first record."""
    import torch

    for name in CASES:
        case, task = load_case(os.path.join(golden, name))
        with open(os.path.join(golden, name, "one_step.json")) as fh:
            exp = json.load(fh)
        with torch.no_grad():
            assert float(task.loss(task.params)) == exp["loss_0"]
        assert task.block_names == list(build_case(name).blocks)


def test_regeneration_is_identical(golden, tmp_path):
    write_golden(str(tmp_path), ["quadratic"])
    for root, _, files in os.walk(tmp_path / "quadratic"):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), tmp_path)
            assert open(os.path.join(root, f), "rb").read() == open(os.path.join(golden, rel),
                                                                    "rb").read(), rel


def test_golden_cli_and_errors(tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["golden", "--out", str(out), "--cases", "quadratic"]) == 0
    assert "README.md" in capsys.readouterr().out
    assert sorted(os.listdir(out)) == ["README.md", "index.json", "quadratic"]
    # not empty: refused, one line, exit 2
    assert main(["golden", "--out", str(out), "--cases", "quadratic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crosscurv: error:") and "not empty" in err and "\n" not in err
    assert main(["golden", "--out", str(out), "--cases", "quadratic", "--force"]) == 0
    capsys.readouterr()
    assert main(["golden", "--out", str(tmp_path / "h"), "--cases", "cubic"]) == 2
    assert "unknown golden case" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["golden", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err
    with pytest.raises(GoldenError, match="does not exist"):
        load_case(str(tmp_path / "nowhere"))


def _assert_same_inputs(shipped, mine, where):
    """Equal structure and text; floats within 8 units in the last place of their list's scale."""
    if isinstance(shipped, dict):
        assert isinstance(mine, dict) and list(mine) == list(shipped), where
        for k in shipped:
            _assert_same_inputs(shipped[k], mine[k], f"{where}.{k}")
    elif isinstance(shipped, list):
        assert isinstance(mine, list) and len(mine) == len(shipped), where
        flat = [abs(v) for v in shipped if isinstance(v, float)]
        scale = max(flat, default=0.0)
        for i, (a, b) in enumerate(zip(shipped, mine)):
            if isinstance(a, float) and isinstance(b, float):
                assert abs(a - b) <= 8 * np.finfo(np.float64).eps * max(scale, abs(a)), (where, i,
                                                                                         a, b)
            else:
                _assert_same_inputs(a, b, f"{where}[{i}]")
    elif isinstance(shipped, float):
        assert isinstance(mine, float), where
        assert abs(shipped - mine) <= 8 * np.finfo(np.float64).eps * abs(shipped), (where, shipped,
                                                                                    mine)
    else:
        assert shipped == mine, where


def test_shipped_cases_are_the_recomputed_ones(golden):
    """The copy shipped with the package is what ``write_golden`` computes: inputs to a few units in
    the last place (bit for bit on the machine that wrote them; other CPUs' kernels round the
    generated problem data differently), results within the tolerances of ``validate-records``."""
    from crosscurv.experiments.conformance.golden_check import check_one_step, check_records
    from crosscurv.experiments.conformance.golden_data import GOLDEN_DIR, shipped_cases
    assert shipped_cases() == list(CASES)
    for f in ("index.json", "README.md"):
        assert open(os.path.join(GOLDEN_DIR, f)).read() == open(os.path.join(golden, f)).read(), f
    for name in CASES:
        with open(os.path.join(GOLDEN_DIR, name, "case.json")) as fh:
            shipped = json.load(fh)
        with open(os.path.join(golden, name, "case.json")) as fh:
            recomputed = json.load(fh)
        _assert_same_inputs(shipped, recomputed, name)
        mine = os.path.join(golden, name, "one_step.json")
        assert check_one_step(mine, os.path.join(GOLDEN_DIR, name)).ok
        for label in LABELS:
            comp = check_records(os.path.join(golden, name, label, "records.csv"),
                                 os.path.join(GOLDEN_DIR, name, label))
            assert comp.ok, (name, label, comp.summary())
            terms = os.path.join(golden, name, label, "terms.csv")
            if not os.path.exists(terms):
                assert name in ("quartic_momentum", "quadratic_block_lr")
                continue
            ship = _read_csv(os.path.join(GOLDEN_DIR, name, label, "terms.csv"))
            mine = _read_csv(terms)
            assert list(mine) == list(ship)
            for c in mine:
                scale = max(abs(v) for v in ship[c]) or 1.0
                close = all(abs(a - b) <= 1e-12 * scale for a, b in zip(mine[c], ship[c]))
                assert close, (name, label, c)


def test_terms_reproduce_the_records(golden):
    """The reference combination of ``terms.csv`` is each estimate of ``records.csv`` to
    round-off."""
    for name in ("quadratic", "quartic", "tiny_mlp", "lora_bilinear"):
        for label in LABELS:
            t = _read_csv(os.path.join(golden, name, label, "terms.csv"))
            r = _read_csv(os.path.join(golden, name, label, "records.csv"))
            parts = zip(t["rec_prop"], t["rec_quad"], t["rec_fresh_S"])
            sums = {"recursive": [a + b + c for a, b, c in parts],
                    "cumulative": [a + b for a, b in zip(t["cum_lin_S"], t["cum_quad_S"])],
                    "jc_only": [a + b for a, b in zip(t["jco_lin_S"], t["jco_quad_S"])],
                    "bound_bk": [a + b for a, b in zip(t["bnd_G_S"], t["bnd_L_S"])]}
            for c, vals in sums.items():
                # measured: at most 3.7e-15 relative (exactly 0 under JC)
                close = all(abs(v - x) <= 1e-14 * abs(x) for v, x in zip(vals, r[c]))
                assert close, (name, label, c)
