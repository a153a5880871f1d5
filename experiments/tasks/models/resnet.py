"""CIFAR ResNet-18 split into personal and shared parts (paper, Sec. 5 and App. E.2).

``f(x; u, v_i) = f_shared,u(f_personal,v_i(x))`` in plain ``torch.nn``: personal ``v_i`` = a 3x3
stride-1 stem (``w`` channels), stage 1 (``w``) and stage 2 (``2w``, stride 2); shared ``u`` =
stages 3 (``4w``) and 4 (``8w``), global average pooling and the 10-class linear layer (``w = 64``:
ResNet-18). BatchNorm in eval mode with fixed running statistics (mean 0, variance 1), so each is
the affine map ``gamma * x / sqrt(1 + eps) + beta``. PyTorch's default initialisation, drawn through
:func:`crosscurv.numeric.portable_random.portable_default_init_` (the same bits on every CPU).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

from crosscurv.numeric.portable_random import portable_default_init_

__all__ = ["BasicBlock", "PersonalNet", "SharedNet", "FederatedResNet18"]


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv+BN with a (1x1 conv+BN when shapes change) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv3x3(cin, cout, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = _conv3x3(cout, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def _stage(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))


class Stem(nn.Module):
    """3x3 stride-1 convolution, BatchNorm, ReLU (no max-pool: CIFAR resolution)."""

    def __init__(self, width: int):
        super().__init__()
        self.conv = _conv3x3(3, width)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class PersonalNet(nn.Module):
    """``f_personal``: stem, stage 1, stage 2; ``(n, 3, 32, 32) -> (n, 2w, 16, 16)``."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = Stem(width)
        self.layer1 = _stage(width, width, 1)
        self.layer2 = _stage(width, 2 * width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer2(self.layer1(self.stem(x)))


class SharedNet(nn.Module):
    """``f_shared``: stage 3, stage 4, global average pool, linear; ``(n, 2w, 16, 16) -> (n,
    classes)``."""

    def __init__(self, width: int = 64, num_classes: int = 10):
        super().__init__()
        self.layer3 = _stage(2 * width, 4 * width, 2)
        self.layer4 = _stage(4 * width, 8 * width, 2)
        self.fc = nn.Linear(8 * width, num_classes)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.layer4(self.layer3(h))
        # global average pool; vmap has a batching rule for mean (not for adaptive_avg_pool2d)
        return self.fc(h.mean(dim=(2, 3)))


class FederatedResNet18(nn.Module):
    """``M`` clients' personal nets ``client{i}`` plus one ``shared`` net.

    Parameter names: ``client{i}.stem...``, ``client{i}.layer1...``, ``client{i}.layer2...`` and
    ``shared.layer3...``, ``shared.layer4...``, ``shared.fc...``. All clients start from the *same*
    personal weights (copies of ``client0``), as in federated training from one global
    initialisation. ``forward(x, client)`` evaluates ``f(x; u, v_client)``. The module is put in
    eval mode (fixed BatchNorm statistics).
    """

    def __init__(self, n_clients: int = 3, width: int = 64, num_classes: int = 10):
        super().__init__()
        if n_clients < 1 or width < 1:
            raise ValueError(f"need n_clients >= 1 and width >= 1, got {n_clients}, {width}")
        self.n_clients = n_clients
        self.width = width
        state = torch.random.get_rng_state()
        first, shared = PersonalNet(width), SharedNet(width, num_classes)
        torch.random.set_rng_state(state)  # the same draws again, portable
        portable_default_init_(first)
        portable_default_init_(shared)
        for i in range(n_clients):
            self.add_module(f"client{i}", first if i == 0 else copy.deepcopy(first))
        self.shared = shared
        self.eval()

    def personal(self, i: int) -> PersonalNet:
        return getattr(self, f"client{i}")

    def forward(self, x: torch.Tensor, client: int = 0) -> torch.Tensor:
        """``f(x; u, v_client)`` for a ``(n, 3, 32, 32)`` batch, of any memory layout.

        The batch is made contiguous (NCHW) first: a channels-last float32 batch propagates its
        layout through every activation, and the backward of a strided 1x1 convolution on
        channels-last float32 tensors corrupts the heap or spins in PyTorch 2.13's CPU (oneDNN)
        kernel (tests/experiments/test_models.py keeps the reproduction).
        """
        return self.shared(self.personal(client)(x.contiguous()))
