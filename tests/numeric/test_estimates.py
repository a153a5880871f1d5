"""Trajectory estimates (Theorems 2 and 3, JC-only, bound) against dense float64 closed forms.

The references are written independently of :mod:`crosscurv.numeric.estimates`: dense
trajectories (the exact scheme step of docs/design.md with dense gradients), dense
Hessians (``torch.func.hessian``), ``M_S`` as the masked dense Hessian, and the
*unrolled* sums of Theorem 3 with explicit ``Phi_{K,j+1}`` products (the code
under test uses the forward recursion instead).
"""

from __future__ import annotations

import math

import pytest
import torch

from crosscurv.numeric import Task, tree
from crosscurv.numeric.estimates import bk_radius, bound_bk, power_step, propagate
from crosscurv.numeric.protocol import run_protocol
from crosscurv.theory.patterns import from_pairs, gauss_seidel
from tests.numeric.cases import dense_mask, tanh_mlp

F64 = torch.float64
REL = 1e-12


# -- dense references ------------------------------------------------------------------
def _flat_loss(task):
    return lambda f: task.loss(tree.unflatten(f, task.params))


def _dense_grad(task, f):
    return torch.func.grad(_flat_loss(task))(f)


def _dense_hess(task, f):
    return torch.func.hessian(_flat_loss(task))(f)


def _block_slices(task):
    out, i = [], 0
    sizes = {k: v.numel() for k, v in task.params.items()}
    offsets = {}
    for k in task.params:
        offsets[k] = (i, i + sizes[k])
        i += sizes[k]
    for b in task.block_names:
        idx = torch.cat([torch.arange(*offsets[k]) for k in task.blocks[b]])
        out.append(idx)
    return out


def _dense_scheme_step(task, f, pattern, lr):
    """Exact step: block i's gradient at the state where exactly its fresh blocks are new."""
    slices = _block_slices(task)
    new = f.clone()
    for i in pattern.order():
        state = f.clone()
        for j in pattern.fresh(i):
            state[slices[j]] = new[slices[j]]
        new[slices[i]] = f[slices[i]] - lr * _dense_grad(task, state)[slices[i]]
    return new


def _dense_run(task, pattern, lr, K):
    """Dense trajectories and every quantity of the closed forms, k = 0..K."""
    mask = dense_mask(task, pattern)
    fj = tree.flatten(task.params).clone()
    fs = fj.clone()
    out = {"fj": [], "fs": [], "gj": [], "gs": [], "Hj": [], "Ms": [], "Mj": []}
    for k in range(K + 1):
        gj, gs = _dense_grad(task, fj), _dense_grad(task, fs)
        Hj, Hs = _dense_hess(task, fj), _dense_hess(task, fs)
        for name, val in (("fj", fj), ("fs", fs), ("gj", gj), ("gs", gs), ("Hj", Hj)):
            out[name].append(val)
        out["Ms"].append((Hs * mask) @ gs)  # M_S(theta_S^k) g_S^k
        out["Mj"].append((Hj * mask) @ gj)  # M_S(theta_JC^k) g_JC^k
        fj = fj - lr * gj
        fs = _dense_scheme_step(task, fs, pattern, lr)
    return out


def _closed_forms(task, d, lr, K):
    """recursive, cumulative and jc_only for k = 1..K from the unrolled formulas."""
    n = d["fj"][0].numel()
    eye = torch.eye(n, dtype=F64)
    loss = _flat_loss(task)
    rec, cum, jco, gap = [], [], [], []
    for k in range(1, K + 1):
        # Theorem 2 with the measured Delta^{k-1}
        delta = d["fs"][k - 1] - d["fj"][k - 1]
        H = d["Hj"][k - 1]
        g1 = d["gj"][k]
        rec.append(float(g1 @ (eye - lr * H) @ delta + 0.5 * delta @ H @ delta + lr**2 * g1 @ d[
            "Ms"][k - 1]))
        # Theorem 3: z_k = eta^2 sum_j Phi_{k,j+1} M_S^j g_S^j, Phi_{k,j+1} = prod_{l=j+1}^{k-1} (I
        # - eta H_l)
        for key, out in (("Ms", cum), ("Mj", jco)):
            z = torch.zeros(n, dtype=F64)
            for j in range(k):
                phi = eye.clone()
                for ell in range(j + 1, k):  # larger indices to the left
                    phi = (eye - lr * d["Hj"][ell]) @ phi
                z = z + lr**2 * phi @ d[key][j]
            out.append(float(d["gj"][k] @ z + 0.5 * z @ d["Hj"][k] @ z))
        gap.append(float(loss(d["fs"][k])) - float(loss(d["fj"][k])))
    return rec, cum, jco, gap


def _close(a, b, rel=REL):
    assert len(a) == len(b)
    scale = max(max(abs(x) for x in b), 1e-300)
    for i, (x, y) in enumerate(zip(a, b)):
        assert abs(x - y) <= rel * scale, (i, x, y, abs(x - y) / scale)


# -- problems -------------------------------------------------------------------------
def quadratic_task(seed: int = 0) -> tuple[Task, torch.Tensor]:
    """``1/2 t^T A t - b^T t`` over 3 blocks (shapes 2x2, 3, 2); ``A`` SPD with a separated top
    eigenvalue."""
    gen = torch.Generator().manual_seed(seed)
    n = 9
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=F64))
    eig = torch.tensor([5.0, 2.0, 1.7, 1.3, 1.0, 0.8, 0.6, 0.4, 0.2], dtype=F64)
    A = q @ torch.diag(eig) @ q.T
    b = torch.randn(n, generator=gen, dtype=F64)
    params = {
        "W": torch.randn(2, 2, generator=gen, dtype=F64),
        "v": torch.randn(3, generator=gen, dtype=F64),
        "c": torch.randn(2, generator=gen, dtype=F64),
    }

    def loss(p):
        t = torch.cat([p["W"].reshape(-1), p["v"], p["c"]])
        return 0.5 * t @ (A @ t) - b @ t

    return Task(params, loss, {"first": ["W"], "second": ["v"], "third": ["c"]},
                name="quadratic"), A


def sqrt_coupling_task() -> Task:
    """``L(x, y) = x_1 sqrt(1 + y) + x_2^2/2 + y^2/2`` (blocks x in R^2, y in R).

    For the pattern ``2<-1``: ``(M_S g)_y = H_yx g_x = (1/(2 sqrt(1+y))) sqrt(1+y) = 1/2`` at
    *every* point, so ``M_S g`` is the same on both trajectories while the
    trajectories themselves differ (``g_y`` depends on ``x``).
    """
    params = {"x": torch.tensor([0.3, -0.7], dtype=F64), "y": torch.tensor([0.2], dtype=F64)}

    def loss(p):
        x, y = p["x"], p["y"][0]
        return x[0] * torch.sqrt(1 + y) + 0.5 * x[1] ** 2 + 0.5 * y**2

    return Task(params, loss, {"x": ["x"], "y": ["y"]}, name="sqrt_coupling")


# -- tests ----------------------------------------------------------------------------
@pytest.mark.parametrize("pairs", [None, [(1, 0), (2, 0)], [(2, 1)]], ids=["gs", "shared_fresh",
                                                                           "3<-2"])
def test_quadratic_estimates_equal_closed_forms(pairs):
    task, A = quadratic_task()
    pattern = gauss_seidel(3) if pairs is None else from_pairs(3, pairs)
    lr, K = 0.15, 30
    res = run_protocol(task, pattern, lr, K)
    d = _dense_run(task, pattern, lr, K)
    rec, cum, jco, gap = _closed_forms(task, d, lr, K)
    cols = {f: [r[f] for r in res.records] for f in res.records[0]}
    assert cols["k"] == list(range(1, K + 1))
    _close(cols["recursive"], rec)
    _close(cols["cumulative"], cum)
    _close(cols["jc_only"], jco)
    _close(cols["gap"], gap, rel=1e-10)  # differences of O(1) losses: absolute ~1e-15
    assert max(abs(x) for x in cols["gap"]) > 1e-3  # the patterns really differ from JC
    # G: max gradient norm over both trajectories; L: power iteration on the constant A
    G = max(float(g.norm()) for g in d["gj"] + d["gs"])
    assert res.summary["constants"]["G"] == pytest.approx(G, rel=REL)
    L = res.summary["constants"]["L"]
    assert L <= 5.0 * (1 + 1e-12) and L == pytest.approx(5.0, rel=1e-8)
    # bound: b_k from the dense ||M_S g_S^j|| with the final L (L is converged by then)
    unorms = [float(m.norm()) for m in d["Ms"][:K]]
    b = lr**2 * sum((1 + lr * L) ** (K - 1 - j) * unorms[j] for j in range(K))
    assert cols["bound_bk"][-1] == pytest.approx(G * b + 0.5 * L * b * b, rel=1e-10)


def test_two_block_quadratic_cumulative_is_exact():
    """For two blocks on a quadratic the S step is exactly theta - eta g + eta^2 M_S g, so Theorem 3
    has no remainder."""
    task, _ = quadratic_task(1)
    two = Task(task.params, task.loss, {"a": ["W"], "b": ["v", "c"]}, name="quadratic2")
    res = run_protocol(two, gauss_seidel(2), 0.1, 12)
    for r in res.records:
        assert abs(r["cumulative"] - r["gap"]) <= 1e-11 * abs(r["gap"]) + 1e-14


def test_tanh_mlp_estimates_equal_dense_closed_forms():
    """A non-quadratic loss: Hessians differ from step to step, Phi products matter."""
    task = tanh_mlp()
    pattern = from_pairs(4, [(1, 0), (2, 1), (3, 0), (3, 1)])  # block 4 sees block 3 stale
    lr, K = 0.3, 6
    res = run_protocol(task, pattern, lr, K)
    d = _dense_run(task, pattern, lr, K)
    rec, cum, jco, gap = _closed_forms(task, d, lr, K)
    cols = {f: [r[f] for r in res.records] for f in res.records[0]}
    _close(cols["recursive"], rec, 1e-10)
    _close(cols["cumulative"], cum, 1e-10)
    _close(cols["jc_only"], jco, 1e-10)
    _close(cols["gap"], gap, 1e-10)


def test_jc_only_equals_cumulative_when_masked_products_agree():
    task = sqrt_coupling_task()
    res = run_protocol(task, gauss_seidel(2), 0.2, 10)
    gaps = [r["gap"] for r in res.records]
    assert min(abs(g) for g in gaps) > 1e-6  # the trajectories do differ
    for r in res.records:
        assert r["cumulative"] != 0.0
        assert abs(r["jc_only"] - r["cumulative"]) <= 1e-12 * abs(r["cumulative"])
    # and the shared forcing is the closed form 1/2: ||u^j|| = 1/2 in the bound
    G, L = res.summary["constants"]["G"], res.summary["constants"]["L"]
    assert res.records[-1]["bound_bk"] == pytest.approx(bound_bk([0.5] * 10, 0.2, G, L), rel=1e-12)


# -- the formula helpers themselves --------------------------------------------------------
def test_propagate_and_bound_helpers():
    s = {"a": torch.tensor([1.0, 2.0], dtype=F64)}
    Hs = {"a": torch.tensor([4.0, -2.0], dtype=F64)}
    f = {"a": torch.tensor([10.0, 0.0], dtype=F64)}
    out = propagate(s, Hs, f, 0.5)
    assert torch.equal(out["a"], torch.tensor([1 - 2 + 2.5, 2 + 1 + 0.0], dtype=F64))
    assert bk_radius([], 0.1, 3.0) == 0.0
    u = [0.5, 0.25, 2.0]
    lr, L = 0.1, 3.0
    expect = lr**2 * sum((1 + lr * L) ** (2 - j) * u[j] for j in range(3))
    assert bk_radius(u, lr, L) == pytest.approx(expect, rel=1e-15)
    assert bound_bk(u, lr, 2.0, L) == pytest.approx(2.0 * expect + 1.5 * expect**2, rel=1e-15)


def test_power_step_keeps_vector_when_product_vanishes():
    p = {"a": torch.tensor([0.6, 0.8], dtype=F64)}
    rq, nxt = power_step(p, {"a": torch.zeros(2, dtype=F64)})
    assert rq == 0.0 and torch.equal(nxt["a"], p["a"])
    rq, nxt = power_step(p, {"a": torch.tensor([1.2, -1.6], dtype=F64)})
    assert rq == pytest.approx(0.72 - 1.28) and math.isclose(float(nxt["a"].norm()), 1.0)


def test_quadratic_estimate_split_at_its_linear_term_is_bit_for_bit_the_same():
    from crosscurv.numeric.estimates import quadratic_estimate, quadratic_from_linear

    g = torch.Generator().manual_seed(5)
    vec = lambda: {"a": torch.randn(7, generator=g), "b": torch.randn(2, 3, generator=g)}  # noqa: E731
    gv, z, Hz = vec(), vec(), vec()
    assert torch.equal(quadratic_from_linear(tree.dot(gv, z), z, Hz), quadratic_estimate(gv, z, Hz))


def test_power_step_into_the_product_is_bit_for_bit_the_same_and_consumes_it():
    g = torch.Generator().manual_seed(3)
    p = {"a": torch.randn(5, generator=g), "b": torch.randn(2, 2, generator=g)}
    Hp = {"a": torch.randn(5, generator=g), "b": torch.randn(2, 2, generator=g)}
    want_rq, want = power_step(p, {k: t.clone() for k, t in Hp.items()})
    ptrs = {k: t.data_ptr() for k, t in Hp.items()}
    rq, got = power_step(p, Hp, into=True)
    assert rq == want_rq and all(torch.equal(got[k], want[k]) for k in p)
    assert {k: t.data_ptr() for k, t in got.items()} == ptrs  # formed in Hp's tensors
    shared = {"a": p["a"], "b": Hp["b"]}  # an hvp that handed back its input: p is not overwritten
    before = p["a"].clone()
    power_step(p, shared, into=True)
    assert torch.equal(p["a"], before)


def test_the_residual_of_a_pair_is_the_norm_of_its_float64_difference():
    from crosscurv.numeric.eigenpairs import pair_residual

    g = torch.Generator().manual_seed(4)
    A = torch.randn(6, 6, generator=g, dtype=F64)
    A = (A + A.T).to(torch.float32)
    v = {"a": torch.randn(4, generator=g), "b": torch.randn(2, generator=g)}

    def hvp(x):
        out = A @ torch.cat([x["a"], x["b"]])
        return {"a": out[:4], "b": out[4:]}

    Hv = hvp(v)
    r = torch.cat([Hv[k].double() - 1.5 * v[k].double() for k in v])
    zero = {k: t * 0 for k, t in v.items()}
    assert pair_residual(hvp, (1.5, v), (-0.5, zero)) == float(r.norm()) / 1.5


def test_the_seeded_start_vector_is_the_normalised_float64_draw_bit_for_bit():
    """Drawn entry by entry twice (norm, then entries): the whole float64 draw normalised, then
    cast.
    """
    from crosscurv.numeric.estimates import init_power_vector

    like = {"w": torch.zeros(300, 70), "b": torch.zeros(5, dtype=F64), "e": torch.zeros(0, 3)}
    got = init_power_vector(like, 7)
    gen = torch.Generator().manual_seed(7)
    raw = {k: torch.randn(v.shape, generator=gen, dtype=F64) for k, v in like.items()}
    n = tree.norm(raw)
    assert list(got) == list(like)
    for k, v in like.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], (raw[k] / n).to(v.dtype))
    assert float(tree.norm({k: t.double() for k, t in got.items()})) == pytest.approx(1.0, rel=1e-6)
    assert init_power_vector({}, 7) == {}
