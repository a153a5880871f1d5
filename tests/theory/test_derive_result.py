"""crosscurv.theory.derivation.derive: one boolean per identity, the eta^3 coefficient, leading
remainders, the report."""

from __future__ import annotations

import json

import pytest
import sympy

import crosscurv.theory.derivation as derive_mod
from crosscurv.theory.block_model import ModelError
from crosscurv.theory.derivation import EXTENSION_KEYS, IDENTITY_KEYS, derive, gs_orders
from crosscurv.theory.patterns import PatternError
from crosscurv.theory.report import render_markdown, render_summary, write_markdown

EXPECTED_KEYS = ["lemma1", "theorem1", "corollary1", "order_invariance", "lemma3", "theorem2",
                 "theorem3_quadratic"]


@pytest.mark.parametrize("n, dims, spec", [
    (2, 1, "jc"), (2, 1, "gs"), (2, 1, "gs:2,1"), (2, 2, "gs"),
    (3, 1, "gs"), (3, 1, "chain"), (3, 1, "2<-1"), (3, 1, "gs:3,1,2"),
    (4, 1, "gs"), (4, 1, "3<-1,4<-2,1<-2"), (4, 1, "chain:4,3,2,1"),
])
def test_every_identity_holds(n, dims, spec):
    r = derive(n, dims, spec)
    assert list(r.identities) == EXPECTED_KEYS == list(IDENTITY_KEYS)
    assert all(v is True for v in r.identities.values()), r.failures
    assert set(r.extensions) == set(EXTENSION_KEYS) and all(r.extensions.values()), r.failures
    assert r.ok and r.failures == []
    assert r.gs_orders_checked == len(list(gs_orders(n)))
    assert isinstance(r.eta3_coefficient, str)
    # the string parses back to the expression that was derived
    assert sympy.expand(sympy.sympify(r.eta3_coefficient, locals={s.name: s for s in r.expressions[
        "eta3"].free_symbols})
                        - r.expressions["eta3"]) == 0
    assert "eta eps^2" in r.lemma3_leading
    assert all(sum(int(x[-1]) if "^" in x else 1 for x in k.split()) == 3
               for k in r.theorem2_leading)
    assert [s["K"] for s in r.theorem3] == [1, 2, 3, 4]
    assert set(r.timings) >= {"one_step", "lemma3_theorem2", "theorem3", "total"}
    d = json.loads(json.dumps(r.to_dict()))
    assert d["identities"] == r.identities and d["n_blocks"] == n and d["dims"] == dims


def test_eta3_coefficient_gs3_by_hand():
    """N = 3 scalar GS: c3 = -g^T (L + H) L g - 1/2 sum_i T[E_i g, P_i g, P_i g], written out."""
    r = derive(3, 1, "gs")
    s = {x.name: x for x in r.expressions["eta3"].free_symbols}
    g1, g2, g3 = (sympy.Symbol(f"g{i}", real=True) for i in (1, 2, 3))
    H = lambda i, j: sympy.Symbol(f"H{min(i, j)}{max(i, j)}", real=True)  # noqa: E731
    T = lambda *ix: sympy.Symbol("T" + "".join(map(str, sorted(ix))), real=True)  # noqa: E731
    g = sympy.Matrix([g1, g2, g3])
    Hm = sympy.Matrix(3, 3, lambda a, b: H(a + 1, b + 1))
    L = sympy.Matrix(3, 3, lambda a, b: Hm[a, b] if a > b else 0)
    cubic = T(2, 1, 1) * g2 * g1 * g1 + T(3, 1, 1) * g3 * g1**2 + 2 * T(3, 1, 2) * g3 * g1 * g2 + T(
        3, 2, 2) * g3 * g2**2
    want = -(g.T * (L + Hm) * L * g)[0, 0] - cubic / 2
    assert set(s) <= {x.name for x in want.free_symbols}
    assert sympy.expand(r.expressions["eta3"] - want) == 0


def test_failure_is_reported(monkeypatch):
    """If a closed form disagreed with the series, derive says so (the checks can fail)."""
    real = derive_mod.delay_curvature
    monkeypatch.setattr(derive_mod, "delay_curvature", lambda m, p: real(m, p) * 2 + m.g[0])
    r = derive(2, 1, "gs")
    assert r.identities["theorem1"] is False and not r.ok
    assert any(f.startswith("theorem1") for f in r.failures)
    assert "**FAILS**" in render_markdown(r)
    assert "[FAIL] theorem1" in render_summary(r)


@pytest.mark.parametrize("args, exc, needle", [
    ((1, 1, "gs"), ModelError, ">= 2"),
    ((3, 3, "gs"), ModelError, "1 or 2"),
    ((3, 0, "gs"), ModelError, "1 or 2"),
    ((3, 1, "1<-1"), PatternError, "self pairs"),
    ((3, 1, "2<-3,3<-2"), PatternError, "cycle"),
    ((3, 1, "gs:1,2"), PatternError, "names 2 blocks"),
])
def test_bad_requests(args, exc, needle):
    with pytest.raises(exc, match=needle.replace("*", r"\*")):
        derive(*args)


def test_markdown_report(tmp_path):
    r = derive(3, 1, "chain")
    path = write_markdown(r, tmp_path / "sub" / "theory.md", "crosscurv derive --pattern chain")
    text = path.read_text()
    assert text.startswith("# Symbolic derivations")
    assert "crosscurv derive --pattern chain" in text
    for key in IDENTITY_KEYS + EXTENSION_KEYS:
        assert f"`{key}`" in text
    assert "FAILS" not in text
    assert sympy.latex(r.expressions["eta3"]) in text
    assert text.count("$$") % 2 == 0
    assert "| 4 |" in text  # Theorem 3 table reaches K = 4
