"""Golden cases with an optimizer: an independent NumPy implementation of the golden README's
optimizer section.

Reads only ``case.json`` of ``quartic_momentum`` and ``quadratic_block_lr`` and reproduces
``one_step.json`` and every ``records.csv`` (heavy ball and per-block step sizes: the steps, the
generalized recursive / cumulative / JC-only estimates and the bound majorant); then
``validate-records`` accepts the files against their run directories and rejects the plain
protocol's records there.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from crosscurv.experiments.cli import main
from crosscurv.experiments.conformance.golden import write_golden
from crosscurv.numeric.record_comparison import compare_records, reference_tolerances
from tests.experiments.conformance.test_golden import (LABELS, NumpyProblem, _arr, _pattern,
                                                       _read_csv)

#: numerically sensitive: `make test-portable` runs this file under emulated instruction sets
pytestmark = pytest.mark.portable

CASES = ("quartic_momentum", "quadratic_block_lr")


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden_opt")
    write_golden(str(out), ["quartic", *CASES])
    return str(out)


class NumpyOptimizer:
    """Heavy ball (``beta``; ``0`` for plain steps) with per-coordinate factors ``f`` on a
    :class:`NumpyProblem`."""

    def __init__(self, prob: NumpyProblem, case: dict):
        self.p = prob
        spec = case.get("optimizer", "sgd")
        self.beta = float(spec.split(":")[1]) if spec.startswith("momentum") else 0.0
        names = [b["name"] for b in case["blocks"]]
        self.f = np.ones_like(prob.x0)
        for name, fac in case.get("block_lr", {}).items():
            self.f[prob.blocks[names.index(name)]] = fac
        self.f_max = float(self.f.max())

    def step(self, x, m, pairs, order, lr):
        """One scheme step with buffers ``m``: fresh gradient per block, ``m' = beta m + g``, ``x -
        lr f m'``."""
        new, newm = x.copy(), m.copy()
        for i in order:
            state = x.copy()
            for a, j in pairs:
                if a == i:
                    state[self.p.blocks[j]] = new[self.p.blocks[j]]
            b = self.p.blocks[i]
            newm[b] = self.beta * m[b] + self.p.grad(state)[b]
            new[b] = x[b] - lr * self.f[b] * newm[b]
        return new, newm

    def tangent(self, z, zm, r, lr):
        zm = self.beta * zm + r
        return z - lr * self.f * zm, zm

    def protocol(self, pairs, order, lr, K):
        p, f = self.p, self.f
        xj, xs, pv = p.x0.copy(), p.x0.copy(), p.p0.copy()
        mj, ms = np.zeros_like(xj), np.zeros_like(xj)
        z, zm, y, ym = (np.zeros_like(xj) for _ in range(4))
        G = L = 0.0
        norms, w, q, rows = [], None, None, []
        jc_order = list(range(len(p.blocks)))
        for k in range(K + 1):
            gj, gs = p.grad(xj), p.grad(xs)
            G = max(G, np.linalg.norm(gj), np.linalg.norm(gs))
            Hj = p.hess(xj)
            L = max(L, abs(pv @ Hj @ pv))
            pv = Hj @ pv / np.linalg.norm(Hj @ pv)
            d, dm = xs - xj, ms - mj
            if k >= 1:
                rows.append({"k": k, "loss_jc": p.loss(xj), "loss_s": p.loss(xs), "gap": p.loss(xs)
                             - p.loss(xj),
                             "recursive": gj @ w + q, "cumulative": gj @ z + 0.5 * z @ Hj @ z,
                             "jc_only": gj @ y + 0.5 * y @ Hj @ y, "bound_bk": self.bound(norms, lr,
                                                                                          G, L)})
            if k == K:
                break
            fs = p.masked(p.hess(xs), pairs, f * (self.beta * ms + gs))
            fj = p.masked(Hj, pairs, f * (self.beta * mj + gj))
            norms.append(np.linalg.norm(f * fs) if self.beta == 0 else np.linalg.norm(fs))
            w, _ = self.tangent(d, dm, Hj @ d - lr * fs, lr)
            q = 0.5 * d @ Hj @ d
            z, zm = self.tangent(z, zm, Hj @ z - lr * fs, lr)
            y, ym = self.tangent(y, ym, Hj @ y - lr * fj, lr)
            xj, mj = self.step(xj, mj, [], jc_order, lr)
            xs, ms = self.step(xs, ms, pairs, order, lr)
        return {c: [r[c] for r in rows] for c in rows[0]}

    def bound(self, norms, lr, G, L):
        a = c = 0.0
        for n in norms:
            if self.beta == 0:
                a = (1 + lr * self.f_max * L) * a + lr**2 * n
            else:
                c = self.beta * c + L * a + lr * n
                a = a + lr * self.f_max * c
        return G * a + 0.5 * L * a * a


def _case(golden, name):
    with open(os.path.join(golden, name, "case.json")) as fh:
        return json.load(fh)


@pytest.mark.parametrize("name", CASES)
def test_numpy_reproduces_optimizer_records(golden, name):
    case = _case(golden, name)
    opt = NumpyOptimizer(NumpyProblem(case), case)
    for label in LABELS:
        pairs, order = _pattern(case, label)
        mine = opt.protocol(pairs, order, float(case["lr"]), int(case["iters"]))
        mine["k"] = list(range(1, int(case["iters"]) + 1))
        ref = _read_csv(os.path.join(golden, name, label, "records.csv"))
        comp = compare_records(mine, ref, tolerances=reference_tolerances(ref, case["dtype"]))
        assert comp.ok, f"{name}/{label}: {comp.summary()}\n{comp.text()}"
        with open(os.path.join(golden, name, label, "summary.json")) as fh:
            settings = json.load(fh)["settings"]
        assert settings["optimizer"]["spec"] == case.get("optimizer", "sgd")
        assert settings["block_lr"] == case.get("block_lr", {})
        if label != "jc":
            assert any(abs(v) > 1e-4 for v in ref["gap"])


@pytest.mark.parametrize("name", CASES)
def test_numpy_reproduces_optimizer_one_step(golden, name):
    case = _case(golden, name)
    with open(os.path.join(golden, name, "one_step.json")) as fh:
        exp = json.load(fh)
    prob = NumpyProblem(case)
    opt = NumpyOptimizer(prob, case)
    x, lr = prob.x0, float(case["lr"])
    g, H = prob.grad(x), prob.hess(x)
    n = len(prob.blocks)
    c = np.array([[g[prob.blocks[i]] @ H[np.ix_(prob.blocks[i], prob.blocks[j])] @ g[prob.blocks[j]]
                   for j in range(n)] for i in range(n)])
    np.testing.assert_allclose(np.array(exp["c"]), c, rtol=1e-11, atol=1e-13)
    fb = [float(opt.f[b][0]) for b in prob.blocks]
    assert list(exp["block_factors"].values()) == fb
    xj, _ = opt.step(x, np.zeros_like(x), [], list(range(n)), lr)
    assert exp["loss_jc_1"] == pytest.approx(prob.loss(xj), rel=1e-13, abs=1e-13)
    for label in LABELS:
        pairs, order = _pattern(case, label)
        e = exp["patterns"][label]
        assert e["C_S"] == pytest.approx(sum(fb[i] * fb[j] * c[i, j] for i, j in pairs), rel=1e-11,
                                         abs=1e-13)
        assert e["eta2_estimate"] == pytest.approx(lr**2 * e["C_S"], rel=1e-14)
        xs, _ = opt.step(x, np.zeros_like(x), pairs, order, lr)
        got = np.concatenate([_arr(e["theta_s_1"][k]).ravel() for k in prob.names])
        np.testing.assert_allclose(got, xs, rtol=1e-14, atol=1e-15)
        assert e["gap_1"] == pytest.approx(prob.loss(xs) - prob.loss(xj), rel=1e-9, abs=1e-13)


def test_validate_records_checks_the_optimizer_cases(golden, capsys):
    for name in CASES:
        for label in ("gs", "partial"):
            ref = os.path.join(golden, name, label)
            assert main(["validate-records", os.path.join(ref, "records.csv"), "--reference",
                         ref]) == 0
    capsys.readouterr()
    # the plain protocol's records of the same problem are not those of the optimizer case
    plain = os.path.join(golden, "quartic", "gs", "records.csv")
    assert main(["validate-records", plain, "--reference", os.path.join(golden, "quartic_momentum",
                                                                        "gs")]) == 1
    assert "disagree" in capsys.readouterr().out.lower()
