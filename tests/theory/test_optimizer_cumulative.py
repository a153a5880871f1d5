"""Generalized Theorem 3 on a quadratic: O(eta^3) remainders and their exact eta^3 growth laws."""

from __future__ import annotations

import pytest

from crosscurv.theory.optimizers.cumulative import check_optimizer_cumulative


@pytest.mark.parametrize("kind", ["sgd", "preconditioner", "momentum"])
@pytest.mark.parametrize("n,dims,pattern", [(2, 1, "gs"), (3, 1, "gs"), (3, 1, "3<-1,2<-1")])
def test_cumulative_estimate_is_third_order_with_the_stated_growth(kind, n, dims, pattern):
    c = check_optimizer_cumulative(kind, n, dims, pattern, K_max=4)
    assert c.holds, c.steps
    assert c.growth_holds


@pytest.mark.parametrize("kind", ["sgd", "momentum"])
def test_full_gs_over_three_blocks_has_a_nonzero_eta3_remainder(kind):
    """M_S^2 != 0 for GS over 3 blocks: the remainder is exactly eta^3 (the check is not vacuous).
    """
    c = check_optimizer_cumulative(kind, 3, 1, "gs", K_max=3)
    assert [s["trajectory_order"] for s in c.steps] == [3, 3, 3]
    assert [s["loss_order"] for s in c.steps] == [3, 3, 3]


def test_two_blocks_dims_two_preconditioned():
    c = check_optimizer_cumulative("preconditioner", 2, 2, "gs", K_max=2)
    assert c.holds and c.growth_holds
