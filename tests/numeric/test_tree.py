"""crosscurv.numeric.tree: the lazy vector, read entry by entry by a store that parks it."""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.offload import Offloaded, Resident


def _pair():
    g = torch.Generator().manual_seed(0)
    return ({"a": torch.randn(3, generator=g), "b": torch.randn(2, 2, generator=g)},
            {"a": torch.randn(3, generator=g), "b": torch.randn(2, 2, generator=g)})


def test_a_lazy_vector_forms_each_entry_when_read():
    x, y = _pair()
    reads = []

    def entry(k):
        reads.append(k)
        return x[k] + y[k]

    v = tree.lazy(x, entry)
    assert list(v) == ["a", "b"] and len(v) == 2 and reads == []
    assert torch.equal(v["b"], x["b"] + y["b"]) and reads == ["b"]
    with pytest.raises(KeyError):
        v["c"]


@pytest.mark.parametrize("store", ["resident", "offloaded"])
def test_a_parked_lazy_vector_is_the_vector_bit_for_bit(tmp_path, store):
    x, y = _pair()
    S = Resident() if store == "resident" else Offloaded("cpu", str(tmp_path))
    try:
        S.park("s", tree.lazy(x, lambda k: x[k] + y[k]))
        got = S.fetch("s")
        assert list(got) == ["a", "b"] and all(torch.equal(got[k], x[k] + y[k]) for k in x)
    finally:
        S.close()


def test_norm_reads_each_entry_once_and_equals_the_root_of_dot_bit_for_bit():
    g = torch.Generator().manual_seed(3)
    a = {"w": torch.randn(300, 70, generator=g), "b": torch.randn(70, generator=g),
         "c": torch.randn(1, generator=g)}
    reads = []
    lazy = tree.lazy(a, lambda n: reads.append(n) or a[n].clone())
    n = tree.norm(lazy)
    assert reads == ["w", "b", "c"]  # once each, in order
    assert torch.equal(n, torch.sqrt(tree.dot(a, a)))  # the same products, summed in the same order
    assert float(tree.norm({})) == 0.0
