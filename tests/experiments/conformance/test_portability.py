"""``make portability``: report --check of run folders under emulated instruction sets, and its
report.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crosscurv.experiments.conformance.emulation import (EMULATIONS, NO_AVX2, cached, environment,
                                                         lookup)
from crosscurv.experiments.conformance.portability import describe


def _check(verdict, n=30, **kw):
    base = {"verdict": verdict, "iterations": n, "parts_at": None, "growth": None, "notes": [],
            "first_disagreement": None}
    return {"exit": 0 if verdict != "disagree" else 1, "check": dict(base, **kw), "error": None,
            "seconds": 1.0}


def test_each_verdict_says_where_it_parts_and_whether_the_grown_tolerances_explain_it():
    assert describe(_check("bitwise"))["held"] == "bitwise to k = 30"
    assert describe(_check("within tolerance"))["held"] == "within tolerance to k = 30"
    parts = describe(_check("parts as predicted", parts_at=8, growth=1.7))
    assert parts["beyond_fixed"] == "8" and parts["explained"] == "yes" and parts[
        "growth"] == "1.70x"
    assert "parts at k = 8" in parts["held"]
    first = {"k": 19, "column": "loss_jc", "recomputed": 1.003, "committed": 1.0, "tolerance": 1e-5}
    grown = describe(_check("disagree", first_disagreement=first, growth=1.2,
                            notes=["beyond the fixed tolerances from k = 9; beyond them grown as a "
                                   "run perturbed at rounding parts at k = 19"]))
    assert grown["beyond_fixed"] == "9" and grown[
        "explained"] == "no" and "k = 19, `loss_jc`" in grown["held"]
    start = describe(_check("disagree", first_disagreement={"k": 0, "column": "theta0",
                                                            "recomputed": "differs",
                                                            "committed": None, "tolerance": None}))
    assert start["explained"] == "-" and "k = 0" in start["held"]
    crash = describe({"exit": 70, "check": None, "error": "crosscurv: internal error: boom",
                      "seconds": 0.1})
    assert crash["held"].startswith("no verdict: exit 70") and "boom" in crash["held"]


def test_emulations_are_the_make_test_portable_settings_and_do_not_leak(monkeypatch, tmp_path):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "Makefile"),
              encoding="utf-8") as fh:
        make = fh.read()
    for name, env in EMULATIONS.items():
        if env:
            assert f'"{name}"' in make, name  # the Makefile's PORTABLE_ENVS, word for word
    monkeypatch.setenv("MKL_CBWR", "AVX512")
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert "MKL_CBWR" not in environment("this CPU") and environment("this CPU")[
        "OMP_NUM_THREADS"] == "1"
    assert environment(NO_AVX2)["ATEN_CPU_CAPABILITY"] == "default"
    calls = []
    key = {"what": "x", "n": 1}
    assert lookup(str(tmp_path), key) is None
    assert cached(str(tmp_path), key, lambda: calls.append(1) or {"v": 2}) == {"v": 2}
    assert cached(str(tmp_path), key, lambda: calls.append(1) or {"v": 3}) == {
        "v": 2} and calls == [1]
    assert lookup(str(tmp_path), key) == {"v": 2} and lookup(str(tmp_path), {"what": "x",
                                                                             "n": 2}) is None


# a smoke run and two report --check subprocesses: 138 s on the shared 2-core machine under load
@pytest.mark.slow
def test_the_command_checks_a_run_under_emulations_and_writes_the_report(tmp_path):
    run = str(tmp_path / "run")
    # the run is made where "this CPU" checks it: the caller's MKL_CBWR or ATEN_CPU_CAPABILITY (as
    # some users set) would otherwise make the run under other kernels than its check, and "bitwise"
    # would not hold
    env = environment("this CPU")
    subprocess.run([sys.executable, "-m", "crosscurv", "run", "mlp", "--preset", "smoke", "--iters",
                    "3", "--device", "cpu", "--out",
                    run], check=True, capture_output=True, timeout=600, env=env)
    out, cache = tmp_path / "p.md", str(tmp_path / "cache")
    args = [sys.executable, "-m", "crosscurv.experiments.conformance.portability", "--iters", "3",
            "--runs", run, "--emulations", f"this CPU,{NO_AVX2}", "--tables", "--sweeps",
            str(tmp_path / "none"), "--cache", cache, "--out", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    text = out.read_text()
    rows = [x for x in text.splitlines() if x.startswith(f"| `{run}` |")]
    assert len(rows) == 2 and "| this CPU | 0 | bitwise to k = 3 |" in rows[0]
    assert f"| {NO_AVX2} |" in rows[1]  # whatever held there, it is named, with its exit code
    assert "## Table 1 over the checked iterations" in text and "this CPU: pass" in text
    assert proc.returncode in (0, 1) and (proc.returncode == 0) == ("2 of 2 checks held" in text)
    # the report again from the cache alone: the same rows, nothing recomputed
    again = subprocess.run(args + ["--cached-only"], capture_output=True, text=True, timeout=300,
                           env=env)
    assert again.returncode == proc.returncode and out.read_text() == text
