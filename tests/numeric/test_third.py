"""Third directional derivatives ``D^3 L[u, v, w]`` vs ``jacrev(hessian)`` in float64."""

import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.third import third_derivative
from tests.numeric.cases import CASES, dense_reference, random_direction


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("method", ["forward", "reverse", "auto"])
def test_third_derivative_matches_dense_tensor(case, method):
    ref = dense_reference(case, with_third=True)
    task, T = ref["task"], ref["T"]
    u, v, w = (random_direction(task.params, s) for s in (1, 2, 3))
    uf, vf, wf = (tree.flatten(x) for x in (u, v, w))
    ref = torch.einsum("abc,a,b,c->", T, uf, vf, wf)
    scale = torch.einsum("abc,a,b,c->", T.abs(), uf.abs(), vf.abs(), wf.abs())
    got = third_derivative(task.loss, task.params, u, v, w, method)
    assert got.dim() == 0 and got.dtype == torch.float64
    assert abs(float(got - ref)) <= 1e-10 * float(scale)
    assert abs(float(ref)) > 1e-6 * float(scale)  # a non-trivial contraction


def test_third_derivative_of_a_cubic_is_exact_and_symmetric():
    x = {"a": torch.tensor([0.3, -0.7], dtype=torch.float64), "b": torch.tensor([1.1],
        dtype=torch.float64)}

    def loss(p):  # a0^2 b + a1^3 : T[u,v,w] = 2 sym(u_a0 v_a0 w_b) + 6 u_a1 v_a1 w_a1
        return p["a"][0] ** 2 * p["b"][0] + p["a"][1] ** 3

    u = {"a": torch.tensor([1.0, 2.0], dtype=torch.float64), "b": torch.tensor([0.5],
                                                                               dtype=torch.float64)}
    v = {"a": torch.tensor([-1.0, 1.0], dtype=torch.float64), "b": torch.tensor([2.0],
        dtype=torch.float64)}
    w = {"a": torch.tensor([3.0, 0.5], dtype=torch.float64), "b": torch.tensor([-1.0],
                                                                               dtype=torch.float64)}

    def exact(u, v, w):
        def a0(z):
            return float(z["a"][0])

        def a1(z):
            return float(z["a"][1])

        def b(z):
            return float(z["b"][0])

        return 2 * (a0(u) * a0(v) * b(w) + a0(u) * b(v) * a0(w) + b(u) * a0(v) * a0(w)) + 6 * a1(
            u) * a1(v) * a1(w)

    for method in ("forward", "reverse"):
        for args in ((u, v, w), (w, u, v), (v, w, u)):
            assert float(third_derivative(loss, x, *args, method=method)) == pytest.approx(exact(u,
                v, w), rel=1e-14)


def test_bad_directions_and_methods_are_one_line_hvp_errors():
    from crosscurv.numeric.hvp import HVPError

    task = CASES["bilinear_lora"]()
    p = task.params
    ones = {k: torch.ones_like(v) for k, v in p.items()}
    with pytest.raises(HVPError, match="unknown HVP method 'sideways'"):
        third_derivative(task.loss, p, ones, ones, ones, "sideways")
    missing = dict(list(ones.items())[1:])
    with pytest.raises(HVPError, match="missing"):
        third_derivative(task.loss, p, missing, ones, ones)
    k0 = next(iter(p))
    wrong = dict(ones, **{k0: torch.ones(7, dtype=torch.float64)})
    with pytest.raises(HVPError, match=f"vector entry '{k0}' has shape"):
        third_derivative(task.loss, p, ones, wrong, ones)
    # float32 directions are cast to the parameters' dtype
    f32 = {k: v.float() for k, v in ones.items()}
    assert third_derivative(task.loss, p, f32, ones, ones) == third_derivative(task.loss, p, ones,
                                                                               ones, ones)
