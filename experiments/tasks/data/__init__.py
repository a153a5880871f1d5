"""Offline data loaders (package data or a local user path; never the network).

Each loader returns its examples plus a ``source`` line that reports print.
"""

from ._types import ImageData, TextData
from .cifar import CIFAR10_MEAN, CIFAR10_STD, load_cifar10
from .mnist import load_mnist
from .sst2 import LABEL_WORDS, load_sst2

__all__ = [
    "ImageData",
    "TextData",
    "load_mnist",
    "load_cifar10",
    "load_sst2",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "LABEL_WORDS",
]
