"""Golden conformance cases: files, self-description, and an independent NumPy reproduction.

The NumPy implementation below (no torch) reads only ``case.json`` and
reproduces ``one_step.json`` and every ``records.csv`` of the quadratic and
quartic cases from the definitions in the golden README (paper Definitions
1-2, Theorems 1-3, the protocol's G/L estimates).
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.conformance.golden import CASES, GoldenError, build_case, load_case, write_golden
from crosscurv.numeric.record_comparison import compare_records, reference_tolerances

#: numerically sensitive: `make test-portable` runs this file under emulated instruction sets
pytestmark = pytest.mark.portable

LABELS = ("jc", "gs", "partial")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    write_golden(str(out))
    return str(out)


# -- an independent NumPy implementation -------------------------------------------------
def _arr(obj):
    if isinstance(obj, (int, float)):
        return float(obj)
    return np.asarray(obj["values"], dtype=np.float64).reshape(obj["shape"])


class NumpyProblem:
    """Quadratic / quartic losses of a golden case.json, with gradient, Hessian, third derivative."""

    def __init__(self, case: dict):
        assert case["model"] in ("quadratic", "quartic")
        self.names = list(case["params"])
        sizes = [int(np.prod(case["params"][n]["shape"])) for n in self.names]
        off = np.cumsum([0] + sizes)
        pos = {n: np.arange(off[i], off[i + 1]) for i, n in enumerate(self.names)}
        self.blocks = [np.concatenate([pos[n] for n in b["params"]]) for b in case["blocks"]]
        self.x0 = np.concatenate([_arr(case["params"][n]).ravel() for n in self.names])
        self.p0 = np.concatenate([_arr(case["power_iteration"]["start"][n]).ravel() for n in self.names])
        d = case["data"]
        self.A, self.b = _arr(d["A"]), _arr(d["b"])
        self.W = _arr(d["W"]) if "W" in d else np.zeros((0, self.x0.size))
        self.gamma = float(d.get("gamma", 0.0))

    def loss(self, x):
        return 0.5 * x @ self.A @ x - self.b @ x + 0.25 * self.gamma * np.sum((self.W @ x) ** 4)

    def grad(self, x):
        return self.A @ x - self.b + self.gamma * self.W.T @ ((self.W @ x) ** 3)

    def hess(self, x):
        return self.A + 3 * self.gamma * self.W.T @ np.diag((self.W @ x) ** 2) @ self.W

    def third(self, x, a, b, c):
        """``D^3 L(x)[a, b, c] = 6 gamma sum_m (w_m.x)(w_m.a)(w_m.b)(w_m.c)``."""
        W = self.W
        return 6 * self.gamma * np.sum((W @ x) * (W @ a) * (W @ b) * (W @ c))

    # Definition 2 / Lemma 1
    def masked(self, H, pairs, v):
        out = np.zeros_like(v)
        for i, j in pairs:
            out[self.blocks[i]] += H[np.ix_(self.blocks[i], self.blocks[j])] @ v[self.blocks[j]]
        return out

    def step(self, x, pairs, order, lr):
        new = x.copy()
        for i in order:
            state = x.copy()
            for a, j in pairs:
                if a == i:
                    state[self.blocks[j]] = new[self.blocks[j]]
            new[self.blocks[i]] = x[self.blocks[i]] - lr * self.grad(state)[self.blocks[i]]
        return new

    def protocol(self, pairs, order, lr, K):
        xj, xs, p = self.x0.copy(), self.x0.copy(), self.p0.copy()
        z, y = np.zeros_like(xj), np.zeros_like(xj)
        G = L = 0.0
        unorms, w, q, rows = [], None, None, []
        for k in range(K + 1):
            gj, gs = self.grad(xj), self.grad(xs)
            G = max(G, np.linalg.norm(gj), np.linalg.norm(gs))
            Hj = self.hess(xj)
            L = max(L, abs(p @ Hj @ p))
            p = Hj @ p / np.linalg.norm(Hj @ p)
            d = xs - xj
            if k >= 1:
                bk = lr**2 * sum((1 + lr * L) ** (k - 1 - j) * un for j, un in enumerate(unorms))
                rows.append({"k": k, "loss_jc": self.loss(xj), "loss_s": self.loss(xs),
                             "gap": self.loss(xs) - self.loss(xj), "recursive": gj @ w + q,
                             "cumulative": gj @ z + 0.5 * z @ Hj @ z, "jc_only": gj @ y + 0.5 * y @ Hj @ y,
                             "bound_bk": G * bk + 0.5 * L * bk**2})
            if k == K:
                break
            u = self.masked(self.hess(xs), pairs, gs)
            unorms.append(np.linalg.norm(u))
            w, q = d - lr * Hj @ d + lr**2 * u, 0.5 * d @ Hj @ d
            z = z - lr * Hj @ z + lr**2 * u
            y = y - lr * Hj @ y + lr**2 * self.masked(Hj, pairs, gj)
            xj = xj - lr * gj
            xs = self.step(xs, pairs, order, lr)
        return {c: [r[c] for r in rows] for c in rows[0]}


def _pattern(case, label):
    pat = case["patterns"][label]
    names = [b["name"] for b in case["blocks"]]
    return [(i - 1, j - 1) for i, j in pat["pairs"]], [names.index(n) for n in pat["order"]]


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
        mine["k"] = list(range(1, int(case["iters"]) + 1))
        ref = _read_csv(os.path.join(golden, name, label, "records.csv"))
        assert len(ref["k"]) == case["iters"]
        comp = compare_records(mine, ref, tolerances=reference_tolerances(ref, case["dtype"]))
        assert comp.ok, f"{name}/{label}: {comp.summary()}\n{comp.text()}"
        if label == "jc":
            assert all(v == 0.0 for c in ("gap", "recursive", "cumulative", "jc_only") for v in ref[c])
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
        assert e["eta3_estimate"] == pytest.approx(lr**2 * e["C_S"] + lr**3 * c3, rel=1e-10, abs=1e-13)
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
        assert not any(f.endswith(".pt") for _, _, fs in os.walk(os.path.join(golden, entry["name"])) for f in fs)
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
            assert open(os.path.join(root, f), "rb").read() == open(os.path.join(golden, rel), "rb").read(), rel


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
