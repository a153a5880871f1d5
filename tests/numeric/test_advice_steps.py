"""The local error of the JC-only forcing and its carried state (advise's and the search's)."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from crosscurv.experiments.problems.zoo import lambda_max0, zoo_problem
from crosscurv.numeric import tree
from crosscurv.numeric.advice_steps import (PatternCandidate, carried, masked, step_error)
from crosscurv.numeric.estimates import propagate
from crosscurv.numeric.hvp import grad, hvp
from crosscurv.numeric.steps import block_keys, scheme_step
from crosscurv.theory.patterns import as_pattern


class _Point:
    """``M_S v`` by full Hessian-vector products at ``theta``."""

    def __init__(self, task, theta):
        self.task, self.theta = task, theta

    def products(self, named):
        return [(j, hvp(self.task.loss, self.theta, v())) for j, v in named]


def _candidate(task, spec):
    pat = as_pattern(spec, task.n_blocks, task.block_names)
    rows = [(i, sorted(pat.fresh(i))) for i in range(task.n_blocks) if pat.fresh(i)]
    return PatternCandidate(spec, pat, rows)


def test_step_error_is_the_exact_steps_difference_less_the_pairs_forcing():
    task = zoo_problem("poisson_regression").task(0)
    lr = 0.3 / lambda_max0(task)
    theta = tree.clone(task.params)
    _, g = grad(task.loss, theta)
    c = _candidate(task, "gs:3,1,2")

    Point = partial(_Point, task, theta)
    keys = block_keys(task)
    mg = masked(Point(), c, keys, g)
    mmg = masked(Point(), c, keys, mg)
    got = step_error(task, theta, Point(), keys, c, g, mg, lr)
    s1 = scheme_step(task, theta, c.pattern, lr, grad_at_params=g)
    r = {n: s1[n] - (theta[n] - lr * g[n]) - lr**2 * mg[n] + lr**3 * mmg[n] for n in g}
    for n in r:
        torch.testing.assert_close(got[n], r[n], rtol=1e-12, atol=1e-15)
    assert float(tree.norm(r)) > 1e-3 * lr**3 * float(tree.norm(mmg))  # a dropped order
    # carried: e_1 = r_0, then e_2 = (I - eta H) e_1 + r_1
    e = carried(None, None, got, lr)
    he = hvp(task.loss, theta, e)
    nxt = carried(e, he, got, lr)
    want = propagate(e, he, None, lr)
    for n in r:
        torch.testing.assert_close(e[n], r[n], rtol=0, atol=0)
        torch.testing.assert_close(nxt[n], want[n] + r[n], rtol=1e-12, atol=1e-15)
    assert carried(None, None, None, lr) is None
    torch.testing.assert_close(carried(e, he, None, lr)["w1"], want["w1"], rtol=0, atol=0)


def test_step_error_is_none_at_rounding_level():
    """JC itself (no fresh block) has no dropped order: the exact step is the JC step."""
    task = zoo_problem("poisson_regression").task(0)
    theta = tree.clone(task.params)
    _, g = grad(task.loss, theta)
    c = _candidate(task, "jc")
    zero = tree.zeros_like(g)
    assert step_error(task, theta, _Point(task, theta), block_keys(task), c, g, zero, 0.1) is None


def test_on_a_quadratic_the_pairs_forcing_is_one_exact_step():
    """No third derivative: a GS step's increment over JC is ``eta^2 M_S g - eta^3 M_S^2 g``
    exactly (each block's gradient is linear in the fresh blocks' updates), so nothing is left to
    carry, while the JC-only forcing alone misses the ``eta^3`` term."""
    task = zoo_problem("ill_quadratic").task(0)
    lam = lambda_max0(task)
    theta = tree.clone(task.params)
    _, g = grad(task.loss, theta)
    c = _candidate(task, "gs")
    keys = block_keys(task)

    Point = partial(_Point, task, theta)
    mg = masked(Point(), c, keys, g)
    for f in (1.6, 0.4):
        lr = f / lam
        assert step_error(task, theta, Point(), keys, c, g, mg, lr) is None
        s1 = scheme_step(task, theta, c.pattern, lr, grad_at_params=g)
        jc_only = {n: s1[n] - (theta[n] - lr * g[n]) - lr**2 * mg[n] for n in g}
        assert float(tree.norm(jc_only)) > 1e-4


@pytest.mark.parametrize("name", ["poisson_regression", "heteroscedastic"])
def test_the_problems_beyond_the_zoo_have_cross_curvature(name):
    task = zoo_problem(name).task(0)
    _, g = grad(task.loss, task.params)
    keys = block_keys(task)
    v = {k: (g[k] if k in keys[0] else torch.zeros_like(g[k])) for k in g}
    hv = hvp(task.loss, task.params, v)
    assert any(float(hv[k].abs().max()) > 0 for k in keys[1])


def test_a_step_error_orthogonal_to_the_gradient_is_carried():
    """A LoRA adapter at ``B = 0``: ``A``'s gradient vanishes, so the first ``gs:B,A`` step's
    local error lies in ``A`` alone and ``g . r`` is exactly 0; it is still far above the steps'
    rounding and moves every later iterate, so it is kept."""
    task = zoo_problem("lora_adapter32").task(0)
    lr = 1.0 / lambda_max0(task)
    theta = tree.clone(task.params)
    _, g = grad(task.loss, theta)
    assert float(g["A"].abs().max()) == 0.0
    c = _candidate(task, "gs:B,A")
    keys = block_keys(task)
    mg = masked(_Point(task, theta), c, keys, g)
    r = step_error(task, theta, _Point(task, theta), keys, c, g, mg, lr)
    assert r is not None
    assert float(tree.dot(g, r)) == 0.0
    assert float(r["A"].norm()) > 0.05 * float(tree.norm(theta))  # 9%: far above rounding


def test_the_pairs_error_is_the_larger_read_out_distance_and_nan_where_one_is_lost():
    from crosscurv.numeric.advice_steps import pair_error

    assert pair_error(1.0, 1.5, 0.2) == 0.8 and pair_error(1.0, 3.0, 0.5) == 2.0
    assert math.isnan(pair_error(1.0, 1.5, math.nan)) and math.isnan(pair_error(1.0, math.nan, 2.0))
