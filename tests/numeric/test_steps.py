"""Exact scheme steps (Definitions 1-2, docs/design.md, "Exact scheme step") against closed forms.
"""

import pytest
import torch

from crosscurv.experiments.problems.toys import coupled_quadratic
from crosscurv.numeric import Task, tree
from crosscurv.numeric.steps import (StepError, fresh_groups, gauss_seidel_step, jacobi_step,
                                     scheme_step, scheme_step_with_grads)
from crosscurv.theory.patterns import PatternError, chain, from_pairs, gauss_seidel, jacobi
from tests.numeric.cases import CASES, patterns_for, relerr

N = 5
ETA = 0.13


def quadratic(n=N, seed=0):
    """``L = 1/2 x^T A x - b^T x`` with scalar blocks ``x1..xn`` (A SPD, dense): ``(task, A, b,
    x^0)``.
    """
    task, A, b = coupled_quadratic([1] * n, seed)
    return task, A, b, vec(task.params)


def vec(params):
    return tree.flatten(params)


def closed_form(A, b, x, pattern, eta):
    """Scheme ``S`` on the quadratic: ``(I + eta M_S(A)) x' = x - eta((A - M_S(A)) x - b)``.

    Row ``i``: ``x'_i = x_i - eta(sum_{j in S(i)} A_ij x'_j + sum_{j not in S(i)} A_ij x_j - b_i)``;
    ``M_S(A)`` keeps ``A_ij`` for ``(i, j) in S`` (acyclic, so the system is a permuted triangle).
    """
    mask = torch.tensor(pattern.mask(), dtype=torch.float64)
    M = A * mask
    eye = torch.eye(len(x), dtype=torch.float64)
    return torch.linalg.solve(eye + eta * M, x - eta * ((A - M) @ x - b))


def test_jacobi_closed_form():
    task, A, b, x = quadratic()
    new = jacobi_step(task, task.params, ETA)
    assert relerr(vec(new), x - ETA * (A @ x - b)) < 1e-14


def test_gauss_seidel_closed_form_paper_form():
    """GS solves ``(I + eta L) x' = x - eta((D + L^T) x - b)`` (L strictly lower part of A)."""
    task, A, b, x = quadratic()
    L = torch.tril(A, -1)
    D = torch.diag(torch.diag(A))
    eye = torch.eye(N, dtype=torch.float64)
    expected = torch.linalg.solve(eye + ETA * L, x - ETA * ((D + L.T) @ x - b))
    assert relerr(vec(gauss_seidel_step(task, task.params, ETA)), expected) < 1e-14


def test_gauss_seidel_any_order_is_gs_on_permuted_blocks():
    task, A, b, x = quadratic()
    order = [3, 0, 4, 2, 1]
    P = torch.eye(N, dtype=torch.float64)[order]  # (P x)_r = x_{order[r]}
    Ap, bp, xp = P @ A @ P.T, P @ b, P @ x
    L = torch.tril(Ap, -1)
    D = torch.diag(torch.diag(Ap))
    eye = torch.eye(N, dtype=torch.float64)
    xp_new = torch.linalg.solve(eye + ETA * L, xp - ETA * ((D + L.T) @ xp - bp))
    new = gauss_seidel_step(task, task.params, ETA, order)
    assert relerr(vec(new), P.T @ xp_new) < 1e-14


@pytest.mark.parametrize(
    "pattern",
    [
        from_pairs(N, [(1, 0)]),
        chain(N),
        from_pairs(N, [(2, 0), (4, 0), (4, 3)]),
        from_pairs(N, [(0, 4), (1, 4), (2, 1), (3, 1)]),
        gauss_seidel(N, [4, 3, 2, 1, 0]),
        jacobi(N),
    ],
    ids=lambda p: p.describe(),
)
def test_any_acyclic_pattern_closed_form(pattern):
    task, A, b, x = quadratic()
    new = scheme_step(task, task.params, pattern, ETA)
    assert relerr(vec(new), closed_form(A, b, x, pattern, ETA)) < 1e-14


def test_partial_sees_stale_blocks_not_the_in_place_state():
    """S = {3<-1} (0-based (2,0)): block 2 uses new x0 but OLD x1, although x1 was updated before
    it.
    """
    task, A, b, x = quadratic()
    pattern = from_pairs(N, [(2, 0)])
    new = vec(scheme_step(task, task.params, pattern, ETA))
    x0n = x[0] - ETA * (A[0] @ x - b[0])
    x1n = x[1] - ETA * (A[1] @ x - b[1])
    stale = x[2] - ETA * (A[2, 0] * x0n + A[2, 1:] @ x[1:] - b[2])
    in_place = x[2] - ETA * (A[2, 0] * x0n + A[2, 1] * x1n + A[2, 2:] @ x[2:] - b[2])
    assert abs(float(new[2] - stale)) < 1e-14
    assert abs(float(new[2] - in_place)) > 1e-6  # the in-place sweep would differ


def _affected(pattern, reference, n):
    """Blocks whose update can differ between two patterns: a different fresh set, or a fresh block
    that itself differs (closure in update order)."""
    bad = set()
    for i in reference.order():
        if pattern.fresh(i) != reference.fresh(i) or any(j in bad for j in reference.fresh(i)):
            bad.add(i)
    return bad


@pytest.mark.parametrize(
    "pairs",
    [
        [(1, 0)],  # blocks 2..4 lose fresh values
        # GS minus 4<-3 (0-based (4,3))
        [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (4, 0), (4, 1), (4, 2)],
        [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (4, 0), (4, 1), (4, 2), (4, 3)],  # GS minus (1,0)
    ],
)
def test_partial_differs_from_gs_exactly_where_the_definition_says(pairs):
    task, A, b, x = quadratic()
    gs = gauss_seidel(N)
    pattern = from_pairs(N, pairs)
    a = vec(scheme_step(task, task.params, pattern, ETA))
    g = vec(gauss_seidel_step(task, task.params, ETA))
    bad = _affected(pattern, gs, N)
    assert bad, "test pattern must differ from GS somewhere"
    for i in range(N):
        if i in bad:
            assert abs(float(a[i] - g[i])) > 1e-8, f"block {i} should differ"
        else:
            assert float(a[i]) == float(g[i]), f"block {i} should match GS exactly"


def test_step_with_grads_returns_the_fresh_gradients():
    task, A, b, x = quadratic()
    pattern = chain(N)
    new, gt = scheme_step_with_grads(task, task.params, pattern, ETA)
    assert relerr(vec(new), x - ETA * vec(gt)) < 1e-15
    # fresh gradient of block i at the state with exactly S(i) new
    xn = vec(new)
    for i in range(N):
        state = x.clone()
        for j in pattern.fresh(i):
            state[j] = xn[j]
        assert abs(float(vec(gt)[i] - (A[i] @ state - b[i]))) < 1e-14


def _sequential_loop(task, params, pattern, lr):
    """Hand-written reference: for each block in order, the FULL gradient at its exact state, keep
    block i."""
    names = task.block_names
    old = {k: v.clone() for k, v in params.items()}
    new = {}
    for i in pattern.order():
        state = {k: v.clone().requires_grad_(True) for k, v in old.items()}
        for j in pattern.fresh(i):
            for k in task.blocks[names[j]]:
                state[k] = new[k].clone().requires_grad_(True)
        gs = torch.autograd.grad(task.loss(state), list(state.values()))
        gd = dict(zip(state, gs))
        for k in task.blocks[names[i]]:
            new[k] = old[k] - lr * gd[k]
    return {k: new[k] for k in old}


@pytest.mark.parametrize("case", list(CASES))
def test_non_quadratic_steps_match_a_hand_written_loop(case):
    task = CASES[case]()
    for name, pattern in patterns_for(task.n_blocks).items():
        got = scheme_step(task, task.params, pattern, 0.3)
        ref = _sequential_loop(task, task.params, pattern, 0.3)
        assert relerr(vec(got), vec(ref)) < 1e-14, name
        assert all(not t.requires_grad for t in got.values())


def _counting(task):
    calls = {"n": 0}
    inner = task.loss

    def loss(p):
        calls["n"] += 1
        return inner(p)

    return Task(task.params, loss, task.blocks, task.name), calls


@pytest.mark.parametrize(
    "pattern,expected",
    [
        (jacobi(N), 1),  # one full gradient
        (gauss_seidel(N), N),  # one block gradient per block
        (from_pairs(N, [(1, 0)]), 2),  # blocks 0,2,3,4 share the old state
        (from_pairs(N, [(1, 0), (2, 0), (3, 0), (4, 0)]), 2),  # 1..4 share fresh set {0}
        (chain(N), N),
        (from_pairs(N, [(2, 0), (3, 0), (4, 2), (4, 3)]), 3),  # {}, {0}, {2,3}
    ],
    ids=lambda x: x.describe() if hasattr(x, "describe") else str(x),
)
def test_scheme_step_computes_only_the_needed_gradients(pattern, expected):
    task, calls = _counting(quadratic()[0])
    scheme_step(task, task.params, pattern, ETA)
    assert calls["n"] == expected
    assert len(fresh_groups(pattern)) == expected


def test_bad_inputs():
    task = quadratic()[0]
    with pytest.raises(PatternError, match="over 3 blocks"):
        scheme_step(task, task.params, gauss_seidel(3), ETA)
    with pytest.raises(StepError, match="finite"):
        scheme_step(task, task.params, gauss_seidel(N), float("nan"))
    with pytest.raises(StepError, match="number"):
        scheme_step(task, task.params, gauss_seidel(N), "fast")
