"""One-step gap coefficients: numeric ``eta^2`` and ``eta^3`` vs ``crosscurv.theory.one_step`` and
vs exact steps.

* ``C_S`` and ``c3`` computed with HVPs and nested jvp equal
  ``crosscurv.theory.one_step.gap_coefficients`` evaluated on the dense float64 ``g, H, T`` of the
  same objective (a random quartic polynomial, and the small networks of ``cases.py``).
* Taylor test (pyadjoint style) against the exact steps of :mod:`crosscurv.numeric.steps`: ``gap -
  eta^2 C_S = O(eta^3)`` and ``gap - eta^2 C_S - eta^3 c3 = O(eta^4)``.
"""

import itertools
import math

import pytest
import torch

from crosscurv.numeric import Task
from crosscurv.numeric.one_step import one_step_coefficients, one_step_estimate, one_step_gap
from crosscurv.numeric.orders import observe_order
from crosscurv.theory.one_step import gap_coefficients
from crosscurv.theory.patterns import chain, from_pairs, gauss_seidel, jacobi
from tests.numeric.cases import CASES, dense_reference, patterns_for

BLOCK_DIMS = (2, 1, 2, 1)


def _symmetrise(t: torch.Tensor) -> torch.Tensor:
    perms = list(itertools.permutations(range(t.dim())))
    return sum(t.permute(p) for p in perms) / len(perms)


def quartic(seed: int = 0) -> tuple[Task, dict]:
    """``L(x) = b.x + 1/2 A[x,x] + 1/6 C[x,x,x] + 1/24 Q[x,x,x,x]`` with random symmetric tensors.

    Returns the task (blocks ``x0..x3`` of sizes ``BLOCK_DIMS``, evaluated at a random point) and
    the exact ``g, H, T`` at that point.
    """
    gen = torch.Generator().manual_seed(seed)
    d = sum(BLOCK_DIMS)
    def rnd(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64)

    b, A, C, Q = rnd(d), _symmetrise(rnd(d, d)), _symmetrise(rnd(d, d, d)), _symmetrise(rnd(d, d, d,
                                                                                            d))
    x0 = 0.5 * rnd(d)
    keys = [f"x{i}" for i in range(len(BLOCK_DIMS))]
    cuts = [0] + list(itertools.accumulate(BLOCK_DIMS))

    def loss(p):
        x = torch.cat([p[k] for k in keys])
        return (
            b @ x
            + 0.5 * torch.einsum("ab,a,b->", A, x, x)
            + torch.einsum("abc,a,b,c->", C, x, x, x) / 6
            + torch.einsum("abcd,a,b,c,d->", Q, x, x, x, x) / 24
        )

    params = {k: x0[cuts[i] : cuts[i + 1]].clone() for i, k in enumerate(keys)}
    g = b + A @ x0 + torch.einsum("abc,b,c->a", C, x0, x0) / 2 + torch.einsum("abcd,b,c,d->a", Q,
                                                                              x0, x0, x0) / 6
    H = A + torch.einsum("abc,c->ab", C, x0) + torch.einsum("abcd,c,d->ab", Q, x0, x0) / 2
    T = C + torch.einsum("abcd,d->abc", Q, x0)
    return Task(params, loss, {k: [k] for k in keys}, name="quartic"), {"g": g, "H": H, "T": T}


QUARTIC_PATTERNS = {
    "gs": gauss_seidel(4),
    "gs_4321": gauss_seidel(4, [3, 2, 1, 0]),
    "chain": chain(4),
    "partial": from_pairs(4, [(1, 0)]),
    "shared": from_pairs(4, [(1, 0), (2, 0), (3, 2)]),
    "skip": from_pairs(4, [(2, 0), (3, 0), (3, 1)]),
}


def _theory(pattern, dims, g, H, T):
    return gap_coefficients(pattern, dims, g.numpy(), H.numpy(), T.numpy(), mode="float")


@pytest.mark.parametrize("name", list(QUARTIC_PATTERNS))
def test_coefficients_equal_theory_on_a_quartic(name):
    task, exact = quartic()
    pattern = QUARTIC_PATTERNS[name]
    num = one_step_coefficients(task, task.params, pattern)
    sym = _theory(pattern, BLOCK_DIMS, exact["g"], exact["H"], exact["T"])
    scale2 = float(exact["g"].abs() @ exact["H"].abs() @ exact["g"].abs())
    assert num[2] == pytest.approx(sym[2], rel=1e-10, abs=1e-12 * scale2)
    assert num[3] == pytest.approx(sym[3], rel=1e-10)
    assert abs(sym[3]) > 1e-3  # the eta^3 coefficient is really exercised


@pytest.mark.parametrize("case", list(CASES))
def test_coefficients_equal_theory_on_small_networks(case):
    ref = dense_reference(case, with_third=True)
    task = ref["task"]
    dims = task.block_sizes()
    for name, pattern in patterns_for(task.n_blocks).items():
        num = one_step_coefficients(task, task.params, pattern)
        sym = _theory(pattern, dims, ref["g"], ref["H"], ref["T"])
        if pattern.is_jacobi:
            assert num == {2: 0.0, 3: 0.0} and sym[2] == 0.0 and sym[3] == 0.0
            continue
        assert num[2] == pytest.approx(sym[2], rel=1e-10, abs=1e-13), name
        assert num[3] == pytest.approx(sym[3], rel=1e-10, abs=1e-13), name


def _taylor(task, pattern, eta0, n=7):
    coef = one_step_coefficients(task, task.params, pattern)
    etas = [eta0 * 2.0**-k for k in range(n)]
    gaps = [one_step_gap(task, task.params, pattern, e) for e in etas]
    r2 = [gp - e**2 * coef[2] for gp, e in zip(gaps, etas)]
    r3 = [gp - e**2 * coef[2] - e**3 * coef[3] for gp, e in zip(gaps, etas)]
    floor = 1e3 * torch.finfo(torch.float64).eps * abs(float(task.loss(task.params)))
    return observe_order(etas, r2, floor=floor, expected=3), observe_order(etas, r3, floor=floor,
                                                                           expected=4)


@pytest.mark.parametrize("name", ["gs", "skip", "shared"])
def test_taylor_remainders_against_exact_steps_on_the_quartic(name):
    task, _ = quartic()
    o3, o4 = _taylor(task, QUARTIC_PATTERNS[name], 0.05)
    assert len(o3.errors) >= 4 and len(o4.errors) >= 4, (o3.table(), o4.table())
    assert o3.min_rate > 2.8, o3.table()
    assert o4.min_rate > 3.7, o4.table()


def test_taylor_remainders_against_exact_steps_on_the_mlp():
    task = CASES["tanh_mlp"]()
    for pattern in (gauss_seidel(4), from_pairs(4, [(1, 0), (2, 1), (3, 0), (3, 1)])):
        o3, o4 = _taylor(task, pattern, 0.2)
        assert len(o4.errors) >= 4, o4.table()
        assert o3.min_rate > 2.8, o3.table()
        assert o4.min_rate > 3.7, o4.table()


def test_estimate_dictionary():
    task, _ = quartic()
    pattern = QUARTIC_PATTERNS["gs"]
    est = one_step_estimate(task, task.params, pattern, 0.01)
    coef = one_step_coefficients(task, task.params, pattern)
    assert est["C_S"] == coef[2] and est["c3"] == coef[3]
    assert est["eta2"] == pytest.approx(1e-4 * coef[2], rel=1e-15)
    assert est["eta3"] == pytest.approx(1e-4 * coef[2] + 1e-6 * coef[3], rel=1e-15)
    # the eta^3 correction moves the estimate toward the measured gap
    gap = one_step_gap(task, task.params, pattern, 0.01)
    assert abs(gap - est["eta3"]) < abs(gap - est["eta2"])
    jc = one_step_estimate(task, task.params, jacobi(4), 0.01)
    assert jc["eta2"] == 0.0 and jc["eta3"] == 0.0
    assert math.isfinite(est["eta3"])
