"""``backward_of``: the bits of ``torch.autograd.grad`` with ``grad_outputs``, without importing
SymPy.
"""

import subprocess
import sys

import pytest
import torch

from crosscurv.numeric.hvp import backward_of


def _graph(dtype):
    """A float ``dtype`` MLP-shaped gradient with its graph kept: ``(params, [g entries])``; ``c``
    unused."""
    gen = torch.Generator().manual_seed(3)
    w1 = torch.randn(7, 5, generator=gen, dtype=dtype, requires_grad=True)
    w2 = torch.randn(3, 7, generator=gen, dtype=dtype, requires_grad=True)
    c = torch.randn(4, generator=gen, dtype=dtype, requires_grad=True)
    x = torch.randn(11, 5, generator=gen, dtype=dtype)
    value = torch.tanh(torch.tanh(x @ w1.T) @ w2.T).pow(2).sum()
    g = torch.autograd.grad(value, (w1, w2), create_graph=True)
    return (w1, w2, c), list(g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_same_bits_as_autograd_grad(dtype):
    params, g = _graph(dtype)
    gen = torch.Generator().manual_seed(5)
    v = [torch.randn(t.shape, generator=gen, dtype=dtype) for t in g]
    ours = backward_of(g, params, v, retain_graph=True)
    ref = torch.autograd.grad(g, params, grad_outputs=v, retain_graph=True, allow_unused=True)
    assert ours[2] is None and ref[2] is None
    for a, b in zip(ours[:2], ref[:2]):
        assert a.dtype == dtype and torch.equal(a, b)
    again = backward_of(g, params[:2], v)  # the graph was retained; this call frees it
    assert all(torch.equal(a, b) for a, b in zip(again, ref[:2]))
    with pytest.raises(RuntimeError):
        backward_of(g, params[:2], v)


def test_a_misshapen_grad_output_is_refused():
    params, g = _graph(torch.float64)
    with pytest.raises(RuntimeError, match=r"grad_outputs\[1\]"):
        backward_of(g, params, [torch.zeros_like(g[0]), torch.zeros(2, dtype=torch.float64)])
    with pytest.raises(RuntimeError, match="1 grad_outputs for 2 outputs"):
        backward_of(g, params, [torch.zeros_like(g[0])])


def test_a_product_at_a_point_does_not_import_sympy():
    """A run's products never import SymPy (torch.fx's symbolic shapes): a fresh interpreter, as a
    user runs it."""
    code = (
        "import sys, torch\nfrom crosscurv.numeric.point import PointCurvature\nw = {'a': "
        "torch.randn(3, 2), 'b': torch.randn(2)}\nloss = lambda p: torch.tanh(p['a'] @ "
        "p['b']).pow(2).sum()\npt = PointCurvature(loss, w)\nhv = pt.hvp({'a': torch.ones(3, 2), "
        "'b': torch.ones(2)})\nassert hv['a'].shape == (3, 2)\nprint(sorted(m for m in ('sympy', "
        "'torch.fx.experimental.symbolic_shapes') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
