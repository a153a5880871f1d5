"""crosscurv's checks on my implementation: one decorated test, one pytest test per check."""

from hypothesis import given, settings
from hypothesis import strategies as st

import crosscurv
import my_blocks
from crosscurv.testing import parametrize_with_checks
from crosscurv.testing import strategies as cst


@parametrize_with_checks(my_blocks)
def test_my_blocks(implementation, check):
    check(implementation)


@settings(max_examples=10, deadline=None)
@given(spec=cst.block_quadratics(min_blocks=2, max_blocks=4), data=st.data())
def test_my_step_equals_crosscurvs_on_random_problems(spec, data):
    """A property test of my own with crosscurv's strategies: any staged pattern, any block
    quadratic."""
    task = spec.build().task
    pattern = data.draw(cst.stage_patterns(task.n_blocks), label="pattern")
    mine = my_blocks.step(task, task.params, pattern, 0.05)
    ref = crosscurv.scheme_step(task, task.params, pattern, 0.05)
    for name in ref:
        assert (mine[name] - ref[name]).abs().max() <= 1e-13 * (1 + ref[name].abs().max())
