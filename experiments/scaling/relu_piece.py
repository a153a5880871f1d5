"""The smooth piece of a ReLU MLP's loss that contains ``theta^0``.

With the constant masks ``m_l = [z_l(theta^0) > 0]`` of the hidden pre-activations,

    L_piece(theta) = CE(W_N h_{N-1} + b_N, y),  h_l = m_l * (W_l h_{l-1} + b_l),  h_0 = x

equals the network's loss up to the kink radius
(:func:`crosscurv.experiments.problems.relu_kink_radius`) and is C^infinity everywhere, with the
network's ``g``, ``H``, ``T`` at ``theta^0`` (so its ``C_S`` and ``c3``): its expansion can be
observed at step sizes far above the kink radius.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from crosscurv.numeric.task import Task

from ..problems import Problem

__all__ = ["relu_piece"]


def _masks(params: dict, x: torch.Tensor, n_layers: int) -> list:
    """``[m_1, ..., m_{N-1}]``: ``m_l = [z_l > 0]`` at ``params`` (``(n, d_l)``, the dtype of
    ``x``).
    """
    h, out = x, []
    with torch.no_grad():
        for l in range(1, n_layers):
            z = F.linear(h, params[f"layer{l}.weight"], params[f"layer{l}.bias"])
            out.append((z > 0).to(z.dtype))
            h = torch.relu(z)
    return out


def relu_piece(problem: Problem) -> Problem:
    """The MNIST MLP ``problem`` with every hidden ReLU frozen to its activation pattern at
    ``theta^0``.

    Same parameters, blocks, data and curvature scale (its derivatives at ``theta^0`` are the
    network's: module docstring); ``task.name`` ``"mnist_mlp_piece"``. The labels are read again
    with :func:`crosscurv.experiments.tasks.data.load_mnist` (the problem keeps only its inputs),
    and checked to give the network's loss at ``theta^0`` to rounding.
    """
    from crosscurv.experiments.tasks.data import load_mnist

    task = problem.task
    x, n_layers = problem.extras["x"], problem.extras["n_layers"]
    data = load_mnist(int(problem.info["examples"]), dtype=x.dtype, device=x.device)
    if not torch.equal(data.x, x):
        raise RuntimeError("relu_piece: the MNIST examples read again differ from the problem's")
    y = data.y
    masks = _masks(task.params, x, n_layers)

    def loss(p: dict) -> torch.Tensor:
        """Softmax cross-entropy of the MLP whose hidden units are ``m_l * z_l`` (masks of
        ``theta^0``)."""
        h = x
        for l in range(1, n_layers):
            h = masks[l - 1] * F.linear(h, p[f"layer{l}.weight"], p[f"layer{l}.bias"])
        return F.cross_entropy(F.linear(h, p[f"layer{n_layers}.weight"], p[
            f"layer{n_layers}.bias"]), y)

    at0, net0 = float(loss(task.params)), float(task.loss(task.params))
    if abs(at0 - net0) > 64 * torch.finfo(x.dtype).eps * abs(net0):
        raise RuntimeError(
            f"relu_piece: loss {at0!r} at theta0 differs from the network's {net0!r}")
    info = dict(problem.info, family="mnist_mlp_piece")
    piece = Task(task.params, loss, task.blocks, "mnist_mlp_piece", info, task.default_pattern)
    return Problem(piece, "mnist_mlp", problem.scale, None, info, dict(problem.extras, masks=masks))
