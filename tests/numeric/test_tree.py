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
