"""The trajectory runner on a toy body: gradient descent ``x <- x - eta A x`` on ``1/2 x.A x``.

Checkpoint, resume from an interrupted run, extension to a larger ``K``, settings comparison and
divergence, checked on a body that is not the protocol's (the runner knows nothing of it)."""

from __future__ import annotations

import math
import os

import pytest
import torch

from crosscurv.numeric.records import atomic_write_text, format_row, read_text
from crosscurv.numeric.trajectory import (Diverged, RecordsKind, Run, RunFolder,
                                          SettingsChangedError, check_resume_settings)

FIELDS = ("k", "loss")
A = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)


def _keep(path: str, k: int) -> list:
    lines = read_text(path).split("\n")[1:-1] if os.path.exists(path) else []
    rows = [{"k": int(a), "loss": float(b)} for a, b in (ln.split(",") for ln in lines)][:k]
    text = "".join(format_row(r, FIELDS) + "\n" for r in rows)
    atomic_write_text(path, ",".join(FIELDS) + "\n" + text)
    return rows


KIND = RecordsKind(FIELDS, lambda rec: [rec], _keep)


class Descent:
    """The body: ``x^{k+1} = x^k - eta A x^k``, the record of ``k`` its loss."""

    def __init__(self, lr: float, iters: int, stop_at: int | None = None):
        self.x = torch.tensor([1.0, -2.0], dtype=torch.float64)
        self.lr, self.stop_at = lr, stop_at
        self.settings = {"lr": lr, "iters": iters}

    def iteration(self, k: int, run: Run) -> None:
        loss = float(0.5 * self.x @ A @ self.x)
        if not math.isfinite(loss) or loss > 1e30:
            raise Diverged(k, f"diverged at k={k}")
        if k == self.stop_at:
            raise KeyboardInterrupt
        if k < run.iters:
            self.x = self.x - self.lr * (A @ self.x)
        if k >= 1:
            run.emit(k, {"k": k, "loss": loss})

    def vectors(self) -> dict:
        return {"x": {"x": self.x}}

    def state(self) -> dict:
        return {}

    def sources(self, vectors):
        return None

    def summary(self, run, status, message, diverged_at) -> dict:
        return {"status": status, "records": len(run.records), "settings": self.settings}


def _run(path, iters, resume=False, stop_at=None, every=None, lr=0.3):
    body = Descent(lr, iters, stop_at)
    folder = RunFolder(path, "records.csv", "summary.json")
    run = Run(iters, folder, KIND, every)
    done, start = False, 0
    if resume:
        ck = folder.load_checkpoint("cpu")
        check_resume_settings(ck["settings"], body.settings, folder.path)
        done, _, start = run.resume_point(ck)
        body.x = ck["vectors"]["x"]["x"]
    else:
        folder.check_fresh()
        folder.create()
    return run, run.execute(body, start, done, "cpu")


def test_interrupted_resumed_and_extended_runs_equal_an_uninterrupted_one(tmp_path):
    whole = tmp_path / "whole"
    run, out = _run(whole, 12)
    assert out.status == "complete" and [r["k"] for r in run.records] == list(range(1, 13))
    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        _run(part, 8, stop_at=6, every=2)
    assert read_text(str(part / "summary.json")).count("interrupted") == 1
    run, out = _run(part, 8, resume=True, every=2)
    assert run.resumed_from == 4 and run.computed == 4
    run, out = _run(part, 12, resume=True)  # extended from its last checkpoint
    assert run.resumed_from == 7 and out.status == "complete"
    assert read_text(str(part / "records.csv")) == read_text(str(whole / "records.csv"))
    run, out = _run(part, 12, resume=True)  # done: nothing left to compute
    assert run.computed == 0 and len(run.records) == 12


def test_settings_and_folder_checks(tmp_path):
    _run(tmp_path / "r", 5)
    with pytest.raises(SettingsChangedError, match="setting lr differs"):
        check_resume_settings({"lr": 0.3, "iters": 5}, {"lr": 0.2, "iters": 5}, "r")
    with pytest.raises(SettingsChangedError, match="extended, not shortened"):
        check_resume_settings({"lr": 0.3, "iters": 5}, {"lr": 0.3, "iters": 4}, "r")
    with pytest.raises(Exception, match="already holds a run"):
        _run(tmp_path / "r", 5)


def test_divergence_keeps_the_records_before(tmp_path):
    run, out = _run(tmp_path / "d", 200, lr=3.0)
    assert out.status == "diverged" and out.diverged_at == len(run.records) + 1
    assert len(_keep(str(tmp_path / "d" / "records.csv"), 10**6)) == len(run.records)


def test_run_options_take_keywords_and_refuse_unknown_ones():
    from crosscurv.numeric.trajectory import RunOptions

    opts = RunOptions.of(RunOptions(seed=3, out_dir="o"), {"resume": True}, "advise")
    assert (opts.seed, opts.out_dir, opts.resume, opts.hvp_method) == (3, "o", True, "auto")
    with pytest.raises(TypeError, match="advise\\(\\) got an unexpected keyword argument 'sede'"):
        RunOptions.of(None, {"sede": 1}, "advise")


def test_the_numeric_layer_imports_no_plotting():
    import crosscurv.numeric as numeric

    root = os.path.dirname(numeric.__file__)
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    assert "import matplotlib" not in fh.read(), name


def test_run_protocol_and_advise_take_one_options_object():
    from crosscurv.experiments.problems.zoo import logistic
    from crosscurv.numeric.advice import advise
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.trajectory import RunOptions

    opts = RunOptions(seed=1, hvp_method="reverse")
    a = run_protocol(logistic(), "gs", 1.0, 3, options=opts)
    b = run_protocol(logistic(), "gs", 1.0, 3, seed=1, hvp_method="reverse")
    assert a.records == b.records and a.summary["settings"]["seed"] == 1
    c = advise(logistic(), 1.0, 3, "jc;gs", options=opts)
    d = advise(logistic(), 1.0, 3, "jc;gs", seed=1, hvp_method="reverse")
    assert c.per_iteration == d.per_iteration and c.settings["hvp"] == "reverse"
