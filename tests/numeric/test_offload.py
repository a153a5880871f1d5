"""Parking vectors between uses: lossless round trips, files removed on close."""

import os

import pytest
import torch

from crosscurv.numeric.offload import (CARRIED_VECTORS, OFFLOAD_MIN_BYTES, PEAK_VECTORS, Offloaded,
                                       Resident, make_store, should_offload)


def _vec(dtype):
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(3, 4, generator=g).to(dtype), "b": torch.randn(4, generator=g).to(
        dtype)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_offloaded_round_trip_is_bit_exact_and_keeps_keys_and_shapes(tmp_path, dtype):
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(dtype)
    store.park("z", v)
    folder = [d for d in os.listdir(tmp_path) if d.startswith(".offload-")]
    assert len(folder) == 1 and os.listdir(tmp_path / folder[0]) == ["z.bin"]
    out = store.fetch("z")
    assert list(out) == list(v)
    for k in v:
        assert out[k].dtype == dtype and out[k].shape == v[k].shape and torch.equal(out[k], v[k])
    assert torch.equal(store.fetch("z")["w"], v["w"])  # fetching does not consume
    for k in v:  # one entry alone, the same bits
        assert torch.equal(store.fetch_entry("z", k), v[k]) and store.fetch_entry("z",
                                                                                  k).dtype == dtype
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
    assert store.fetch("p")["w"] is v["w"] and store.fetch_entry("p", "b") is v["b"]
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


def test_offloaded_keeps_strided_empty_and_shrinking_vectors(tmp_path):
    store = Offloaded("cpu", str(tmp_path))
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    v = {"t": base.t(), "e": torch.empty(0, 3), "s": torch.tensor(2.5, dtype=torch.float64)}
    store.park("v", v)
    out = store.fetch("v")
    assert all(out[k].shape == v[k].shape and out[k].dtype == v[k].dtype and torch.equal(out[k], v[
        k]) for k in v)
    del out  # no map of the file is alive: parking again overwrites it in place
    # a smaller vector under the same name: the file shrinks with it
    store.park("v", {"t": base[:1]})
    (folder,) = os.listdir(tmp_path)
    assert os.path.getsize(tmp_path / folder / "v.bin") == 6 * 4
    assert list(store.fetch("v")) == ["t"] and torch.equal(store.fetch("v")["t"], base[:1])
    store.close()


def test_the_default_policy_follows_the_model_size_not_the_free_memory():
    """Offload once the carried vectors reach OFFLOAD_MIN_BYTES, however much memory is free; a
    smaller model only under memory pressure (its estimated footprint above half of what is
    available)."""
    at = -(-OFFLOAD_MIN_BYTES // (CARRIED_VECTORS * 4))  # the smallest float32 model that offloads
    plenty = 1 << 50
    assert should_offload(at, 4, "cpu", available=plenty) is True
    assert should_offload(at - 1, 4, "cpu", available=plenty) is False
    # bytes count, not parameters
    assert should_offload((at + 1) // 2, 8, "cpu", available=plenty) is True
    assert should_offload(100_000_000, 4, "cpu", available=plenty) is True
    small = 100_000
    need = (CARRIED_VECTORS + PEAK_VECTORS) * small * 4
    assert should_offload(small, 4, "cpu", available=4 * need) is False
    assert should_offload(small, 4, "cpu", available=need) is True
    assert should_offload(10, 8, "cpu") is False  # a tiny model on this machine
    # the models of the built-in presets: the 0.8M-parameter MLP and ResNet-18 at widths 16-64
    # offload
    assert should_offload(782_186, 4, "cpu", available=plenty) and should_offload(787_258, 4, "cpu",
                                                                                  available=plenty)


def test_a_fetched_vector_is_a_private_map_that_parking_again_does_not_change(tmp_path):
    """A fetched vector updated in place leaves the parked one as it was; parking its name again
    while it is alive writes another file and leaves the fetched vector as it was; a name alternates
    between its files (a third only while maps of both are alive)."""
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(torch.float32)
    store.park("z", v)
    out = store.fetch("z")
    out["w"].mul_(3.0)  # in place on the map: the file is not written
    assert torch.equal(store.fetch("z")["w"], v["w"])
    store.park("z", {k: t + 1 for k, t in v.items()})  # `out` is alive: a new file
    assert torch.equal(out["w"], v["w"] * 3.0) and torch.equal(out["b"], v["b"])
    assert torch.equal(store.fetch("z")["b"], v["b"] + 1)
    (folder,) = os.listdir(tmp_path)
    assert sorted(os.listdir(tmp_path / folder)) == ["z.1.bin", "z.bin"]
    second = store.fetch("z")  # a map of z.1.bin, beside `out` (z.bin): both files are read
    store.park("z", {k: t + 2 for k, t in v.items()})
    assert sorted(os.listdir(tmp_path / folder)) == ["z.1.bin", "z.2.bin", "z.bin"]
    assert torch.equal(second["b"], v["b"] + 1) and torch.equal(store.fetch("z")["b"], v["b"] + 2)
    # z.1.bin is free again: the next park while z.2.bin is mapped writes it, no fourth file
    del second
    third = store.fetch("z")
    store.park("z", {k: t + 3 for k, t in v.items()})
    assert sorted(os.listdir(tmp_path / folder)) == ["z.1.bin", "z.2.bin", "z.bin"]
    assert torch.equal(third["b"], v["b"] + 2) and torch.equal(store.fetch("z")["b"], v["b"] + 3)
    store.close()
    assert torch.equal(out["b"], v["b"])  # the maps outlive the folder
    assert torch.equal(third["b"], v["b"] + 2)


def test_a_shared_vector_is_read_from_the_same_file_until_either_name_is_parked_anew(tmp_path):
    """``share`` writes nothing; parking the first name again writes another file (the shared one is
    kept for the second name), parking the second name gives it its own file, and ``None`` ends the
    sharing."""
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(torch.float32)
    store.park("theta", v)
    (folder,) = os.listdir(tmp_path)
    store.share("theta", "kept")
    assert os.listdir(tmp_path / folder) == ["theta.bin"] and store.file_of(
        "kept") == store.file_of("theta")
    assert store.holds("kept") and torch.equal(store.fetch("kept")["w"], v["w"])
    assert torch.equal(store.fetch_entry("kept", "b"), v["b"])
    # "kept" reads theta.bin: another file for theta
    store.park("theta", {k: t + 1 for k, t in v.items()})
    assert sorted(os.listdir(tmp_path / folder)) == ["theta.1.bin", "theta.bin"]
    assert torch.equal(store.fetch("kept")["w"], v["w"]) and torch.equal(store.fetch("theta")["w"],
                                                                         v["w"] + 1)
    assert torch.equal(store.fetch("kept", writable=True)["b"], v["b"])
    store.share("theta", "kept")  # now theta.1.bin; theta.bin is free again
    store.park("theta", {k: t + 2 for k, t in v.items()})
    assert sorted(os.listdir(tmp_path / folder)) == ["theta.1.bin", "theta.bin"]
    assert torch.equal(store.fetch("kept")["b"], v["b"] + 1) and torch.equal(store.fetch("theta")[
        "b"], v["b"] + 2)
    store.park("kept", {k: t * 5 for k, t in v.items()})  # its own file now
    assert store.file_of("kept") != store.file_of("theta") and torch.equal(store.fetch("kept")[
        "w"], v["w"] * 5)
    store.park("kept", None)
    assert not store.holds("kept") and torch.equal(store.fetch("theta")["w"], v["w"] + 2)
    store.share("kept", "other")  # sharing nothing parks nothing
    assert not store.holds("other")
    store.close()


def test_a_resident_store_shares_the_same_tensors():
    v = _vec(torch.float64)
    store = Resident()
    store.park("theta", v)
    store.share("theta", "kept")
    store.park("theta", {k: t + 1 for k, t in v.items()})
    assert store.fetch("kept")["w"] is v["w"] and torch.equal(store.fetch("theta")["w"], v["w"] + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_writable_fetches_and_entries_are_read_into_memory_of_their_own(tmp_path, dtype):
    """``fetch(name, writable=True)`` and ``fetch_entry`` give the parked bytes in new tensors: an
    update in place changes neither the parked vector nor the file, and parking the name again
    reuses its file."""
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(dtype)
    v["empty"] = torch.zeros(0, 3, dtype=dtype)
    store.park("z", v)
    out = store.fetch("z", writable=True)
    assert list(out) == list(v) and all(torch.equal(out[k], v[k]) and out[k].dtype == dtype
                                        for k in v)
    assert all(torch.equal(store.fetch_entry("z", k), v[k]) for k in v)
    out["w"].mul_(3.0)
    assert torch.equal(store.fetch("z")["w"], v["w"])
    store.park("z", out)  # no map of the old file is alive: overwritten in place
    (folder,) = os.listdir(tmp_path)
    assert os.listdir(tmp_path / folder) == ["z.bin"]
    assert torch.equal(store.fetch_entry("z", "w"), v["w"] * 3.0)
    with open(tmp_path / folder / "z.bin", "r+b") as fh:  # a file cut short is an error, not zeros
        fh.truncate(8)
    with pytest.raises(OSError, match="truncated"):
        store.fetch_entry("z", "w")
    store.close()


def test_a_vector_read_entry_by_entry_opens_its_file_once(tmp_path, monkeypatch):
    """Entry reads share one descriptor per file (closed with the store); the bytes are the parked
    ones."""
    store = Offloaded("cpu", str(tmp_path))
    v = _vec(torch.float32)
    store.park("g", v)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a: opened.append(path) or real_open(path, *a))
    for _ in range(3):
        for k in v:
            assert torch.equal(store.fetch_entry("g", k), v[k])
    assert len(opened) == 1
    # overwritten in place: the descriptor reads the new bytes
    store.park("g", {k: t + 1 for k, t in v.items()})
    assert torch.equal(store.fetch_entry("g", "w"), v["w"] + 1)
    (fd,) = store._readers.values()
    store.close()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the store


def test_parking_writes_each_vector_in_few_calls_and_survives_short_writes(tmp_path, monkeypatch):
    """A vector's entries (padding included) go to its file in one ``pwritev`` per ``IOV_MAX``
    buffers, and a call that writes less than asked is continued where it stopped: the bytes read
    back are the parked ones."""
    import crosscurv.numeric.offload as offload

    g = torch.Generator().manual_seed(1)
    v = {"a": torch.randn(5, generator=g).to(torch.bfloat16), "b": torch.randn(3, 7, generator=g),
         "c": torch.randn(2, generator=g, dtype=torch.float64), "d": torch.randn(11, generator=g)[
         ::2]}
    calls = []
    real = os.pwritev

    def short(fd, buffers, offset):  # at most 13 bytes per call
        calls.append(len(buffers))
        head, left = [], 13
        for b in buffers:
            head.append(memoryview(b)[:left])
            left -= len(head[-1])
            if not left:
                break
        return real(fd, head, offset)

    store = Offloaded("cpu", str(tmp_path))
    monkeypatch.setattr(os, "pwritev", short)
    monkeypatch.setattr(offload, "_IOV_MAX", 2)
    store.park("v", v)
    assert max(calls) <= 2 and len(calls) >= sum(t.numel() * t.element_size()
                                                 for t in v.values()) // 13
    monkeypatch.setattr(os, "pwritev", real)
    monkeypatch.setattr(offload, "_IOV_MAX", 1024)
    calls.clear()
    store.park("w", v)
    out = store.fetch("v")
    for k in v:
        assert torch.equal(out[k], v[k]) and torch.equal(store.fetch("w")[k], v[k])
    store.close()


def test_parking_a_whole_vector_is_one_system_call(tmp_path, monkeypatch):
    store = Offloaded("cpu", str(tmp_path))
    v = {f"t{i}": torch.full((i + 1,), float(i)) for i in range(40)}
    calls = []
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", lambda fd, bufs, off: calls.append(len(bufs)) or real(fd,
        bufs, off))
    monkeypatch.setattr(os, "pwrite", lambda *a: pytest.fail("one pwrite per entry"))
    store.park("v", v)
    assert calls == [40]
    assert all(torch.equal(store.fetch_entry("v", k), t) for k, t in v.items())
    store.close()
