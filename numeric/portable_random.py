"""Random draws that are the same bits on every x86-64 CPU: normals drawn in float64, then cast.

PyTorch's float32 normal sampler takes another code path with AVX2 than without (the same seed,
other values), and ``uniform_(a, b)`` scales in float64 with AVX2 and in float32 without. Drawing
normals in float64 (scalar everywhere) and scaling uniforms in float64 gives one result everywhere
(AVX2's). Every initial parameter and random input of the built-in tasks, test problems and golden
cases is drawn here, so ``theta0_sha256`` means the same on every machine; :data:`INIT` names this
initializer in a task's description.
"""

from __future__ import annotations

import torch

__all__ = ["INIT", "portable_default_init_", "portable_normal_", "portable_randn",
           "portable_uniform_"]

#: the initializer's name and version, recorded by every built-in task
INIT = "float64-normal-v1"


def portable_randn(*shape, generator: torch.Generator | None = None, dtype=torch.float32,
                   device="cpu", mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """``mean + std * N(0, 1)`` of ``shape``: drawn on the CPU in float64 (``generator``, or the
    global CPU generator when ``None``), scaled in float64, then rounded once to ``dtype`` on
    ``device``.
    """
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    z = torch.randn(*shape, generator=generator, dtype=torch.float64)
    if std != 1.0:
        z = z * float(std)
    if mean != 0.0:
        z = z + float(mean)
    return z.to(device=device, dtype=dtype)


@torch.no_grad()
def portable_normal_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """In-place ``tensor ~ N(mean, std^2)`` like ``nn.init.normal_``, the same bits on every CPU
    (float64 draw, one rounding to ``tensor.dtype``); returns ``tensor``."""
    tensor.copy_(portable_randn(tuple(tensor.shape), generator=generator, dtype=tensor.dtype,
                                device=tensor.device, mean=mean, std=std))
    return tensor


@torch.no_grad()
def portable_uniform_(tensor: torch.Tensor, a: float, b: float,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """In-place ``tensor ~ U(a, b)`` like ``Tensor.uniform_(a, b)``, the same bits on every CPU: ``u
    = rand`` in ``tensor.dtype`` (the generator consumed as ``uniform_`` does), then ``u * (b - a) +
    a`` in float64, rounded once.
    """
    u = torch.rand(tuple(tensor.shape), generator=generator, dtype=tensor.dtype)
    lo = torch.tensor(float(a), dtype=tensor.dtype)
    width = torch.tensor(float(b), dtype=tensor.dtype) - lo
    wide = u.to(torch.float64) * width.to(torch.float64) + lo.to(torch.float64)
    tensor.copy_(wide.to(device=tensor.device, dtype=tensor.dtype))
    return tensor


@torch.no_grad()
def portable_default_init_(module: torch.nn.Module, generator: torch.Generator
                           | None = None) -> torch.nn.Module:
    """Redraw the ``nn.Linear`` and ``nn.Conv*`` layers of ``module`` as their ``reset_parameters``
    does (weights and biases ``U(+-1/sqrt(fan_in))``), in module order, weight then bias, with
    :func:`portable_uniform_`; other parameters are left as they are.
    """
    layers = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    for m in module.modules():
        if isinstance(m, layers):
            fan_in = m.weight[0].numel()
            # kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) times sqrt(3 / fan_in)
            bound = 1.0 / fan_in ** 0.5
            portable_uniform_(m.weight, -bound, bound, generator)
            if m.bias is not None:
                portable_uniform_(m.bias, -bound, bound, generator)
    return module
