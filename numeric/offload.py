"""Where the protocol parks parameter-sized vectors between their uses.

* :class:`Resident`: keeps everything where it is.
* :class:`Offloaded`: a parked vector goes to host memory (GPU runs) or to a file of its raw bytes
  in a private temporary folder (CPU runs, lossless), fetched back when used.

Both: ``park(name, vector)``, ``fetch(name, writable=False)`` (keyed and shaped as parked, on the
compute device; ``writable`` where the caller updates it in place), ``fetch_entry(name, key)``,
``share(name, other)`` (no copy), ``holds(name)`` and ``close()``.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import weakref
from typing import Mapping

import torch

__all__ = ["Resident", "Offloaded", "make_store", "remove_stale", "PREFIX", "available_memory",
           "should_offload", "CARRIED_VECTORS", "PEAK_VECTORS", "OFFLOAD_MIN_BYTES", "large_model"]

#: Name prefix of the folders of parked vectors (inside a run folder).
PREFIX = ".offload-"


def remove_stale(directory: str) -> None:
    """Remove folders of parked vectors left in ``directory`` by a killed run (nothing else)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith(PREFIX) and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)


class Resident:
    """Parked vectors stay in memory where they are."""

    offloaded = False

    def __init__(self):
        self._items: dict[str, dict | None] = {}

    def park(self, name: str, vector: Mapping | None) -> None:
        self._items[name] = None if vector is None else dict(vector)

    def fetch(self, name: str, writable: bool = False) -> dict | None:
        return self._items[name]

    def fetch_entry(self, name: str, key: str):
        """Entry ``key`` of the vector parked under ``name``."""
        return self._items[name][key]

    def share(self, name: str, other: str) -> None:
        """Park under ``other`` the vector parked under ``name`` (the same tensors: no copy)."""
        self._items[other] = self._items[name]

    def holds(self, name: str) -> bool:
        """A vector (not ``None``) is parked under ``name``."""
        return self._items.get(name) is not None

    def close(self) -> None:
        self._items.clear()


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a CPU tensor as a flat ``uint8`` tensor sharing its memory (a contiguous copy if
    needed)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


#: At most this many buffers per ``pwritev`` call (the system's ``IOV_MAX``).
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os,
    "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16


def _write_all(fd: int, buffers: list) -> None:
    """Write ``buffers`` (bytes-like objects) one after the other from offset 0 of the file ``fd``:
    one ``pwritev`` call per :data:`_IOV_MAX` buffers, continued where the system wrote less than
    asked.
    """
    views = [memoryview(b).cast("B") for b in buffers if len(b)]
    pos, i = 0, 0
    while i < len(views):
        batch = views[i:i + _IOV_MAX]
        n = os.pwritev(fd, batch, pos)
        if n <= 0:
            raise OSError(f"could not write a parked vector (pwritev returned {n})")
        pos += n
        # skip the buffers written whole; keep the rest of a buffer written in part
        for view in batch:
            if n >= len(view):
                n -= len(view)
                i += 1
            else:
                views[i] = view[n:]
                break


class Offloaded:
    """Parked vectors live in host memory (GPU runs) or in files (CPU runs).

    On the CPU a fetched vector is a private memory map of its file (an in-place update never
    reaches the file); a writable or entry fetch reads the file into new tensors. Parking overwrites
    the name's file in place unless a live map reads it or another name shares it; then it
    alternates to another file of the name. ``directory`` is the parent of the private folder
    (default: the system's temporary folder), removed by :meth:`close`.
    """

    offloaded = True

    def __init__(self, device, directory: str | None = None):
        self.device = torch.device(device)
        self._host: dict[str, dict | None] = {}
        self._dir = None
        self._gen: dict[str, int] = {}  # which of its files 0, 1, ... holds a name
        # how many files a name has (another while a fetched map reads one)
        self._files: dict[str, int] = {}
        # file -> weak references to the storages of its fetched maps
        self._mapped: dict[str, list] = {}
        # file -> descriptor open for entry reads (closed with the file)
        self._readers: dict[str, int] = {}
        self._shared: dict[str, str] = {}  # name -> the file of another name it shares (share())
        if self.device.type == "cpu":
            if directory is not None:
                remove_stale(directory)
            self._dir = tempfile.mkdtemp(prefix=PREFIX, dir=directory)

    def _path(self, name: str, gen: int | None = None) -> str:
        gen = self._gen.get(name, 0) if gen is None else gen
        return os.path.join(self._dir, f"{name}.bin" if gen == 0 else f"{name}.{gen}.bin")

    def _file(self, name: str) -> str:
        """The file holding the vector parked under ``name`` (its own, or the one it shares)."""
        return self._shared.get(name) or self._path(name)

    def _busy(self, path: str) -> bool:
        """Whether the file ``path`` must not be overwritten: a live map reads it or a name shares
        it.
        """
        return self._read_by_map(path) or path in self._shared.values()

    def _read_by_map(self, path: str) -> bool:
        """Whether a fetched map of the file ``path`` is still alive (it would see the file
        overwritten)."""
        refs = [ref for ref in self._mapped.pop(path, ()) if ref() is not None]
        if refs:
            self._mapped[path] = refs
        return bool(refs)

    def park(self, name: str, vector: Mapping | None) -> None:
        self._shared.pop(name, None)  # parked anew: no longer reads another name's file
        if vector is None:
            self._host[name] = None
            return
        if self._dir is None:  # GPU: to host memory
            self._host[name] = {k: v.to("cpu") for k, v in vector.items()}
            return
        # CPU: the raw bytes of each tensor, one after the other (each at a multiple of its element
        # size), in one file; keys, shapes, dtypes and offsets stay in memory. Lossless (the bytes
        # themselves). The file is overwritten in place: truncating it first, or torch.save, costs
        # 5-10x more (freeing and refilling the page cache). another file of the name, one that no
        # live map or other name reads
        if self._busy(self._path(name)):
            n = self._files.get(name, 1)
            self._gen[name] = next((g for g in range(n) if not self._busy(self._path(name, g))), n)
            self._files[name] = max(n, self._gen[name] + 1)
        layout, buffers, size = {}, [], 0
        for k, v in vector.items():
            pad = -size % v.element_size()
            if pad:
                buffers.append(bytes(pad))
                size += pad
            layout[k] = (tuple(v.shape), v.dtype, size)
            if v.numel():
                buffers.append(_bytes(v.detach()).numpy())
                size += v.numel() * v.element_size()
        fd = os.open(self._path(name), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _write_all(fd, buffers)
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
        finally:
            os.close(fd)
        self._host[name] = layout

    def holds(self, name: str) -> bool:
        """A vector (not ``None``) is parked under ``name``."""
        return self._host.get(name) is not None

    def share(self, name: str, other: str) -> None:
        """Park under ``other`` the vector parked under ``name`` without copying it (its file is not
        overwritten while shared).
        """
        self._shared.pop(other, None)
        self._host[other] = self._host[name]
        if self._dir is not None and self._host[name] is not None:
            self._shared[other] = self._file(name)

    def file_of(self, name: str) -> str | None:
        """The file holding the vector parked under ``name``; ``None`` when it is not in a file or
        nothing is parked.
        """
        return None if self._dir is None or not self.holds(name) else self._file(name)

    def fetch(self, name: str, writable: bool = False) -> dict | None:
        """The vector parked under ``name``: on the CPU a private map of its file, or with
        ``writable`` its bytes read into new tensors.
        """
        layout = self._host[name]
        if layout is None:
            return None
        if self._dir is None:
            return {k: v.to(self.device) for k, v in layout.items()}
        if writable:
            return self._read_entries(name, layout, layout)
        return self._map(name, layout)

    def fetch_entry(self, name: str, key: str):
        """Entry ``key`` of the vector parked under ``name`` (on the CPU read into a new tensor).
        """
        layout = self._host[name]
        if self._dir is None:
            return layout[key].to(self.device)
        path = self._file(name)
        fd = self._readers.get(path)
        # one descriptor per file for its entry reads: a vector read entry by entry opens it once
        if fd is None:
            fd = self._readers[path] = os.open(path, os.O_RDONLY)
        return self._read_entries(name, layout, (key,), fd)[key]

    def _read_entries(self, name: str, layout: Mapping, keys, fd: int | None = None) -> dict:
        """The entries ``keys`` of ``name``'s file read into new tensors (through ``fd`` when
        given).
        """
        out = {}
        own = fd is None
        if own:
            fd = os.open(self._file(name), os.O_RDONLY)
        try:
            for k in keys:
                shape, dtype, offset = layout[k]
                t = torch.empty(shape, dtype=dtype)
                if t.numel():
                    view = memoryview(t.view(-1).view(torch.uint8).numpy())
                    pos = offset
                    while len(view):
                        n = os.preadv(fd, [view], pos)
                        if n <= 0:
                            raise OSError(f"parked vector {name!r} is truncated")
                        view, pos = view[n:], pos + n
                out[k] = t
        finally:
            if own:
                os.close(fd)
        return out

    def _map(self, name: str, layout: Mapping) -> dict:
        """The vector in ``name``'s file, as tensors of one private map of it."""
        size = max((off + math.prod(shape) * dtype.itemsize for shape, dtype,
                    off in layout.values()), default=0)
        if size == 0:
            return {k: torch.empty(shape, dtype=dtype) for k, (shape, dtype, _) in layout.items()}
        path = self._file(name)
        if os.path.getsize(path) < size:
            raise OSError(f"parked vector {name!r} is truncated")
        storage = torch.UntypedStorage.from_file(path, shared=False, nbytes=size)
        self._mapped[path] = [ref for ref in self._mapped.get(path, ()) if ref() is not None] + [
            weakref.ref(storage)]
        out = {}
        for k, (shape, dtype, offset) in layout.items():
            t = torch.empty(0, dtype=dtype)
            out[k] = t.set_(storage, offset // t.element_size(), shape) if math.prod(
                shape) else torch.empty(shape, dtype=dtype)
        return out

    def close(self) -> None:
        self._host.clear()
        self._shared.clear()
        self._mapped.clear()
        while self._readers:
            os.close(self._readers.popitem()[1])
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


#: Parameter-sized vectors the protocol carries between iterations (theta_JC, theta_S, z, y, w, p,
#: M_S g_JC).
CARRIED_VECTORS = 7
#: Parameter-sized temporaries beside them at the peak (gradient, a product, a step, a difference),
#: and the retained graph counted as about as many again (benchmarks/bench_memory.py measures the
#: real peak).
PEAK_VECTORS = 8
#: Offload by default once the carried vectors hold this many bytes (about 600,000 float32
#: parameters). One gradient step needs the activations and two parameter-sized vectors, so the
#: carried vectors alone are 3.5 gradient steps for a model whose activations are small against its
#: parameters (the MLP, ResNet-18 at widths 16-64 on 20 images: benchmarks/bench_memory.py): a fixed
#: ratio to the gradient step can only be kept by parking them. Below this size the carried vectors
#: are a few MiB, less than the interpreter's own noise, and parking them would cost time for
#: nothing.
OFFLOAD_MIN_BYTES = 16 * 2 ** 20


def available_memory(device) -> int | None:
    """Bytes the compute device can still give (free GPU memory or the host's ``MemAvailable``);
    ``None`` where it cannot be read.
    """
    device = torch.device(device)
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        with open("/proc/meminfo", "r", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except Exception:  # no such file, no driver: unknown
        return None
    return None


def large_model(n_params: int, element_size: int) -> bool:
    """Whether the carried vectors, ``CARRIED_VECTORS * n_params * element_size`` bytes, reach
    :data:`OFFLOAD_MIN_BYTES`: then vectors and the eigenpair basis are parked by default.
    """
    return CARRIED_VECTORS * n_params * element_size >= OFFLOAD_MIN_BYTES


def should_offload(n_params: int, element_size: int, device, available: int | None = None) -> bool:
    """The default offload policy: :func:`large_model`, or for a smaller model its
    footprint, ``(CARRIED_VECTORS + PEAK_VECTORS)`` parameter-sized vectors, above half of
    :func:`available_memory` (``available`` overrides that reading).
    """
    if large_model(n_params, element_size):
        return True
    free = available_memory(device) if available is None else available
    if free is None:
        return False
    return (CARRIED_VECTORS + PEAK_VECTORS) * n_params * element_size > free // 2


def make_store(offload: bool, device, directory: str | None = None):
    """:class:`Offloaded` when ``offload`` else :class:`Resident`."""
    return Offloaded(device, directory) if offload else Resident()
