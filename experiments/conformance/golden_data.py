"""The golden cases shipped with the package: where they are, and copying them out (no torch).

``golden_cases/`` beside this module is the folder
:func:`crosscurv.experiments.conformance.golden.write_golden`
writes (``crosscurv golden --recompute --out experiments/conformance/golden_cases --force``
regenerates it);
``crosscurv golden --out DIR`` copies it.  A golden *reference* is named by a path or by
``golden:<case>[/<label>]`` (:func:`resolve_reference`), e.g. ``golden:quadratic/gs``.
"""

from __future__ import annotations

import json
import os
import shutil

from crosscurv.theory.errors import GoldenError

__all__ = [
    "GOLDEN_DIR",
    "PREFIX",
    "GoldenError",
    "shipped_cases",
    "resolve_reference",
    "copy_golden",
]

#: The shipped golden folder (README.md, index.json, one folder per case).
GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_cases")
#: Prefix naming a shipped case instead of a folder.
PREFIX = "golden:"


def shipped_cases() -> list[str]:
    """The case names of the shipped folder, in ``index.json`` order."""
    with open(os.path.join(GOLDEN_DIR, "index.json"), encoding="utf-8") as fh:
        return [c["name"] for c in json.load(fh)["cases"]]


def resolve_reference(ref: str) -> str:
    """The folder ``ref`` names: ``golden:<case>[/<label>]`` (a shipped case, or one of its runs),
    else ``ref``.

    Raises:
        GoldenError: a ``golden:`` name that is not shipped.
    """
    if not ref.startswith(PREFIX):
        return ref
    rel = ref[len(PREFIX) :].strip("/")
    parts = rel.split("/")
    path = os.path.join(GOLDEN_DIR, *parts)
    if not rel or len(parts) > 2 or not os.path.isdir(path):
        raise GoldenError(
            f"no shipped golden case {rel!r} (cases: {', '.join(shipped_cases())}; "
            "runs: <case>/jc, <case>/gs, <case>/partial)"
        )
    return path


def copy_golden(out_dir: str, cases=None, force: bool = False) -> list[str]:
    """Copy the shipped cases (default all) with README.md and index.json into ``out_dir``.

    Returns:
        the paths written, relative to ``out_dir``.

    Raises:
        GoldenError: unknown case, ``out_dir`` a file or a non-empty folder (without ``force``).
    """
    known = shipped_cases()
    names = list(cases or known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise GoldenError(
            f"unknown golden case(s) {', '.join(unknown)} (cases: {', '.join(known)})"
        )
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise GoldenError(f"output path {out_dir} exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        raise GoldenError(
            f"{out_dir} is not empty; choose another --out or pass --force to overwrite"
        )
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise GoldenError(f"cannot create {out_dir}: {exc.strerror}") from None
    with open(os.path.join(GOLDEN_DIR, "index.json"), encoding="utf-8") as fh:
        index = json.load(fh)
    index["cases"] = [c for c in index["cases"] if c["name"] in names]
    written = []
    for entry in index["cases"]:
        for rel in entry["files"]:
            dst = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(GOLDEN_DIR, rel), dst)
            written.append(rel)
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1, allow_nan=False)
        fh.write("\n")
    shutil.copyfile(os.path.join(GOLDEN_DIR, "README.md"), os.path.join(out_dir, "README.md"))
    return written + ["index.json", "README.md"]
