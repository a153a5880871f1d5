"""Parking vectors between uses: lossless round trips, files removed on close."""

import os

import pytest
import torch

from numeric.offload import Offloaded, Resident, make_store


def _vec(dtype):
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(3, 4, generator=g).to(dtype), "b": torch.randn(4, generator=g).to(dtype)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_offloaded_round_trip_is_bit_exact_and_keeps_keys_and_shapes(tmp_path, dtype):
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(dtype)
    store.park("z", v)
    folder = [d for d in os.listdir(tmp_path) if d.startswith(".offload-")]
    assert len(folder) == 1 and os.listdir(tmp_path / folder[0]) == ["z.pt"]
    out = store.fetch("z")
    assert list(out) == list(v)
    for k in v:
        assert out[k].dtype == dtype and out[k].shape == v[k].shape and torch.equal(out[k], v[k])
    assert torch.equal(store.fetch("z")["w"], v["w"])  # fetching does not consume
    store.park("z", {k: t * 2 for k, t in v.items()})  # parking again replaces
    assert torch.equal(store.fetch("z")["b"], v["b"] * 2)
    store.park("w", None)
    assert store.fetch("w") is None
    store.close()
    assert os.listdir(tmp_path) == []


def test_resident_store_passes_references_and_make_store_chooses():
    v = _vec(torch.float64)
    store = make_store(False, "cpu")
    assert isinstance(store, Resident) and not store.offloaded
    store.park("p", v)
    assert store.fetch("p")["w"] is v["w"]
    off = make_store(True, "cpu")
    assert isinstance(off, Offloaded) and off.offloaded
    off.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_offloaded_gpu_vectors_wait_in_host_memory():
    store = Offloaded("cuda")
    v = {k: t.cuda() for k, t in _vec(torch.float32).items()}
    store.park("z", v)
    assert store._host["z"]["w"].device.type == "cpu"
    out = store.fetch("z")
    assert out["w"].device.type == "cuda" and torch.equal(out["w"], v["w"])
