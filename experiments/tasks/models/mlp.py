"""The layer-wise study's network (paper, Sec. 5 and App. E.1).

An ``N``-layer ReLU MLP ``z_l = W_l h_{l-1} + b_l``, ``h_l = relu(z_l)`` for ``l < N`` and softmax
cross-entropy on ``z_N``.  The paper's widths are ``784-512-384-256-192-128-64-32-10``.  Weights are
Xavier-normal (drawn in float64 and rounded,
:func:`crosscurv.numeric.portable_random.portable_normal_`: the same bits on every CPU), biases
zero.  Layer ``l`` is the module ``layer{l}`` (1-based, like the paper), so its parameters are
``layer{l}.weight`` (``d_l x d_{l-1}``) and ``layer{l}.bias`` (``d_l``), and block ``l`` is
``theta_l = (W_l, b_l)``.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from crosscurv.numeric.portable_random import portable_normal_

__all__ = ["MLP", "PAPER_WIDTHS", "mlp_blocks", "mlp_stages"]

PAPER_WIDTHS = (784, 512, 384, 256, 192, 128, 64, 32, 10)


class MLP(nn.Module):
    """ReLU MLP with widths ``(d_0, ..., d_N)``; ``forward(x: (n, d_0)) -> logits (n, d_N)``.

    Initialisation draws from the *global* torch RNG (callers seed it, e.g. in
    :func:`torch.random.fork_rng`): Xavier-normal weights (std ``sqrt(2 / (d_in + d_out))``, drawn
    in float64 and rounded to float32 so that every CPU draws the same weights), zero biases.
    """

    def __init__(self, widths: Sequence[int] = PAPER_WIDTHS):
        super().__init__()
        widths = tuple(int(w) for w in widths)
        if len(widths) < 2 or min(widths) < 1:
            raise ValueError(f"MLP widths must be >= 2 positive ints, got {widths}")
        self.widths = widths
        for l in range(1, len(widths)):
            lin = nn.Linear(widths[l - 1], widths[l])
            std = (2.0 / (widths[l - 1] + widths[l])) ** 0.5  # Xavier-normal, gain 1
            portable_normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)
            self.add_module(f"layer{l}", lin)

    @property
    def n_layers(self) -> int:
        return len(self.widths) - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for l in range(1, self.n_layers + 1):
            h = getattr(self, f"layer{l}")(h)
            if l < self.n_layers:
                h = F.relu(h)
        return h


def mlp_blocks(n_layers: int) -> dict:
    """The paper's partition: ``{"layer{l}": ["layer{l}.weight", "layer{l}.bias"]}``, input to
    output.
    """
    return {f"layer{l}": [f"layer{l}.weight", f"layer{l}.bias"] for l in range(1, n_layers + 1)}


def mlp_stages(n_layers: int) -> list:
    """Layer ``l`` with its ReLU as a stage ``(params, h_{l-1}) -> h_l`` of
    :class:`crosscurv.numeric.chain.Chain`.

    The same operations as :meth:`MLP.forward` (``nn.Linear`` is ``F.linear``), so the chain's loss
    equals the module's bit for bit.
    """

    def stage(l: int):
        w, b, last = f"layer{l}.weight", f"layer{l}.bias", l == n_layers

        def f(p, h):
            z = F.linear(h, p[w], p[b])
            return z if last else F.relu(z)
        return f

    return [stage(l) for l in range(1, n_layers + 1)]
