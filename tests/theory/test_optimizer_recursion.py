"""Generalized Lemma 3 / Theorem 2 for per-block step sizes, a preconditioner and heavy ball,
checked exactly."""

from __future__ import annotations

import pytest

from crosscurv.theory.optimizers.recursion import buffer_allowed, check_optimizer_recursions
from crosscurv.theory.recursion import lemma3_allowed


@pytest.mark.parametrize("kind", ["sgd", "preconditioner", "momentum"])
@pytest.mark.parametrize("n,dims,pattern", [(2, 1, "gs"), (3, 1, "gs"), (3, 1, "3<-1"), (2, 2,
                                                                                         "gs")])
def test_remainders_have_only_allowed_monomials(kind, n, dims, pattern):
    c = check_optimizer_recursions(kind, n, dims, pattern)
    assert c.holds, c.offending
    assert (c.buffer_remainder is not None) == (kind == "momentum")
    # the leading remainder is genuinely there (eta eps^2 and eta^3 in the trajectory, degree 3 in
    # the loss)
    assert set(c.trajectory_leading) == {(1, 2), (3, 0)}
    assert c.loss_remainder.min_degree() == 3


def test_momentum_needs_the_buffer_difference_term():
    """The prediction's -eta beta F Delta m term is what cancels the eta eps monomial.

    Without it, the remainder would be ``r - eta eps beta F mu``: its ``eta eps`` coefficient
    ``-beta f_i mu_a`` is non-zero and forbidden by Lemma 3's class.
    """
    from crosscurv.theory.optimizers.recursion import optimizer_recursion_model

    c = check_optimizer_recursions("momentum", 2, 1, "gs")
    opt = optimizer_recursion_model("momentum", 2, 1)
    model = opt.model
    mu = model.vectors["mu"]
    assert not lemma3_allowed(1, 1) and not buffer_allowed(1, 1)
    for a in range(model.d):
        assert c.trajectory_remainder[a].coeff(1, 1) == 0
        assert c.buffer_remainder[a].coeff(1, 1) == 0
        assert opt.beta * opt.factors[model.block_of[a]] * mu[a] != 0
