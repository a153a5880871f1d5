"""crosscurv.numeric.update_rules: which rule a run gets, and the order in which the iteration body
calls its hooks."""

from __future__ import annotations

import pytest

from crosscurv.numeric import protocol
from crosscurv.numeric.optimizers import optimizer_setup
from crosscurv.numeric.update_rules import OptimizerRule, PlainRule, UpdateRule, update_rule
from crosscurv.theory.patterns import gauss_seidel
from tests.numeric.cases import tanh_mlp

HOOKS = ("s_forcing", "s_step", "jc_step", "advance_z", "advance_y", "advance_delta",
         "error_columns", "bound", "carry")


@pytest.mark.parametrize("optimizer, block_lr, kind", [
    ("sgd", None, PlainRule),
    ("sgd", {"0": 1.0}, PlainRule),  # a factor of 1 is the paper's step
    ("sgd", "1=2.0", OptimizerRule),
    ("momentum:0.9", None, OptimizerRule),
    ("adam", None, OptimizerRule),
])
def test_a_run_gets_the_plain_rule_only_for_the_papers_steps(optimizer, block_lr, kind):
    task = tanh_mlp()
    if block_lr == {"0": 1.0}:
        block_lr = {task.block_names[0]: 1.0}
    rule = update_rule(task, optimizer_setup(task, optimizer, block_lr))
    assert type(rule) is kind and isinstance(rule, UpdateRule)
    # state buffers are carried only for momentum and Adam
    assert bool(rule.carried) == (optimizer != "sgd")


def test_the_interface_has_no_default_for_a_step():
    with pytest.raises(NotImplementedError):
        UpdateRule().jc_step(None, 0, None, {}, {}, {})


class _Recording(UpdateRule):
    """A rule that records each hook call (with ``k``) and delegates to another rule."""

    def __init__(self, inner, calls):
        self.inner, self.calls, self.carried = inner, calls, inner.carried

    def start(self, store, like):
        self.inner.start(store, like)

    def __getattribute__(self, name):
        if name in HOOKS:
            inner = object.__getattribute__(self, "inner")
            calls = object.__getattribute__(self, "calls")

            def hook(*args):
                calls.append(name)
                return getattr(inner, name)(*args)
            return hook
        return object.__getattribute__(self, name)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum:0.5"])
def test_the_body_calls_the_hooks_in_the_documented_order_and_the_records_are_unchanged(
        monkeypatch, optimizer):
    """Per iteration ``k < K``: s_forcing, s_step, jc_step, advance_z/y/delta, then (``k >= 1``)
    error_columns and bound, then carry; at ``k = K`` only error_columns and bound (module docstring
    of crosscurv.numeric.update_rules.base)."""
    K = 3
    want = protocol.run_protocol(tanh_mlp(), gauss_seidel(4), 0.2, K, optimizer=optimizer)
    calls: list = []
    monkeypatch.setattr(protocol, "update_rule", lambda task, setup: _Recording(update_rule(task,
        setup), calls))
    got = protocol.run_protocol(tanh_mlp(), gauss_seidel(4), 0.2, K, optimizer=optimizer)
    # bit for bit, NaN included
    assert [repr(r) for r in got.records] == [repr(r) for r in want.records]
    steps = ["s_forcing", "s_step", "jc_step", "advance_z", "advance_y", "advance_delta"]
    expected = steps + ["carry"]  # k = 0: no record
    for _ in range(1, K):
        expected += steps + ["error_columns", "bound", "carry"]
    expected += ["error_columns", "bound"]  # k = K
    assert calls == expected
