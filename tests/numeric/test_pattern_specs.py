"""Every public ``numeric`` function that takes a pattern also takes its command-line spelling."""

from __future__ import annotations

import pytest
import torch

from crosscurv.numeric import (cross_curvature_table, gauss_seidel_step, one_step_estimate,
                               one_step_gap, scheme_step)
from crosscurv.numeric.steps import scheme_step_with_grads
from crosscurv.theory.patterns import PatternError, chain, gauss_seidel
from tests.numeric.cases import CASES

SPECS = [("gs", lambda n: gauss_seidel(n)), ("gs:4,3,2,1", lambda n: gauss_seidel(n, [3, 2, 1, 0])),
         ("chain", lambda n: chain(n)), ("layer2<-layer1,layer4<-layer1", None)]


@pytest.mark.parametrize("spec, build", SPECS)
def test_spec_and_pattern_give_the_same_results(spec, build):
    task = CASES["tanh_mlp"]()
    p = task.params
    pattern = build(task.n_blocks) if build else None
    table = cross_curvature_table(task)
    if pattern is not None:
        assert table.C_S(spec) == table.C_S(pattern)
        a, b = scheme_step(task, p, spec, 0.1), scheme_step(task, p, pattern, 0.1)
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert one_step_estimate(task, p, spec, 0.1) == one_step_estimate(task, p, pattern, 0.1)
        assert one_step_gap(task, p, spec, 0.1) == one_step_gap(task, p, pattern, 0.1)
    else:  # block names: C_S sums exactly the named pairs
        c = table.c
        assert table.C_S(spec) == pytest.approx(float(c[1, 0] + c[3, 0]), rel=1e-12)
        assert scheme_step_with_grads(task, p, spec, 0.1)[0].keys() == p.keys()


def test_numeric_cross_curvature_table_C_S_gs_is_C_cross_over_2():
    task = CASES["bilinear_lora"]()
    table = cross_curvature_table(task)
    assert table.C_S("gs") == pytest.approx(table.C_cross / 2, rel=1e-12)
    step = gauss_seidel_step(task, task.params, 0.05)
    assert all(torch.equal(step[k], scheme_step(task, task.params, "gs", 0.05)[k]) for k in step)


def test_bad_specs_are_pattern_errors():
    task = CASES["bilinear_lora"]()
    table = cross_curvature_table(task)
    for call in (lambda: table.C_S("gs:1"), lambda: scheme_step(task, task.params, "1<-1", 0.1),
                 lambda: one_step_estimate(task, task.params, "bogus", 0.1), lambda: table.C_S(
                 gauss_seidel(3))):
        with pytest.raises(PatternError):
            call()
