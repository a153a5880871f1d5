"""The Python API computes with the command line's thread default (one) and gives the caller's count
back.

A script that never chose a count gets one intra-op thread in ``run_protocol``, ``advise`` and the
curvature functions, as ``crosscurv run`` does (``OMP_NUM_THREADS`` when set); ``threads=N`` asks
for ``N``; a program that chooses the count itself (the command line) keeps it; the count is
recorded.
"""

from __future__ import annotations

import pytest
import torch

import crosscurv
from crosscurv.numeric import threads as api_threads
from crosscurv.numeric.advice import advise
from crosscurv.numeric.protocol_checks import ProtocolError
from tests.numeric.cases import bilinear_lora


@pytest.fixture()
def fresh_script(monkeypatch):
    """A script's process: no OMP_NUM_THREADS, nothing chosen, torch at two threads."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(api_threads, "_chosen", False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _during(task, **kw):
    seen = []
    res = crosscurv.run_protocol(
        task, "gs", 0.05, 2, on_record=lambda r: seen.append(torch.get_num_threads()), **kw
    )
    return seen, res.summary["settings"]["threads"]


def test_api_default_is_one_thread_and_the_callers_count_comes_back(fresh_script):
    task = bilinear_lora()
    assert _during(task) == ([1, 1], 1)
    assert torch.get_num_threads() == 2
    assert _during(task, threads=2) == ([2, 2], 2)
    seen = []
    adv = advise(task, 0.05, 2, on_record=lambda r: seen.append(torch.get_num_threads()))
    assert set(seen) == {1} and adv.settings["threads"] == 1 and torch.get_num_threads() == 2


def test_omp_num_threads_and_a_program_that_chooses_are_respected(fresh_script, monkeypatch):
    task = bilinear_lora()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(1)
    assert _during(task) == ([2, 2], 2)
    monkeypatch.delenv("OMP_NUM_THREADS")
    api_threads.caller_chooses()  # as crosscurv's command line does before it runs a command
    torch.set_num_threads(2)
    assert _during(task) == ([2, 2], 2)


def test_identify_step_runs_the_users_step_on_one_thread(fresh_script):
    from crosscurv.numeric import as_user_step, identify_step, scheme_step

    task, seen = bilinear_lora(), set()

    def step(params, lr):
        seen.add(torch.get_num_threads())
        return scheme_step(task, params, "gs", lr)

    report = identify_step(as_user_step((task, step, "gs")), seeds=(0,), n_etas=3, fit=False)
    assert report.matches == ["gs:B,A"] and seen == {1} and torch.get_num_threads() == 2


def test_bad_thread_count_is_one_line_input_error(fresh_script):
    with pytest.raises(ProtocolError, match="threads must be an integer >= 1"):
        crosscurv.cross_curvature_table(bilinear_lora(), threads=0)
