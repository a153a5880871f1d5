"""Every code block of README.md and docs/ is executed or checked as written.

* ``python`` blocks of one page run in order in one namespace (a later block may use the
  names of an earlier one), in a subprocess from the repository root, bounded by a timeout;
* every ``crosscurv ...`` line of a ``sh`` block is parsed by the real command-line parser
  (the sub-command exists, its flags exist and accept those values), and every
  ``make TARGET`` names a target of the Makefile;
* the README's quick start runs for real, as a user types it.

A block that is not meant to run is written as ``text``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def blocks_in(text: str, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def blocks(page: Path, lang: str) -> list[str]:
    return blocks_in(page.read_text(encoding="utf-8"), lang)


def shell_commands(body: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, prompts, comments, environment
    assignments and redirections removed; each ``&&`` part separately."""
    text = re.sub(r"\\\n\s*", " ", body)
    out = []
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"&&|;|\|", line):
            words = shlex.split(part, comments=True)
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            cut = next((i for i, w in enumerate(words) if w[:1] in "<>" or w[:2] in ("2>", "1>")),
                       len(words))
            words = words[:cut]
            if words:
                out.append(words)
    return out


def _sh_cases():
    for page in PAGES:
        for i, body in enumerate(blocks(page, "sh")):
            for words in shell_commands(body):
                yield pytest.param(words, id=f"{page.relative_to(REPO)}#{i}:{' '.join(words)[:60]}")


MAKE_TARGETS = set(re.findall(r"^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("words", list(_sh_cases()))
def test_shell_lines_are_real_commands(words):
    from crosscurv.experiments.cli import COMMANDS, build_parser

    head = os.path.basename(words[0])
    if head == "crosscurv":
        argv = words[1:]
        assert argv and argv[0] in COMMANDS, f"no sub-command {argv[:1]}"
        if argv[1:] in (["--help"], ["-h"]):
            return
        build_parser(only=argv[0]).parse_args(argv)  # raises InputError on an unknown flag or value
    elif head == "make":
        for target in words[1:]:
            if "=" not in target and not target.startswith("-"):
                assert target in MAKE_TARGETS, f"make {target}: no such target"


def _python_pages():
    return [pytest.param(p, id=str(p.relative_to(REPO))) for p in PAGES if blocks(p, "python")]


@pytest.mark.parametrize("page", _python_pages())
def test_python_blocks_run(page):
    code = "\n".join(blocks(page, "python"))
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_readme_quick_start_runs(tmp_path):
    """The quick start's commands, in a scratch folder, as a user types them."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split(
        "\n## ", 1)[0]
    (body,) = blocks_in(section, "sh")
    exe = Path(sys.executable).parent / "crosscurv"
    for words in shell_commands(body):
        assert os.path.basename(words[0]) == "crosscurv"
        proc = subprocess.run([str(exe), *words[1:]], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "runs" / "mlp" / "records.csv").is_file()
    assert "Correct" in proc.stdout


def test_the_site_builds_strictly(tmp_path):
    """``make docs``' build: MkDocs in strict mode, so a broken link, anchor or API reference fails.
    """
    api = tmp_path / "api" / "crosscurv"
    api.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "testing"):
        (api / name).symlink_to(REPO / "crosscurv" / name)
    for layer in ("theory", "numeric", "experiments"):
        (api / layer).symlink_to(REPO / layer)
    config = tmp_path / "mkdocs.yml"
    text = (REPO / "mkdocs.yml").read_text().replace("paths: [build/api]",
                                                     f"paths: [{tmp_path / 'api'}]")
    config.write_text(text.replace("docs_dir: docs", f"docs_dir: {REPO / 'docs'}"))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d",
                           str(tmp_path / "site")], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
