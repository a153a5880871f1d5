"""crosscurv.numeric.file_save: the archive torch.load reads as torch.save's, its parked bytes
copied file to file."""

import os

import pytest
import torch

from crosscurv.numeric.file_save import mapped_sources, save_from_files
from crosscurv.numeric.offload import Offloaded
from crosscurv.numeric.records import atomic_torch_save


def _vec(seed, n=1000):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(n, 7, generator=g), "b": torch.randn(13, generator=g),
            "e": torch.zeros(0, 3)}


def _same(a, b):
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


def _sources(store, vectors):
    files = {next(iter(v.values())).untyped_storage().data_ptr(): store.file_of(n) for n,
             v in vectors.items()}
    return lambda st: (files[st.data_ptr()], 0) if st.data_ptr() in files else None


def test_parked_vectors_are_copied_and_read_back(tmp_path):
    store = Offloaded("cpu", str(tmp_path))
    want = {"x": _vec(0), "y": _vec(1)}
    for n, v in want.items():
        store.park(n, v)
    vectors = {n: store.fetch(n) for n in want}
    obj = {"format": 2, "vectors": vectors, "estimates": {"q": torch.tensor(0.25)}, "k": 3}
    path = str(tmp_path / "ck.pt")
    atomic_torch_save(obj, path, sources=_sources(store, vectors))
    for mmap in (False, True):
        back = torch.load(path, weights_only=True, mmap=mmap)
        assert back["k"] == 3 and float(back["estimates"]["q"]) == 0.25
        assert all(_same(back["vectors"][n], want[n]) for n in want)
    store.close()


def test_a_mapped_checkpoint_saved_again_keeps_its_tensors(tmp_path):
    path, again = str(tmp_path / "a.pt"), str(tmp_path / "b.pt")
    obj = {"vectors": {"x": _vec(2), "y": _vec(3, 10)}, "extra": [torch.ones(2)], "done": False}
    torch.save(obj, path)
    ck = torch.load(path, weights_only=True, mmap=True)
    sources = mapped_sources(ck, path)
    assert sources is not None
    ck["done"] = True
    save_from_files(ck, again, sources)
    back = torch.load(again, weights_only=True)
    assert back["done"] is True and torch.equal(back["extra"][0], obj["extra"][0])
    assert all(_same(back["vectors"][n], obj["vectors"][n]) for n in obj["vectors"])
    # an object that is not the map of that file gets no sources (it is saved as usual)
    assert mapped_sources({"vectors": {"x": _vec(2)}}, path) is None


def _peak_kib(fn) -> int:
    def kb(field):
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))
    base = kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    fn()
    return kb("VmHWM") - base


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK),
                    reason="needs Linux /proc/self/clear_refs")
def test_a_parked_vector_is_saved_without_entering_memory(tmp_path):
    """64 MiB parked: torch.save reads all of it through its map, the file-to-file save none of it.
    """
    store = Offloaded("cpu", str(tmp_path))
    store.park("x", {"w": torch.ones(16 * 2 ** 20)})
    path = str(tmp_path / "ck.pt")

    def save(streamed):
        vectors = {"x": store.fetch("x")}
        atomic_torch_save({"vectors": vectors}, path, sources=_sources(store, vectors) if streamed
                          else None)

    plain, streamed = _peak_kib(lambda: save(False)), _peak_kib(lambda: save(True))
    assert plain > 48 * 1024 and streamed < 16 * 1024, (plain, streamed)
    assert torch.equal(torch.load(path, weights_only=True)["vectors"]["x"]["w"], torch.ones(16
        * 2 ** 20))
    store.close()
