"""The run description (``crosscurv.experiments.runs``): flags -> description -> flags, summary ->
description, one check per setting (the library free of the command line:
tests/test_import_graph.py)."""

from __future__ import annotations

import dataclasses
import os
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosscurv.experiments.cli.commands.run import description_from_args, parse
from crosscurv.experiments.runs import RunDescription, RunDescriptionError, check_setting



def _maybe(strategy):
    return st.none() | strategy


descriptions = st.builds(
    RunDescription,
    task=st.sampled_from(["mlp", "fl", "lora", "pkg.mod:factory", "path/to/my task.py:make"]),
    preset=_maybe(st.sampled_from(["smoke", "default", "paper"])),
    pattern=_maybe(st.sampled_from(["jc", "gs", "gs:3,1,2", "chain", "2<-1,3<-2", "B<-A"])),
    lr=_maybe(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)),
    iters=_maybe(st.integers(1, 10**9)),
    seed=st.integers(-(2**63), 2**63),
    dtype=_maybe(st.sampled_from(["float32", "float64"])),
    device=_maybe(st.sampled_from(["auto", "cpu", "cuda", "cuda:1"])),
    data=_maybe(st.sampled_from(["data", "/tmp/cifar 10"])),
    model=_maybe(st.sampled_from(["weights/t5", "/m.pt"])),
    threads=_maybe(st.one_of(st.integers(1, 256), st.just("auto"))),
    hvp=st.sampled_from(["auto", "forward", "reverse"]),
    hvp_chunk=_maybe(st.integers(1, 10**6)),
    offload=st.sampled_from(["auto", "on", "off"]),
    optimizer=st.sampled_from(["sgd", "momentum:0.9", "momentum:0", "adam",
                               "adam:0.9,0.999,1e-08"]),
    block_lr=_maybe(st.sampled_from(["B=4", "1=2.5,2=0.5", "layer1=2"])),
    checkpoint_every=_maybe(st.integers(1, 10**6)),
)


@given(descriptions)
def test_a_description_round_trips_through_its_command_line(d):
    """``description_from_args(parse(to_args(d))) == d``: the flags say everything the description
    holds."""
    args = d.to_args()
    assert description_from_args(parse(args)) == d
    assert all(isinstance(a, str) for a in args) and args[0] == d.task


def test_the_defaults_are_no_flags():
    assert RunDescription("mlp").to_args() == ["mlp"]
    assert RunDescription("mlp", lr=0.1, seed=3).to_args() == ["mlp", "--lr", "0.1", "--seed", "3"]


@pytest.mark.parametrize("change, message", [
    ({"lr": 0.0}, "learning rate must be a finite number > 0"),
    ({"lr": float("nan")}, "learning rate must be a finite number > 0"),
    ({"lr": True}, "learning rate must be a finite number > 0"),
    ({"iters": 0}, "iterations must be an integer >= 1"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"dtype": "float16"}, "dtype must be one of float32, float64"),
    ({"preset": "huge"}, "preset must be one of smoke, default, edge, paper"),
    ({"hvp": "sideways"}, "hvp must be one of"),
    ({"hvp_chunk": 0}, "HVP chunk size must be an integer >= 1"),
    ({"threads": 0}, "threads must be an integer >= 1"),
    ({"checkpoint_every": -1}, "checkpoint interval must be an integer >= 1"),
    ({"optimizer": "rmsprop"}, "unknown optimizer 'rmsprop'"),
    ({"optimizer": "momentum:1.5"}, "0 <= BETA < 1"),
    ({"pattern": ""}, "pattern must be a non-empty string"),
])
def test_every_setting_is_checked_when_the_description_is_made(change, message):
    from crosscurv.theory.errors import InputError

    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        RunDescription("mlp", **change)
    name, value = next(iter(change.items()))
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        check_setting(name, value)  # the same check the sweep grid uses
    with pytest.raises(InputError):
        dataclasses.replace(RunDescription("mlp"), **change)


FACTORY = """
import torch
from crosscurv.numeric import Task

def quad(seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(4, 4, generator=g, dtype=torch.float64)
    A = A @ A.T / 4 + torch.eye(4, dtype=torch.float64)
    p = {"x": torch.randn(2, generator=g, dtype=torch.float64), "y": torch.randn(2, generator=g, \
dtype=torch.float64)}

    def loss(q):
        t = torch.cat([q["x"], q["y"]])
        return 0.5 * t @ A @ t + (t ** 4).sum() / 10

    return Task(p, loss, {"bx": ["x"], "by": ["y"]}, name="quad"), {"lr": 0.1, "iters": 3}
"""


def test_a_run_folder_gives_back_its_description_with_the_tasks_defaults_resolved(tmp_path):
    """``from_summary`` of a run made from a description: the same run, with what the task decided
    (learning rate, K, pattern, dtype, device, threads, offloading) written out."""
    from crosscurv.experiments import runs
    from crosscurv.numeric.records import read_records

    (tmp_path / "tasks.py").write_text(textwrap.dedent(FACTORY))
    asked = RunDescription(f"{tmp_path}/tasks.py:quad", seed=2, optimizer="momentum:0.5",
                           block_lr="by=2", threads=1)
    result, out = runs.run(asked, str(tmp_path / "run"))
    assert result.status == "complete" and out == str(tmp_path / "run")
    back = RunDescription.from_summary(out)
    assert back == asked.replace(lr=0.1, iters=3, pattern="gs", dtype="float64", device="cpu",
                                 offload="off", block_lr="by=2.0")
    # rerun in memory from the description read back: the same records, bit for bit
    again, _ = runs.run(back, None)
    written = read_records(os.path.join(out, "records.csv"))
    assert len(again.records) == len(written) == 3
    for new, old in zip(again.records, written):
        assert {c: repr(new[c]) for c in old} == {c: repr(v) for c, v in old.items()}


def test_a_summary_without_settings_is_one_line(tmp_path):
    with pytest.raises(RunDescriptionError, match="has no settings object"):
        RunDescription.from_summary({"status": "complete"})
    with pytest.raises(RunDescriptionError, match="settings lack lr, pattern"):
        RunDescription.from_summary({"settings": {"task": "mlp", "dtype": "float32", "seed": 0}})
    with pytest.raises(RunDescriptionError,
                       match="^summary: learning rate must be a finite number > 0"):
        RunDescription.from_summary({"settings": {"task": "mlp", "dtype": "float32", "seed": 0,
                                                  "lr": -1, "pattern_spec": "gs"}})


# -- the library does not import the command line
# ----------------------------------------------------
def test_a_bad_flag_is_named_in_its_error():
    """From the command line the setting's own check speaks, led by the flag it came from."""
    with pytest.raises(RunDescriptionError, match=r"^--lr: learning rate must be a finite number "
                                                  r"> 0, got -1.0$"):
        description_from_args(parse(["mlp", "--lr", "-1"]))
    with pytest.raises(RunDescriptionError, match=r"^--checkpoint-every: checkpoint interval "
                                                  r"must be an integer >= 1"):
        description_from_args(parse(["mlp", "--checkpoint-every", "0"]))
    with pytest.raises(RunDescriptionError, match=r"^--optimizer: unknown optimizer 'lion'"):
        description_from_args(parse(["mlp", "--optimizer", "lion"]))
