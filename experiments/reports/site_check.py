"""The documentation site as a reader sees it: the built Results page in headless Chromium.

Serves ``site/`` on ``127.0.0.1``, screenshots the Results page (``OUT/results.png``) and records
its tables and images through a same-origin probe page (``OUT/results_dom.json``). Passes when the
article holds Table 1 beside the paper (columns ``Correct`` and ``paper``, a row of the recursive
estimate) and at least :data:`MIN_IMAGES` images, all loaded. Exit codes: 0 passed, 1 failed (one
line each), 2 no site or no Chromium. ::

    python -m crosscurv.experiments.reports.site_check --site site --out build/docs-check
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["MIN_IMAGES", "PROBE", "check_dom", "check_site"]

MIN_IMAGES = 3
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--disable-dev-shm-usage",
    "--mute-audio",
)
#: the probe page: opens the page in a frame and writes what its article holds into #out (JSON)
PROBE = """<!doctype html><html><body><pre id="out">pending</pre>
<iframe id="f" src="{page}" width="1280" height="2400"></iframe>
<script>
function text(c) {{ return c.textContent.trim(); }}
document.getElementById('f').addEventListener('load', function () {{
  var d = this.contentDocument, art = d.querySelector('article') || d.body;
  var imgs = Array.from(art.querySelectorAll('img'));
  Promise.all(imgs.map(function (i) {{
    return i.complete ? null : new Promise(function (r) {{ i.onload = r; i.onerror = r; }});
  }})).then(function () {{
    document.getElementById('out').textContent = JSON.stringify({{
      title: d.title,
      tables: Array.from(art.querySelectorAll('table')).map(function (t) {{
        return {{head: Array.from(t.querySelectorAll('th')).map(text),
                rows: Array.from(t.querySelectorAll('tbody tr')).map(function (r) {{
                  return Array.from(r.children).map(text); }})}};
      }}),
      images: imgs.map(function (i) {{
        return {{src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth}}; }})
    }});
  }});
}});
</script></body></html>
"""


def check_dom(dom: dict) -> list[str]:
    """Failures (one line each) of the probe's record of the Results page; empty when it passes."""
    fails = []
    tables = dom.get("tables") or []
    table1 = [
        t
        for t in tables
        if any(h.startswith("Correct") for h in t["head"]) and "paper" in t["head"]
    ]
    if not table1:
        fails.append(
            f"no table with the columns Correct and paper among the page's {len(tables)} table(s)"
        )
    elif not any(row and any(c.startswith("Recursive") for c in row) for row in table1[0]["rows"]):
        fails.append("Table 1 beside the paper has no row of the recursive estimate")
    images = dom.get("images") or []
    if len(images) < MIN_IMAGES:
        fails.append(f"{len(images)} image(s) on the page, fewer than {MIN_IMAGES}")
    for img in images:
        if not img.get("complete") or not img.get("width"):
            fails.append(f"image {img.get('src')} did not load (naturalWidth {img.get('width')})")
    return fails


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the check prints its own summary
        pass


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check_site(site: str = "site", page: str = "results/", out: str = "build/docs-check",
               timeout: float = 120.0) -> tuple[list[str], str]:
    """Serve the built ``site``, screenshot ``page`` into ``out`` and record its DOM
    (``out/results_dom.json``) with headless Chromium (each call at most ``timeout`` seconds).

    Returns ``(failures, summary)``: what :func:`check_dom` and the screenshot found wrong (one line
    each; empty when the page passes) and, when it passes, the line that says what it shows.

    Raises:
        crosscurv.theory.errors.InputError: ``page`` is not a built page of ``site``, or no
        Chromium is installed (one line).
    """
    from crosscurv.theory.errors import InputError

    site, out = Path(site), Path(out)
    if not (site / page / "index.html").is_file() and not (site / page).is_file():
        raise InputError(f"{site / page} is not a built page (run `make docs` first)")
    chromium = _chromium()
    if chromium is None:
        raise InputError("no Chromium found (Debian: apt-get install -y chromium)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "site"
        shutil.copytree(site, served, symlinks=False)
        (served / "_site_check.html").write_text(PROBE.format(page=page), encoding="utf-8")
        handler = functools.partial(_Quiet, directory=str(served))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        profile = Path(tmp) / "profile"
        flags = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        try:
            shot = out / "results.png"
            _run(
                [
                    *flags,
                    f"--screenshot={shot}",
                    "--window-size=1280,2400",
                    "--virtual-time-budget=10000",
                    base + page,
                ],
                timeout,
            )
            probe = _run(
                [*flags, "--dump-dom", "--virtual-time-budget=20000", base + "_site_check.html"],
                timeout,
            )
        finally:
            server.shutdown()
    m = re.search(r'<pre id="out">(.*?)</pre>', probe.stdout, re.S)
    text = m.group(1) if m else ""
    text = (
        text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    )
    try:
        dom = json.loads(text)
    except ValueError:
        dom = {}
    (out / "results_dom.json").write_text(json.dumps(dom, indent=1), encoding="utf-8")
    fails = (
        check_dom(dom)
        if dom
        else [f"the probe page recorded nothing ({text[:60] or probe.stderr[-200:]!r})"]
    )
    if not shot.is_file():
        fails.append(f"no screenshot was written ({probe.stderr[-200:]!r})")
    if fails:
        return fails, ""
    tables, images = dom["tables"], dom["images"]
    return fails, (
        f"{page} shows {len(tables)} table(s) and {len(images)} image(s), all loaded "
        f"({', '.join(str(i['width']) + ' px' for i in images)} wide); screenshot {shot}"
    )


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import site_check

    sys.exit(site_check())
