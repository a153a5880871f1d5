"""``torch.save`` whose large storages are copied file to file, never read into memory.

A checkpoint of an offloaded run holds vectors whose bytes already sit in files.
:func:`save_from_files` writes the archive ``torch.save`` writes (same records, same order) in two
passes: ``torch.save``'s own writer lays it out, reserving the bytes of each storage that
``sources(storage)`` places in a file; then each reserved record is filled from its file by
:func:`os.copy_file_range` at the offset the archive's reader reports.  It rests on
``torch.serialization._save`` and ``write_record_metadata`` of the pinned torch.
"""

from __future__ import annotations

import os
import pickle
from typing import Callable

import torch

__all__ = ["save_from_files", "file_offsets", "mapped_sources"]

#: ``sources(storage) -> (path, offset)`` of a file holding the storage's bytes, or ``None``.
Sources = Callable[[torch.UntypedStorage], "tuple[str, int] | None"]

_CHUNK = 1 << 26  # at most 64 MiB per copy_file_range call


class _Reserving:
    """The archive writer, reserving (not writing) each storage record that ``sources`` can fill."""

    def __init__(self, inner, sources: Sources, pending: list):
        self._inner, self._sources, self._pending = inner, sources, pending

    def write_record(self, name, data, nbytes):
        src = self._sources(data) if isinstance(data, torch.UntypedStorage) and nbytes else None
        if src is None:
            self._inner.write_record(name, data, nbytes)
        else:
            self._inner.write_record_metadata(name, nbytes)
            self._pending.append((name, src, nbytes))

    def __getattr__(self, attr):
        return getattr(self._inner, attr)


def _copy(src_path: str, src_offset: int, dst_fd: int, dst_offset: int, nbytes: int) -> None:
    with open(src_path, "rb") as src:
        if os.fstat(src.fileno()).st_size < src_offset + nbytes:
            raise OSError(f"{src_path} holds fewer than {src_offset + nbytes} bytes")
        done = 0
        while done < nbytes:
            n = os.copy_file_range(src.fileno(), dst_fd, min(_CHUNK, nbytes - done), src_offset
                                   + done,
                                   dst_offset + done)
            if n <= 0:
                raise OSError(f"copying {src_path} stopped after {done} of {nbytes} bytes")
            done += n


def save_from_files(obj, path: str, sources: Sources) -> None:
    """``torch.save(obj, path)``, each storage that ``sources(storage) -> (path, offset)`` places in
    a file copied from there (``None``: written from memory).
    """
    from torch import serialization as ser

    pending: list = []
    with ser._open_zipfile_writer(path) as archive:
        ser._save(obj, _Reserving(archive, sources, pending), pickle, ser.DEFAULT_PROTOCOL, False)
    if not pending:
        return
    offsets = file_offsets(path, [name for name, _, _ in pending])
    fd = os.open(path, os.O_RDWR)
    try:
        for name, (src_path, src_offset), nbytes in pending:
            _copy(src_path, src_offset, fd, offsets[name], nbytes)
    finally:
        os.close(fd)


def file_offsets(path: str, names) -> dict:
    """``{record name: byte offset of its data in the archive at path}`` (names as ``torch.save``
    writes them, ``"data/0"``...)."""
    reader = torch._C.PyTorchFileReader(path)
    return {name: reader.get_record_offset(name) for name in names}


def _storages(obj, out: dict) -> dict:
    """``{data_ptr: storage}`` of every non-empty tensor storage inside dicts, lists and tuples of
    ``obj``."""
    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        if st.nbytes():
            out[st.data_ptr()] = st
    elif isinstance(obj, dict):
        for v in obj.values():
            _storages(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _storages(v, out)
    return out


def _head(storage: torch.UntypedStorage, n: int = 64) -> bytes:
    """The first ``n`` bytes of ``storage`` (one page of a map read)."""
    t = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (min(n, storage.nbytes()),))
    return t.numpy().tobytes()


def mapped_sources(obj, path: str) -> Sources | None:
    """For ``obj = torch.load(path, mmap=True)``: the :data:`Sources` placing each of its storages
    at its bytes in ``path`` (a storage's offset is its address minus the map's, checked against the
    file's bytes); ``None`` when its storages are not one memory map of ``path``'s records.
    """
    reader = torch._C.PyTorchFileReader(path)
    records = [n for n in reader.get_all_records() if n.startswith("data/")]
    offsets = sorted({reader.get_record_offset(n) for n in records})
    stores = _storages(obj, {})  # the non-empty ones: an empty record has no bytes to copy
    if not stores or len(stores) > len(offsets):
        return None
    first = min(stores)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        # the lowest storage sits at one of the records: the one that places each on
        for off in offsets:
            found = {ptr: ptr - first + off for ptr in stores}  # a record holding its bytes
            if set(found.values()) <= set(offsets) and all(
                    found[ptr] + st.nbytes() <= size and _head(st) == os.pread(fh.fileno(), len(
                    _head(st)), found[ptr])
                    for ptr, st in stores.items()):
                break
        else:
            return None

    def sources(storage):
        off = found.get(storage.data_ptr()) if storage.nbytes() else None
        return None if off is None else (path, off)

    return sources
