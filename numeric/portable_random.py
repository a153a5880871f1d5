"""Random draws that are the same bits on every x86-64 CPU: normals drawn in float64, then cast.

PyTorch's float32 normal sampler (``torch.randn``, ``Tensor.normal_``, ``nn.init.xavier_normal_``,
``trunc_normal_``) takes a vectorised code path on CPUs with AVX2 and a scalar one without (and under
``ATEN_CPU_CAPABILITY=default``): the same seed gives other float32 values (38,819 of 1e5 differ).
The float64 sampler is scalar on every instruction set, so drawing in float64 and rounding to the
target dtype gives one result everywhere.  ``uniform_(a, b)`` (``nn.init.kaiming_uniform_``, the default
initialisation of ``nn.Linear`` and ``nn.Conv2d``) draws ``u`` in ``[0, 1)`` the same everywhere but
scales a float32 ``u * (b - a) + a`` in float64 with AVX2 and in float32 without (about half of 1e6
values differ); :func:`portable_uniform_` always scales in float64, which is the AVX2 result bit for
bit.  Every initial parameter and random input of the built-in tasks, test problems and golden
cases is drawn through this module, so ``theta0_sha256`` means the same on every machine.

:data:`INIT` names this initializer; tasks record it in their description (``task_info["init"]``),
so a record folder made with another initializer is recognised as such.
"""

from __future__ import annotations

import torch

__all__ = ["INIT", "portable_default_init_", "portable_normal_", "portable_randn", "portable_uniform_"]

#: the initializer's name and version, recorded by every built-in task
INIT = "float64-normal-v1"


def portable_randn(*shape, generator: torch.Generator | None = None, dtype=torch.float32, device="cpu",
                   mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """``mean + std * N(0, 1)`` of ``shape``: drawn on the CPU in float64 (``generator``, or the global
    CPU generator when ``None``), scaled in float64, then rounded once to ``dtype`` on ``device``."""
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
    """In-place ``tensor ~ U(a, b)`` like ``Tensor.uniform_(a, b)``, the same bits on every CPU.

    Consumes the generator exactly as ``uniform_`` does (``u = rand`` in ``tensor.dtype``, on the CPU);
    with ``a``, ``b`` and ``b - a`` rounded to ``tensor.dtype``, returns ``u * (b - a) + a`` computed in
    float64 and rounded once: ``uniform_``'s AVX2 result (measured equal on 1e6 float32 values).
    """
    u = torch.rand(tuple(tensor.shape), generator=generator, dtype=tensor.dtype)
    lo = torch.tensor(float(a), dtype=tensor.dtype)
    width = torch.tensor(float(b), dtype=tensor.dtype) - lo
    wide = u.to(torch.float64) * width.to(torch.float64) + lo.to(torch.float64)
    tensor.copy_(wide.to(device=tensor.device, dtype=tensor.dtype))
    return tensor


@torch.no_grad()
def portable_default_init_(module: torch.nn.Module, generator: torch.Generator | None = None) -> torch.nn.Module:
    """Redraw the ``nn.Linear`` and ``nn.Conv*`` layers of ``module`` as their ``reset_parameters`` does
    (``kaiming_uniform_(a=sqrt(5))`` weights, ``U(+-1/sqrt(fan_in))`` biases: both ``U(+-1/sqrt(fan_in))``),
    in module order, weight then bias, with :func:`portable_uniform_`.

    Called with the generator in the state it had when the layers were built (e.g. reseeded), it gives
    the AVX2 build's weights on every CPU.  Other parameters (normalisation layers) are left as they are.
    """
    layers = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    for m in module.modules():
        if isinstance(m, layers):
            fan_in = m.weight[0].numel()
            bound = 1.0 / fan_in ** 0.5  # kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) times sqrt(3 / fan_in)
            portable_uniform_(m.weight, -bound, bound, generator)
            if m.bias is not None:
                portable_uniform_(m.bias, -bound, bound, generator)
    return module
