"""benchmarks/bench_peers.py as a user runs it: a subprocess on the smoke MLP, bounded by a timeout.

Skipped unless the peers (the ``bench`` extra) are installed.  Asserts what
the script promises, not timings: every peer is either measured (finite
positive ratios to a gradient, products that agree with crosscurv's to
float32 round-off) or listed as not supported with a reason.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_peers.py"
PEER_MODULES = ("pyhessian", "curvlinops", "backpack", "hessian_eigenthings")

missing = [m for m in PEER_MODULES if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(missing), reason=f"peers not installed (bench extra): {', '.join(missing)}")


def test_bench_peers_smoke(tmp_path):
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", "mlp", "--preset", "smoke", "--repeats", "1",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert [r["task"] for r in data["results"]] == ["mlp"]
    for r in data["results"]:
        measured, unsupported = set(r["rows"]), set(r["unsupported"])
        peers = {"crosscurv", "PyHessian", "curvlinops", "BackPACK", "torch.func", "hessian-eigenthings"}
        assert peers <= measured | unsupported, (r["task"], measured, unsupported)
        assert "crosscurv" in measured and "PyHessian" in measured
        for peer, row in r["rows"].items():
            for what in ("gradient", "product", "JC point", "S point"):
                assert math.isfinite(row[what]) and row[what] > 0, (r["task"], peer, what, row)
            # a point takes a gradient and at least one product: never cheaper than the gradient alone
            assert row["JC point"] > row["S point"] * 0.5
            assert r["agrees"][peer] < 1e-4, (r["task"], peer, r["agrees"][peer])
        for peer, why in r["unsupported"].items():
            assert why.strip(), peer
        # the 8-block MLP under GS: M_S v takes 7 products (one per fresh block)
        assert r["masked_products"] == 7 and r["n_blocks"] == 8
    assert "| crosscurv |" in proc.stdout and "not supported" in proc.stdout
