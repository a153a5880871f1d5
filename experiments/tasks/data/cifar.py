"""CIFAR-10 examples for the federated (ResNet-18) study, read from local files only.

Default: the 20 labelled test images the ``foolbox`` distribution ships as
``foolbox/data/cifar10_NN_LABEL.png`` (32x32 RGB, read with PIL). Optional: a torchvision
``cifar-10-batches-py`` folder (pickled ``data_batch_1..5``: ``{b"data": uint8 (m, 3072), b"labels":
[m ints]}``, R, G, B planes row-major). Inputs are scaled to ``[0, 1]`` and normalised per channel
with mean ``(0.4914, 0.4822, 0.4465)``, std ``(0.2470, 0.2435, 0.2616)`` (App. E.2).
"""

from __future__ import annotations

import importlib.metadata as metadata
import pickle
import re
from pathlib import Path

import numpy as np
import torch

from crosscurv.experiments.tasks.errors import DataError

from ._pkgdata import subset_note as _subset
from ._pkgdata import balanced_indices, package_file, user_path
from ._types import ImageData

__all__ = ["load_cifar10", "CIFAR10_MEAN", "CIFAR10_STD", "bundled_cifar10_files"]

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
_PKG_RX = re.compile(r"^foolbox/data/cifar10_(\d\d)_(\d)\.png$")


def bundled_cifar10_files() -> list[tuple[Path, int]]:
    """``[(png path, label)]`` of foolbox's CIFAR-10 samples, in sample-number order."""
    try:
        files = metadata.distribution("foolbox").files or []
    except metadata.PackageNotFoundError:
        files = []
    found = []
    for f in files:
        m = _PKG_RX.match(str(f).replace("\\", "/"))
        if m:
            found.append((int(m.group(1)), str(f), int(m.group(2))))
    if not found:  # raises a clear DataError when the distribution is missing
        package_file("foolbox", "foolbox/data/cifar10_00_3.png")
        raise DataError("foolbox is installed but ships no cifar10_NN_LABEL.png files")
    return [(package_file("foolbox", rel), label) for _, rel, label in sorted(found)]


def _load_package() -> tuple[np.ndarray, np.ndarray, str]:
    from PIL import Image

    images, labels = [], []
    for path, label in bundled_cifar10_files():
        with Image.open(path) as im:
            arr = np.asarray(im.convert("RGB"), dtype=np.uint8)
        if arr.shape != (32, 32, 3):
            raise DataError(f"{path}: expected a 32x32 RGB image, got {arr.shape}")
        images.append(arr.transpose(2, 0, 1))
        labels.append(label)
    source = (f"foolbox package data ({len(images)} CIFAR-10 sample PNGs, "
              "foolbox/data/cifar10_NN_LABEL.png)")
    return np.stack(images), np.asarray(labels, dtype=np.int64), source


class _BatchUnpickler(pickle.Unpickler):
    """Unpickler that accepts only what a CIFAR-10 python batch contains (numpy arrays)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR-10 batch")
        return super().find_class(module, name)


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            d = _BatchUnpickler(f, encoding="bytes").load()
        data = np.asarray(d[b"data"] if b"data" in d else d["data"], dtype=np.uint8)
        labels = d[b"labels"] if b"labels" in d else d["labels"]
    except Exception as exc:  # malformed user file: one line
        raise DataError(
            f"{path} is not a CIFAR-10 python batch ({type(exc).__name__}: {exc})") from None
    if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != data.shape[0]:
        raise DataError(f"{path}: expected data (m, 3072) and m labels, got {data.shape}, "
                        f"{len(labels)}")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def _load_batches(folder: Path) -> tuple[np.ndarray, np.ndarray, str]:
    if not (folder / "data_batch_1").is_file() and (folder / "cifar-10-batches-py").is_dir():
        folder = folder / "cifar-10-batches-py"
    batches = [folder / f"data_batch_{i}" for i in range(1, 6) if (folder
                                                                   / f"data_batch_{i}").is_file()]
    if not batches:
        raise DataError(f"CIFAR-10 data path {folder}: no data_batch_1..5 (torchvision "
                        "cifar-10-batches-py layout)")
    parts = [_read_batch(b) for b in batches]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    return images, labels, f"local cifar-10-batches-py ({folder}, {len(batches)} training batches)"


def load_cifar10(n: int | None = None, *, path=None, dtype=torch.float32, device="cpu",
                 seed: int = 0) -> ImageData:
    """Fixed, normalised CIFAR-10 training examples.

    ``n``: ``None`` = all 20 bundled images (24 from a local folder: 3 clients x 8); ``path``: a
    ``cifar-10-batches-py`` folder (or its parent). Returns :class:`ImageData` with ``x`` ``(n, 3,
    32, 32)`` contiguous NCHW, normalised per channel, ``y`` ``(n,)`` int64 and ``source``. Bundled:
    ``seed = 0`` keeps the first ``n`` in file order, another seed a seeded order; a local folder:
    :func:`balanced_indices` over the 10 classes.
    """
    if path is None:
        images, labels, source = _load_package()
        n = len(labels) if n is None else n
        if not 1 <= n <= len(labels):
            raise DataError(f"the bundled CIFAR-10 source has {len(labels)} images, asked for {n} "
                            "(give a cifar-10-batches-py folder for more)")
        order = np.random.default_rng(seed).permutation(len(labels)) if seed else np.arange(len(
            labels))
        idx = [int(i) for i in order[:n]]
    else:
        images, labels, source = _load_batches(user_path(path, "CIFAR-10 data path"))
        n = 24 if n is None else n
        idx = balanced_indices(labels.tolist(), n, list(range(10)), seed)
    x = torch.as_tensor(images[idx].astype(np.float64) / 255.0)
    mean = torch.tensor(CIFAR10_MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD, dtype=torch.float64).view(1, 3, 1, 1)
    x = (x - mean) / std
    y = torch.as_tensor(labels[idx], dtype=torch.int64)
    # contiguous NCHW: the bundled PNGs are HWC arrays, and a channels-last float32 batch
    # reaching a strided 1x1 convolution's backward crashes PyTorch 2.13's CPU kernel
    x = x.to(device=device, dtype=dtype).contiguous()
    return ImageData(x, y.to(device=device).contiguous(), f"{source}; {n} "
        f"examples{_subset(seed)}, per-channel " "normalised")
