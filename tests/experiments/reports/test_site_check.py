"""The site check: what it asserts of the probe's record, and a real headless Chromium on a small
site."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crosscurv.experiments.reports.site_check import check_dom

REPORTS = Path(__file__).resolve().parents[3] / "reports"
TABLE = {
    "head": ["Task", "Estimate", "Correct (5 seeds)", "paper"],
    "rows": [["FL", "Recursive", "99%", "93%"]],
}


def test_check_dom_needs_table_1_and_loaded_images():
    img = {"src": "a.png", "complete": True, "width": 640}
    assert check_dom({"tables": [TABLE], "images": [img] * 3}) == []
    fails = check_dom(
        {"tables": [], "images": [img, {"src": "b.png", "complete": True, "width": 0}]}
    )
    assert len(fails) == 3 and "b.png did not load" in fails[2] and "fewer than 3" in fails[1]
    no_row = {"head": TABLE["head"], "rows": [["FL", "Cumulative", "95%", "83%"]]}
    assert check_dom({"tables": [no_row], "images": [img] * 3}) == [
        "Table 1 beside the paper has no row of the recursive estimate"
    ]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs the Debian package chromium")
def test_site_check_in_headless_chromium(tmp_path):
    site = tmp_path / "site"
    (site / "results").mkdir(parents=True)
    (site / "figures").mkdir()
    png = sorted((REPORTS / "figures").glob("*.png"))[0]
    shutil.copy(png, site / "figures" / "a.png")
    rows = "<tr><td>FL</td><td>Recursive</td><td>99%</td><td>93%</td></tr>"
    head = "".join(f"<th>{h}</th>" for h in TABLE["head"])
    table = f"<table><thead><tr>{head}</tr></thead>{rows}</table>"
    imgs = '<img src="../figures/a.png"><img src="../figures/a.png"><img src="../figures/{}.png">'
    page = "<html><body><article>{}{}</article></body></html>"
    (site / "results" / "index.html").write_text(page.format(table, imgs.format("a")))
    cmd = [
        sys.executable,
        "-m",
        "crosscurv.experiments.reports.site_check",
        "--site",
        str(site),
        "--out",
        str(tmp_path / "out"),
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (
        "3 image(s), all loaded" in ok.stdout
        and (tmp_path / "out" / "results.png").stat().st_size > 1000
    )
    (site / "results" / "index.html").write_text(page.format(table, imgs.format("missing")))
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "../figures/missing.png did not load" in bad.stdout
