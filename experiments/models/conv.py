"""A 2-d convolution whose double backward uses the backward kernels (for fast Hessian-vector products).

``conv2d(x, W, stride, padding)`` computes exactly ``torch.nn.functional.conv2d``
(no bias, dilation 1, one group), with derivatives written out:

* first derivative (backward): ``grad_x = conv_transpose(gO, W)``,
  ``grad_W = corr(x, gO)``, both by ``aten.convolution_backward`` as usual;
* second derivative (the backward of that backward, what double backward and
  :class:`numeric.point.PointCurvature` products run): with cotangents ``a``
  for ``grad_x`` and ``b`` for ``grad_W``, since both are bilinear,

      d gO = conv(a, W) + conv(x, b)
      d x  = conv_transpose(gO, b)          (an input gradient,  convolution_backward)
      d W  = corr(a, gO)                    (a weight gradient,  convolution_backward)

  PyTorch's generic double backward (``_convolution_double_backward``)
  computes the ``d W`` term as an ordinary convolution over batch/channel
  transposed tensors, several times slower on the CPU than the
  backward-weights kernel used here (``benchmarks/bench_hvp.py``; README,
  Performance);
* reverse mode only: there is no ``jvp`` rule.  A forward-mode rule passed
  first-order checks but gave wrong second derivatives under nested
  ``torch.func.jvp`` (tests/experiments/test_conv.py keeps the comparison),
  so forward mode raises instead, and the suite's automatic choices fall back
  to double and triple backward (:func:`numeric.hvp.hvp` ``"auto"``,
  :func:`numeric.third.third_derivative` ``"auto"``, the protocol's
  ``"auto"``).  Use ``torch.nn.functional.conv2d`` where forward mode is
  needed.

Both functions follow the ``torch.func`` conventions (``setup_context``,
``generate_vmap_rule``), so ``torch.func.grad`` and ``vmap`` work through
them; every derivative is checked in float64 against
``torch.nn.functional.conv2d`` by ``torch.autograd.gradcheck`` /
``gradgradcheck``, dense Hessians and triple backward
(tests/experiments/test_conv.py).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["conv2d", "Conv2d"]

_aten = torch.ops.aten


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _conv_backward(gO, x, W, stride, padding, mask):
    """``aten.convolution_backward`` for ``conv2d(x, W)`` with ``mask = (input, weight)``."""
    gI, gW, _ = _aten.convolution_backward(gO, x, W, None, stride, padding, (1, 1), False, (0, 0), 1,
                                           (mask[0], mask[1], False))
    return gI, gW


class _ConvBackward(torch.autograd.Function):
    """``(gO, x, W) -> (grad_x, grad_W)`` of ``y = conv2d(x, W)`` (``grad_x`` zeros unless ``need_x``)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(gO, x, W, stride, padding, need_x):
        gI, gW = _conv_backward(gO, x, W, stride, padding, (need_x, True))
        return (gI if need_x else torch.zeros_like(x)), gW

    @staticmethod
    def setup_context(ctx, inputs, output):
        gO, x, W, stride, padding, need_x = inputs
        ctx.save_for_backward(gO, x, W)
        ctx.conf = (stride, padding, need_x)

    @staticmethod
    def backward(ctx, a, b):
        gO, x, W = ctx.saved_tensors
        stride, padding, need_x = ctx.conf
        need = ctx.needs_input_grad
        d_gO = d_x = d_W = None
        if need[0]:
            d_gO = F.conv2d(x, b, None, stride, padding)
            if need_x:
                d_gO = d_gO + F.conv2d(a, W, None, stride, padding)
        if need[1]:
            d_x = _conv_backward(gO, x, b, stride, padding, (True, False))[0]
        if need[2] and need_x:
            d_W = _conv_backward(gO, a, W, stride, padding, (False, True))[1]
        return d_gO, d_x, d_W, None, None, None


class _Conv2d(torch.autograd.Function):
    """``conv2d(x, W)`` with the backward of :class:`_ConvBackward`."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, W, stride, padding):
        return F.conv2d(x, W, None, stride, padding)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, W, stride, padding = inputs
        ctx.save_for_backward(x, W)
        ctx.conf = (stride, padding)

    @staticmethod
    def backward(ctx, gO):
        x, W = ctx.saved_tensors
        stride, padding = ctx.conf
        need_x = bool(ctx.needs_input_grad[0])
        gI, gW = _ConvBackward.apply(gO, x, W, stride, padding, need_x)
        return (gI if need_x else None), gW, None, None


def conv2d(x: torch.Tensor, weight: torch.Tensor, stride=1, padding=0) -> torch.Tensor:
    """``F.conv2d(x, weight, None, stride, padding)`` with the fast double backward (module docstring).

    Args:
        x: ``(B, C_in, H, W)`` input.
        weight: ``(C_out, C_in, kh, kw)`` kernel.
        stride, padding: ints or pairs.

    Returns:
        ``(B, C_out, H', W')``, same dtype and device as ``x``.
    """
    return _Conv2d.apply(x, weight, _pair(stride), _pair(padding))


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` (no bias, dilation 1, one group, zero padding) computed by :func:`conv2d`."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=False):
        if bias:
            raise ValueError("Conv2d here has no bias (the ResNet convolutions are followed by BatchNorm)")
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d(x, self.weight, self.stride, self.padding)
