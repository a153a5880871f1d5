"""The motivation study (crosscurv.experiments.motivation): the practical steps, the criterion,
records, resume, CLI.

Exactness claims are checked against the suite's exact scheme steps (crosscurv.numeric.scheme_step)
in float64; the optimizer-aware criterion against the measured one-step difference as eta -> 0; the
CLI in a subprocess with the smoke preset.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from crosscurv.experiments.motivation import fl, lora, mlp
from crosscurv.experiments.motivation.analysis import agreement, reversal
from crosscurv.experiments.motivation.criterion import probe_point
from crosscurv.experiments.motivation.presets import panel_settings
from crosscurv.experiments.motivation.records import read_table
from crosscurv.experiments.motivation.runner import MotivationError, run_panel
from crosscurv.numeric import Task, scheme_step
from crosscurv.numeric.optimizers import functional_optimizer
from crosscurv.theory.patterns import parse_pattern

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F64 = torch.float64


def SGD(lr, **kw):
    return functional_optimizer("sgd", lr, **kw)


def Adam(lr, **kw):
    return functional_optimizer("adam", lr, **kw)


def _close(a, b, tol=1e-12):
    return all(float((a[k] - b[k]).abs().max()) <= tol * (1 + float(b[k].abs().max())) for k in a)


# -- panel (a): the three back-propagation steps ----------------------------------------
def _tiny_mlp():
    gen = torch.Generator().manual_seed(3)
    params = mlp.mlp_params((6, 5, 5, 4, 3), 1, F64)
    params = {k: v + 0.1 * torch.randn(v.shape, generator=gen, dtype=F64) for k,
              v in params.items()}
    x = torch.randn(7, 6, generator=gen, dtype=F64)
    y = torch.arange(7) % 3
    return mlp.mlp_task(params, x, y), x, y


def test_mlp_jc_and_exact_gs_are_the_exact_schemes_and_inplace_is_neither():
    task, x, y = _tiny_mlp()
    lr = 0.3
    opt = SGD(lr)
    p = task.params
    outs = {name: fn(p, x, y, opt, opt.init_state(p))[0]
            for name, fn in (("jc", mlp.step_jc), ("gs", mlp.step_exact_gs), ("inplace",
                                                                              mlp.step_inplace))}
    jc = scheme_step(task, p, parse_pattern("jc", 4), lr)
    gs = scheme_step(task, p, parse_pattern(task.default_pattern, 4, task.block_names), lr)
    assert task.default_pattern == "gs:layer4,layer3,layer2,layer1"
    assert _close(outs["jc"], jc) and _close(outs["gs"], gs)
    assert not _close(outs["inplace"], jc, 1e-6) and not _close(outs["inplace"], gs, 1e-6)
    # the output layer sees no fresher block: all three agree there
    assert _close({"w": outs["inplace"]["layer4.weight"]}, {"w": jc["layer4.weight"]})


# -- panel (b): FedAlt with one step per phase is GS personal -> shared, FedSim is JC ------
@pytest.fixture(scope="module")
def fl_client():
    from crosscurv.experiments.tasks.data import load_cifar10
    from crosscurv.experiments.tasks.models.resnet import FederatedResNet18

    data = load_cifar10(3, dtype=F64)
    torch.manual_seed(0)
    model = FederatedResNet18(1, 2)
    fl.plain_convolutions(model)
    model = model.to(F64).eval()
    for q in model.parameters():
        q.requires_grad_(False)
    named = {k: q.detach().clone() for k, q in model.named_parameters()}
    u = {k: t for k, t in named.items() if k.startswith("shared.")}
    v = {k: t for k, t in named.items() if k.startswith("client0.")}
    x = data.x.contiguous()
    return model, u, v, x, data.y


def test_fedalt_one_step_per_phase_is_gs_and_fedsim_is_jc(fl_client):
    model, u, v, x, y = fl_client
    wd, lr = 1e-2, 0.05
    task = fl.client_task(model, u, v, x, y, wd)
    # fresh buffer: the first step has no momentum term
    opt = SGD(lr, momentum=0.9, weight_decay=wd)
    uu, vv, _, _ = fl.local_alt_step(model, u, v, x, y, opt, opt.init_state(None))
    su, sv, _, _ = fl.local_sim_step(model, u, v, x, y, opt, opt.init_state(None))
    gs = scheme_step(task, task.params, parse_pattern("gs", 2, task.block_names), lr)
    jc = scheme_step(task, task.params, parse_pattern("jc", 2), lr)
    assert _close({**vv, **uu}, gs, 1e-10) and _close({**sv, **su}, jc, 1e-10)
    assert not _close({**vv, **uu}, jc, 1e-6)


def test_dirichlet_split_partitions_every_example_once():
    labels = [i % 5 for i in range(40)]
    parts = fl.dirichlet_split(labels, 4, 0.5, seed=3)
    again = fl.dirichlet_split(labels, 4, 0.5, seed=3)
    flat = sorted(int(i) for p in parts for i in p)
    assert flat == list(range(40)) and min(len(p) for p in parts) >= 1
    assert all(torch.equal(a, b) for a, b in zip(parts, again))
    with pytest.raises(Exception, match="Dirichlet"):
        fl.dirichlet_split([0, 1], 5, 0.5, seed=0)


# -- panel (c): alternating LoRA is gs:B,A ------------------------------------------------
@pytest.fixture(scope="module")
def lora_small():
    s = {"t5": {"d_model": 16, "d_kv": 4, "num_heads": 2, "d_ff": 16, "num_layers": 1}, "rank": 2,
         "alpha": 4, "dropout": 0.1, "examples": 2, "examples_full": 2, "seq_len": 12}
    lm, params, blocks, _ = lora.lora_model(s, 0, dtype=F64)
    gen = torch.Generator().manual_seed(1)
    # B != 0
    params = {k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=F64) for k,
              v in params.items()}
    idx = torch.arange(2)
    task = Task(params, lambda q: lm.loss(q, idx), blocks, "lora", {}, "gs")
    return lm, task, blocks, idx


def test_alternating_lora_is_gs_b_then_a_and_simultaneous_is_jc(lora_small):
    lm, task, blocks, idx = lora_small
    lr = 0.05
    opt = SGD(lr)
    alt = lora.step_alternating(lm, task.params, blocks, idx, opt, opt.init_state(None))[0]
    sim = lora.step_simultaneous(lm, task.params, blocks, idx, opt, opt.init_state(None))[0]
    assert _close(alt, scheme_step(task, task.params, parse_pattern("gs:B,A", 2, task.block_names),
                                   lr))
    assert _close(sim, scheme_step(task, task.params, parse_pattern("jc", 2), lr))


def test_adapter_dropout_is_seeded_and_shared_by_the_fresh_pass(lora_small):
    lm, task, _, idx = lora_small
    a, b = lm.loss(task.params, idx, 7), lm.loss(task.params, idx, 7)
    c, plain = lm.loss(task.params, idx, 8), lm.loss(task.params, idx)
    assert float(a) == float(b) and float(a) != float(c) and float(plain) != float(a)


# -- the criterion -------------------------------------------------------------------------
def _smooth_task():
    gen = torch.Generator().manual_seed(2)
    A = torch.randn(5, 5, generator=gen, dtype=F64)
    A = A @ A.T / 5 + torch.eye(5, dtype=F64)
    p = {"x": torch.randn(2, generator=gen, dtype=F64), "y": torch.randn(3, generator=gen,
                                                                         dtype=F64)}

    def loss(q):
        t = torch.cat([q["x"], q["y"]])
        return 0.5 * t @ A @ t + (t**4).sum() / 10 + torch.sin(t).sum()

    return Task(p, loss, {"bx": ["x"], "by": ["y"]}, "smooth", {}, "gs")


@pytest.mark.portable
@pytest.mark.parametrize("make_opt,zero_leading", [
    (lambda lr: SGD(lr), False), (lambda lr: SGD(lr, momentum=0.9, weight_decay=0.1), False),
    (lambda lr: Adam(lr), False),
    # the criterion is zero in exact arithmetic (2.8e-21 or 0.0 measured)
    (lambda lr: SGD(lr, clip=0.5), True),
])
def test_optimizer_aware_criterion_is_the_leading_term_of_the_practical_gap(make_opt, zero_leading):
    """``L(seq) - L(sim) = eta^2 g^T J M_S d + O(eta^3)`` for the optimiser's own steps (momentum
    buffer and Adam moments non-zero, clipping active): the ratio tends to 1, the error falls like
    eta^3.

    With clipping active the criterion is zero in exact arithmetic; its computed value is rounding
    (2.8e-21 on one CPU, exactly 0.0 on another), so it is compared with a bound of eps times the
    size of its terms (``eta^2 ||g||^2``), and the practical gap must then be ``O(eta^3)``."""
    from crosscurv.numeric import block_grad

    task = _smooth_task()
    g = block_grad(task.loss, task.params, list(task.params))
    g2 = sum(float((v * v).sum()) for v in g.values())
    gen = torch.Generator().manual_seed(5)
    prev = {k: torch.randn(v.shape, generator=gen, dtype=F64) for k, v in task.params.items()}
    keys = list(task.params)
    errs, etas = [], [0.02 * 2.0**-i for i in range(4)]
    for lr in etas:
        opt = make_opt(lr)
        _, st = opt.update(task.params, prev, opt.init_state(None))  # a state with history

        def seq(p, opt=opt, st=st):
            _, g = task_grad(task, p, ["x"])
            p1, s1 = opt.update(p, g, st)
            _, g2 = task_grad(task, p1, ["y"])
            return opt.update(p1, g2, s1)[0]

        def sim(p, opt=opt, st=st):
            _, g = task_grad(task, p, keys)
            return opt.update(p, g, st)[0]

        row = probe_point(task, task.params, lr, opt, st, seq, sim)
        errs.append(abs(row["meas_seq"] - row["est"]))
        # rounding of a sum of eta^2 g^T(..)-sized terms
        rounding = 64 * torch.finfo(F64).eps * lr**2 * g2
        assert (abs(row["est"]) <= rounding) == zero_leading, (row["est"], rounding)
    rates = [math.log2(errs[i] / errs[i + 1]) for i in range(len(errs) - 1)]
    assert min(rates) > 2.6, (errs, rates)  # O(eta^3) remainder: the eta^2 term is right


def task_grad(task, p, keys):
    from crosscurv.numeric import block_grad

    return None, block_grad(task.loss, p, keys)


def test_plain_sgd_criterion_equals_c_s_and_exact_gap_is_measured():
    task = _smooth_task()
    lr = 1e-3
    opt = SGD(lr)

    def seq(p):
        return scheme_step(task, p, parse_pattern("gs", 2), lr)

    def sim(p):
        return scheme_step(task, p, parse_pattern("jc", 2), lr)

    row = probe_point(task, task.params, lr, opt, opt.init_state(None), seq, sim)
    assert row["C_opt"] == pytest.approx(row["C_S"], rel=1e-12)
    assert row["meas_seq"] == pytest.approx(row["meas_plain"], rel=1e-9)
    assert row["meas_plain"] == pytest.approx(row["est_plain"], rel=0.05)


# -- analysis --------------------------------------------------------------------------------
def _rows(diffs):
    nan = float("nan")
    return [{"k": i + 1, "eval_seq": 1 + d, "eval_sim": 1.0, "eval_diff": d, "eval_gs": nan} for i,
            d in enumerate(diffs)]


def test_reversal_and_agreement_counts():
    yes = reversal(_rows([-1, -1, -0.5, 0.2, 0.3, 0.4]))
    assert yes["reversal"] and yes["last_change"] == 4
    no = reversal(_rows([-1, -1, -1, -1, -1, -1]))
    assert not no["reversal"] and no["last_change"] is None
    probes = [{"est_plain": 1.0, "meas_plain": 2.0, "est": -1.0, "meas_seq": 1.0, "meas_gs": float(
        "nan"), "meas_plain_8": -1.0},
              {"est_plain": 0.0, "meas_plain": 2.0, "est": 1.0, "meas_seq": 1.0, "meas_gs": float(
              "nan"), "meas_plain_8": 0.0}]
    a = agreement(probes)
    assert a["Thm 1 on the exact plain steps"]["agree"] == 1
    assert a["optimizer-aware on the practical steps"]["agree"] == 1
    # a 0 estimate agrees with a measured 0 only
    assert a["Thm 1 on the exact plain steps at eta/8"]["agree"] == 1
    assert "optimizer-aware on exact GS (mlp)" not in a


# -- runner: streaming, resume bit for bit ------------------------------------------------
class _Stop(Exception):
    pass


def test_interrupted_run_resumes_bit_for_bit(tmp_path):
    s = panel_settings("mlp", "smoke")
    full, cut = str(tmp_path / "full"), str(tmp_path / "cut")
    run_panel("mlp", s, 0, full, checkpoint_every=3)

    def stop(k, n):
        if k == 5:
            raise _Stop

    with pytest.raises(_Stop):
        run_panel("mlp", s, 0, cut, checkpoint_every=3, progress=stop)
    # rows 4-5 are past the checkpoint
    assert len(read_table(os.path.join(cut, "records.csv"))[1]) == 5
    with open(os.path.join(cut, "records.csv"), "a") as fh:
        fh.write("6,0.7,2.3")  # a torn line from a kill
    with pytest.raises(MotivationError, match="--resume"):
        run_panel("mlp", s, 0, cut)
    res = run_panel("mlp", s, 0, cut, resume=True, checkpoint_every=3)
    assert res.summary["timing"]["resumed_from"] == 3
    for f in ("records.csv", "probes.csv"):
        assert open(os.path.join(full, f)).read() == open(os.path.join(cut, f)).read()
    fields, rows = read_table(os.path.join(full, "records.csv"))
    assert len(rows) == s["steps"] and [r["k"] for r in rows] == list(range(1, s["steps"] + 1))
    assert all(math.isfinite(r["loss_seq"]) and math.isfinite(r["loss_gs"]) for r in rows)
    assert len(read_table(os.path.join(full, "probes.csv"))[1]) == 2


# -- the command line ------------------------------------------------------------------------
def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "crosscurv", "motivation", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_cli_runs_a_panel_writes_the_report_and_resumes(tmp_path, capsys):
    out, rep = str(tmp_path / "runs"), str(tmp_path / "rep")
    r = _cli("--panel", "fl", "--preset", "smoke", "--out", out, "--report", rep, "--no-verdicts")
    assert r.returncode == 0, r.stderr
    assert "k=2/2 (100%)" in r.stderr
    rows = read_table(os.path.join(out, "fl", "seed0", "records.csv"))[1]
    assert len(rows) == 2 and all(math.isfinite(x["eval_diff"]) for x in rows)
    md = open(os.path.join(rep, "motivation.md")).read()
    assert "## Does the reversal appear?" in md and "| fl " in md
    assert md.splitlines()[2].startswith("- fl: the reversal in ") and "## Findings in detail" in md
    assert os.path.getsize(os.path.join(rep, "figures", "motivation_figure1.png")) > 10_000
    from crosscurv.experiments.cli import main

    assert main(["motivation", "--panel", "fl", "--preset", "smoke", "--out", out,
                 "--no-verdicts"]) == 0
    assert "complete run found" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--data", "/nonexistent"], "--data is per panel"),
    (["--panel", "mlp", "--model", "x"], "--model"),
    (["--panel", "mlp", "--seeds", "a,b"], "--seeds"),
    (["--panel", "mlp", "--seed", "1", "--seeds", "1"], "not both"),
    (["--panel", "mlp", "--data", "/nonexistent/mnist"], "does not exist"),
    (["--panel", "fl", "--preset", "paper"], "needs the CIFAR-10 training set"),
    (["--panel", "nope"], "invalid choice"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    from crosscurv.experiments.cli import main

    assert main(["motivation", *args, "--out", str(tmp_path / "o"), "--no-verdicts"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error:") and message in lines[
        0], lines


def test_cli_refuses_existing_records_without_resume(tmp_path, capsys):
    from crosscurv.experiments.cli import main

    out = tmp_path / "o"
    d = out / "mlp" / "seed0"
    d.mkdir(parents=True)
    (d / "records.csv").write_text("k,epoch\n1,0.1\n")
    assert main(["motivation", "--panel", "mlp", "--preset", "smoke", "--out", str(out),
                 "--no-verdicts"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--resume" in err[0]
    assert (d / "records.csv").read_text() == "k,epoch\n1,0.1\n"  # nothing overwritten
