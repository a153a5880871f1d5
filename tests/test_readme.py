"""The README's "Use it from Python" block runs as written, and says what it claims."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from crosscurv.theory import gauss_seidel

README = Path(__file__).resolve().parents[1] / "README.md"
PROTOCOL_PART = "# the controlled protocol"


def _snippet(which: int = 0) -> str:
    """The ``which``-th python block of the "Use it from Python" section."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) > which, "missing python block in the 'Use it from Python' section"
    return blocks[which]


def _run(code: str) -> tuple[dict, str]:
    ns: dict = {"__name__": "readme"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), ns)
    return ns, out.getvalue()


def test_cross_curvature_and_one_step_part():
    """Everything before the protocol run: C_S("gs") is C_cross/2, the estimates are near the
    measured gap."""
    code = _snippet()
    assert PROTOCOL_PART in code
    ns, out = _run(code.split(PROTOCOL_PART, 1)[0])
    table, est, gap = ns["table"], ns["est"], ns["gap"]
    assert table.C_S("gs") == pytest.approx(table.C_cross / 2, rel=1e-12)
    assert table.C_S("gs") == table.C_S(gauss_seidel(2)) == table.C_S("output<-hidden")
    # Theorem 1: the gap is eta^2 C_S + O(eta^3); the eta^3 term brings the estimate closer
    assert abs(est["eta3"] - gap) < abs(est["eta2"] - gap) < abs(gap)
    assert "C_S(gs) =" in out and "measured =" in out


def test_whole_snippet_runs():
    ns, out = _run(_snippet())
    result = ns["result"]
    assert [r["k"] for r in result.records] == [1, 2, 3, 4, 5]
    assert len(out.strip().splitlines()) == 2 + 5


def _page_blocks(page: str) -> list[str]:
    """The python blocks of a docs page."""
    text = (README.parent / "docs" / page).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_chain_block_gives_the_same_step_bit_for_bit():
    """docs/python.md's chain block: a chained copy of the task takes the very GS step of the task
    itself."""
    import torch

    import crosscurv.numeric

    first, chain = _page_blocks("python.md")[:2]
    ns, _ = _run(first.split(PROTOCOL_PART, 1)[0] + chain)
    plain = crosscurv.numeric.gauss_seidel_step(ns["task"], ns["task"].params, 0.1)
    assert ns["chained"].chain is not None
    assert all(torch.equal(ns["step"][k], plain[k]) for k in plain)


def test_loss_terms_block_runs_the_termwise_engine():
    """docs/python.md's loss-terms block: the shards add up to the loss, and the run takes the
    termwise engine with the records of the retained-graph engine on the whole loss (float64: equal
    to 1e-10)."""
    import crosscurv.numeric

    first, _, terms = _page_blocks("python.md")[:3]
    ns, out = _run(first.split(PROTOCOL_PART, 1)[0] + terms)
    assert out.strip().splitlines()[-1] == "termwise"
    whole = crosscurv.numeric.run_protocol(ns["task"], "gs", 0.1, 3)
    assert whole.summary["hvp"]["engine_name"] == "graph"
    for a, b in zip(ns["result"].records, whole.records):
        for col in ("gap", "recursive", "cumulative", "jc_only"):
            assert a[col] == pytest.approx(b[col], rel=1e-10, abs=1e-14), (col, a["k"])


def test_your_own_model_block_runs_with_the_command(tmp_path, capsys):
    """README "Your own model": the factory file as written, run by ``crosscurv run`` at its own
    float64."""
    from crosscurv.experiments.cli import main
    from crosscurv.numeric.records import read_summary

    text = README.read_text(encoding="utf-8")
    section = text.split("## Your own model", 1)[1].split("\n## ", 1)[0]
    (tmp_path / "mf.py").write_text(re.findall(r"```python\n(.*?)```", section, flags=re.S)[0])
    out = tmp_path / "runs" / "mf"
    assert main(["run", f"{tmp_path / 'mf.py'}:mf", "--iters", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "at K = 3: L_JC = " in text and "(S = gs)" in text
    assert read_summary(str(out / "summary.json"))["settings"]["dtype"] == "float64"
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoint.pt", "figure.png", "records.csv", "summary.json"]
