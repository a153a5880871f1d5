"""crosscurv.numeric.optimizer_estimates against dense float64 references and the actual optimizer
steps."""

from __future__ import annotations

import math

import pytest
import torch

from crosscurv.numeric import tree
from crosscurv.numeric.hvp import grad, hvp
from crosscurv.numeric.optimizer_estimates import (factor_tree, forcing, optimizer_delay_curvature,
                                                   optimizer_one_step_estimate,
                                                   optimizer_one_step_gap, run_optimizer_estimates,
                                                   state_difference, tangent_step)
from crosscurv.numeric.optimizers import (OptimizerState, direction, optimizer_scheme_step,
                                          parse_optimizer)
from tests.numeric.cases import bilinear_lora, dense_hessian, dense_mask, relerr, tanh_mlp
from crosscurv.theory.patterns import jacobi, parse_pattern

SPECS = ["sgd", "momentum:0.9", "adam", "adam:0.8,0.99,1e-3"]
FACTORS = [1.0, 4.0, 0.5, 2.0]


def _warm(task, spec, factors, steps=2, lr=0.05):
    """A point and a non-trivial (non-zero) optimizer state: ``steps`` JC steps from the start."""
    p, st = dict(task.params), OptimizerState()
    for _ in range(steps):
        p, st, _ = optimizer_scheme_step(task, p, jacobi(task.n_blocks), lr, spec, st, factors)
    return p, st


@pytest.mark.parametrize("spec_text", SPECS)
@pytest.mark.parametrize("pattern_text", ["gs", "2<-1,4<-2", "gs:4,3,2,1"])
def test_delay_curvature_matches_dense_reference(spec_text, pattern_text):
    task = tanh_mlp()
    spec = parse_optimizer(spec_text)
    pattern = parse_pattern(pattern_text, task.n_blocks)
    p, st = _warm(task, spec, FACTORS)
    c = optimizer_delay_curvature(task, p, pattern, spec, st, FACTORS, method="reverse")
    # dense: g^T F J M_S F phi, J by autograd of the direction map in the flat gradient
    _, g = grad(task.loss, p)
    gf = tree.flatten(g)
    H = dense_hessian(task, p)
    M = H * dense_mask(task, pattern)
    F = torch.diag(tree.flatten(factor_tree_tensors(task, p)))

    def phi_flat(x):
        return tree.flatten(direction(spec, st, tree.unflatten(x, p)))

    J = torch.func.jacrev(phi_flat)(gf)
    dense = gf @ F @ J @ M @ F @ phi_flat(gf)
    assert math.isclose(c, float(dense), rel_tol=1e-10, abs_tol=1e-14), (c, float(dense))
    if spec.name != "adam":
        assert torch.equal(J, torch.eye(J.shape[0], dtype=J.dtype))
    else:  # Adam is coordinate-wise: J is diagonal
        assert torch.equal(J, torch.diag(torch.diagonal(J)))


def factor_tree_tensors(task, like):
    f = factor_tree(task, FACTORS)
    return {k: torch.full_like(v, f[k]) for k, v in like.items()}


@pytest.mark.parametrize("spec_text", SPECS)
def test_one_step_remainder_is_third_order(spec_text):
    from crosscurv.experiments.scaling import loss_gap

    task = tanh_mlp()
    spec = parse_optimizer(spec_text)
    pattern = parse_pattern("gs", task.n_blocks)
    p, st = _warm(task, spec, FACTORS)
    c = optimizer_delay_curvature(task, p, pattern, spec, st, FACTORS)
    errs = []
    etas = [0.01 * 2.0**-k for k in range(4)]
    for eta in etas:
        s_new, _, _ = optimizer_scheme_step(task, p, pattern, eta, spec, st, FACTORS)
        j_new, _, _ = optimizer_scheme_step(task, p, jacobi(4), eta, spec, st, FACTORS)
        errs.append(loss_gap(task, s_new, j_new) - eta**2 * c)
    rates = [math.log2(abs(errs[i] / errs[i + 1])) for i in range(3)]
    assert min(rates) > 2.8, (rates, errs)
    est = optimizer_one_step_estimate(task, p, pattern, etas[-1], spec, st, FACTORS)
    assert est["C_S"] == c and est["eta2"] == etas[-1] ** 2 * c
    gap = optimizer_one_step_gap(task, p, pattern, etas[-1], spec, st, FACTORS)
    assert abs(gap - est["eta2"]) < 0.05 * abs(est["eta2"])


@pytest.mark.parametrize("spec_text", SPECS)
def test_tangent_step_is_the_linearized_step(spec_text):
    """With no forcing, the tangent step is the derivative of the JC optimizer step in (theta,
    state).
    """
    task = tanh_mlp(seed=2)
    spec = parse_optimizer(spec_text)
    lr = 0.05
    p, st = _warm(task, spec, FACTORS, steps=3)
    z = tree.unflatten(torch.randn(sum(v.numel() for v in p.values()),
                                   generator=torch.Generator().manual_seed(0),
                                   dtype=torch.float64), p)
    zs = {name: {k: torch.randn_like(v) * 0.1 for k, v in p.items()} for name in state_difference(
        spec, st, st, p)}
    if spec.name == "adam":  # a second-moment perturbation that keeps v > 0
        zs["exp_avg_sq"] = {k: st.buffers["exp_avg_sq"][k] * 0.3 for k in p}

    def stepped(eps):
        q = {k: p[k] + eps * z[k] for k in p}
        s = OptimizerState(st.step, {n: {k: st.buffers[n][k] + eps * zs[n][k] for k in p}
                                     for n in zs})
        new, s_new, _ = optimizer_scheme_step(task, q, jacobi(task.n_blocks), lr, spec, s, FACTORS)
        return new, s_new

    h = 1e-5
    (a, sa), (b, sb) = stepped(h), stepped(-h)
    fd = {k: (a[k] - b[k]) / (2 * h) for k in p}
    _, g = grad(task.loss, p)
    zero = tree.zeros_like(p)
    lin, lin_s = tangent_step(spec, lr, factor_tree(task, FACTORS), z, zs, hvp(task.loss, p, z),
                              zero, st, g)
    assert relerr(tree.flatten(lin), tree.flatten(fd)) < 1e-7
    for name in lin_s:
        fds = {k: (sa.buffers[name][k] - sb.buffers[name][k]) / (2 * h) for k in p}
        assert relerr(tree.flatten(lin_s[name]), tree.flatten(fds)) < 1e-7, name


def test_forcing_matches_dense_reference():
    task = tanh_mlp()
    spec = parse_optimizer("momentum:0.5")
    pattern = parse_pattern("gs", 4)
    p, st = _warm(task, spec, FACTORS)
    _, g = grad(task.loss, p)
    fm = forcing(task, p, pattern, spec, st, g, FACTORS, method="forward")
    M = dense_hessian(task, p) * dense_mask(task, pattern)
    ref = M @ (tree.flatten(factor_tree_tensors(task, p)) * tree.flatten(direction(spec, st, g)))
    assert relerr(tree.flatten(fm), ref) < 1e-12


def test_sgd_without_factors_is_the_paper_recursion():
    """sgd, F = I: the tangent step is (I - eta H) z + eta^2 M_S g_S."""
    task = bilinear_lora()
    pattern = parse_pattern("gs", 2)
    spec = parse_optimizer("sgd")
    z = {k: torch.randn_like(v) for k, v in task.params.items()}
    _, g = grad(task.loss, task.params)
    hz = hvp(task.loss, task.params, z)
    fm = forcing(task, task.params, pattern, spec, OptimizerState(), g, None)
    out, _ = tangent_step(spec, 0.1, factor_tree(task, None), z, {}, hz, fm, OptimizerState(), g)
    for k in z:
        torch.testing.assert_close(out[k], z[k] - 0.1 * hz[k] + 0.01 * fm[k], rtol=1e-14,
                                   atol=1e-15)


@pytest.mark.parametrize("spec_text", ["sgd", "momentum:0.5", "adam"])
def test_jc_pattern_gives_zero_everything(spec_text):
    task = bilinear_lora()
    run = run_optimizer_estimates(task, jacobi(2), 0.05, 3, spec_text, [1.0, 4.0], method="reverse")
    for rec in run:
        for key in ("gap", "recursive", "cumulative", "jc_only"):
            assert rec[key] == 0.0, (key, rec)
