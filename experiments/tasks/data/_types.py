"""Containers returned by the loaders: the examples plus a ``source`` line for reports."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["ImageData", "TextData"]


@dataclass(frozen=True)
class ImageData:
    """Labelled images.

    Attributes:
        x: inputs, ``(n, ...)`` floating tensor (``(n, 784)`` for MNIST,
            ``(n, 3, 32, 32)`` for CIFAR-10).
        y: class labels, ``(n,)`` ``int64``.
        source: one line saying where the examples came from (printed in reports).
    """

    x: torch.Tensor
    y: torch.Tensor
    source: str

    def __len__(self) -> int:
        return int(self.y.shape[0])


@dataclass(frozen=True)
class TextData:
    """Labelled sentences for binary sentiment classification.

    Attributes:
        sentences: ``n`` strings.
        labels: ``n`` ints, ``0`` = negative, ``1`` = positive.
        source: one line saying where the examples came from.
    """

    sentences: tuple
    labels: tuple
    source: str

    def __len__(self) -> int:
        return len(self.labels)
