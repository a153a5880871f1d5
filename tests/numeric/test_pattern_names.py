"""Patterns as the tool prints them: in the task's block names wherever the names can be read back.

``spelling`` writes ``gs:V,U`` for the GS order ``2,1`` of blocks ``U, V``; ``parse_pattern`` with
the same names reads it back as the same pattern, for every pattern kind; names that could not be
read back (numbers, keywords, punctuation) leave the indices. advise's default candidates use it.
"""

from __future__ import annotations

import itertools
import re

import pytest

from crosscurv.numeric.advice import parse_candidates
from crosscurv.theory.patterns import DelayPattern, chain, gauss_seidel, parse_pattern, spelling
from tests.numeric.cases import bilinear_lora, tanh_mlp

NAMES = ["emb", "layer_1", "head.w"]


def _patterns(n):
    yield parse_pattern("jc", n)
    for order in itertools.permutations(range(n)):
        yield gauss_seidel(n, order)
        yield chain(n, order)
    for pairs in (((1, 0),), ((2, 0),), ((1, 0), (2, 1)), ((2, 0), (2, 1))):
        yield DelayPattern(n, frozenset(pairs), "pairs")


@pytest.mark.parametrize("pattern", list(_patterns(3)), ids=lambda p: f"{p.name}{sorted(p.pairs)}")
def test_spelling_reads_back_as_the_same_pattern(pattern):
    text = spelling(pattern, NAMES)
    assert not any(
        c.isdigit() and c != "1" for c in text.replace("layer_1", "")
    )  # names, not indices
    back = parse_pattern(text, 3, NAMES)
    assert back.pairs == pattern.pairs
    assert DelayPattern.from_dict(pattern.to_dict()).pairs == pattern.pairs
    assert parse_pattern(spelling(pattern), 3).pairs == pattern.pairs  # without names: indices


@pytest.mark.parametrize(
    "names", [["1", "2"], ["gs", "x"], ["a b", "c"], ["a", "a"], ["x<-y", "z"]]
)
def test_names_that_cannot_be_read_back_leave_the_indices(names):
    p = gauss_seidel(2, [1, 0])
    assert spelling(p, names) == "gs:2,1" and p.describe(names) == "{1<-2}"


def test_advise_defaults_are_spelled_with_block_names():
    assert [n for n, _ in parse_candidates(bilinear_lora())] == ["jc", "gs", "gs:A,B"]
    names = [n for n, _ in parse_candidates(tanh_mlp())]
    assert names[:3] == ["jc", "gs", "gs:layer4,layer3,layer2,layer1"] and names[-1] == "chain"
    assert not [n for n in names if re.search(r"(^|[:,<-])\d", n)]  # no block given by its index
    # what the user typed stays as typed
    assert [n for n, _ in parse_candidates(bilinear_lora(), "gs:2,1")] == ["jc", "gs:2,1"]
