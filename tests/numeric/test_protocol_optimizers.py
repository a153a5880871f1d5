"""The controlled protocol with a block-separable optimizer (``optimizer=``, ``block_lr=``).

Checked against the plain in-memory reference loop of :mod:`crosscurv.numeric.optimizer_estimates`
(same runs, same estimates), for bit-for-bit resume and extension with the optimizer state in the
checkpoint, for the plain path (``sgd`` without factors: the paper's records exactly), and for the
generalized magnitude bound.
"""

from __future__ import annotations

import math
import os

import pytest
import torch

from crosscurv.numeric import Task
from crosscurv.numeric.estimates import bound_bk
from crosscurv.numeric.optimizer_estimates import optimizer_bound, run_optimizer_estimates
from crosscurv.numeric.optimizers import OptimizerError, parse_optimizer
from crosscurv.numeric.protocol import ResumeError, SettingsChangedError, run_protocol
from crosscurv.numeric.records import read_summary
from tests.numeric.cases import tanh_mlp
from crosscurv.theory.patterns import parse_pattern

LR, K = 0.05, 6
PATTERN = "2<-1,4<-2"  # partial: blocks 3 and 4 see block 1 stale
FACTORS = "layer1=4,layer3=0.5"
FACTOR_LIST = [4.0, 1.0, 0.5, 1.0]
SPECS = ["sgd", "momentum:0.9", "adam", "adam:0.8,0.99,1e-3"]


class Kill(Exception):
    pass


def _kill_after(n):
    def hook(rec):
        if rec["k"] == n:
            raise Kill(f"killed after {n}")

    return hook


def _bytes(path):
    with open(path, "rb") as fh:
        return fh.read()


def _run(spec, **kw):
    task = tanh_mlp()
    return run_protocol(task, parse_pattern(PATTERN, task.n_blocks), LR, kw.pop("iters", K),
                        optimizer=spec, block_lr=kw.pop("block_lr", FACTORS), **kw)


@pytest.mark.parametrize("spec", SPECS)
def test_protocol_records_are_the_reference_loop(spec):
    res = _run(spec, hvp_method="reverse")
    assert res.status == "complete"
    task = tanh_mlp()
    ref = run_optimizer_estimates(task, parse_pattern(PATTERN, task.n_blocks), LR, K, spec,
                                  FACTOR_LIST, method="reverse")
    for a, b in zip(res.records, ref, strict=True):
        for c in ("loss_jc", "loss_s", "recursive", "cumulative", "jc_only"):
            assert math.isclose(a[c], b[c], rel_tol=1e-10, abs_tol=1e-15), (spec, a["k"], c, a[c],
                                                                            b[c])
        # the protocol's gap is the segment integral (no cancellation), within its error estimate of
        # the difference; Adam moves every coordinate by ~lr, the runs drift apart and the 5-point
        # rule leaves the regime where |Lobatto - Simpson| bounds its error (found here: 4.4e-8
        # against gap_err 1.6e-8 at k = 6 for adam:0.8,0.99,1e-3, 5e-6 of the gap)
        slack = a["gap_err"] if not spec.startswith("adam") else max(a["gap_err"], 1e-5 * abs(b[
            "gap"]))
        assert abs(a["gap"] - b["gap"]) <= slack + 1e-15, (spec, a, b)
        assert a["recursive"] != 0.0 and a["cumulative"] != 0.0
    s = res.summary["settings"]
    assert s["optimizer"] == parse_optimizer(spec).to_dict()
    assert s["block_lr"] == {"layer1": 4.0, "layer3": 0.5}
    if spec.startswith("adam"):
        assert all(math.isnan(r["bound_bk"]) for r in res.records)
    else:
        assert all(math.isfinite(r["bound_bk"]) and r["bound_bk"] > 0 for r in res.records)


@pytest.mark.parametrize("spec", ["momentum:0.9", "adam"])
def test_batched_engine_and_offloading_agree(spec, tmp_path):
    a = _run(spec, hvp_method="reverse")
    b = _run(spec, hvp_method="forward")
    c = _run(spec, offload=True, out_dir=str(tmp_path / "off"))
    for ra, rb in zip(a.records, b.records, strict=True):
        for f in ("loss_jc", "loss_s", "recursive", "cumulative", "jc_only"):
            assert math.isclose(ra[f], rb[f], rel_tol=1e-9, abs_tol=1e-15), (f, ra, rb)
    assert c.records == a.records  # parking off the device is lossless
    assert sorted(os.listdir(tmp_path / "off")) == ["checkpoint.pt", "records.csv", "summary.json"]


@pytest.mark.parametrize("spec", ["momentum:0.9", "adam"])
def test_resume_and_extension_are_bit_for_bit_with_the_optimizer_state(spec, tmp_path):
    ref_out = str(tmp_path / "ref")
    ref = _run(spec, out_dir=ref_out)
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        _run(spec, out_dir=out, checkpoint_every=2, on_record=_kill_after(4))
    ck = torch.load(os.path.join(out, "checkpoint.pt"), weights_only=True)
    names = {"momentum:0.9": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq")}[spec]
    for g in ("sj", "ss", "zs", "ys"):
        for b in names:
            assert isinstance(ck["vectors"][f"{g}.{b}"], dict), (g, b)
    res = _run(spec, out_dir=out, resume=True, checkpoint_every=2)
    assert res.summary["timing"]["resumed_from"] == 2
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    # extension: a 3-iteration run resumed to K equals the K-iteration run
    ext = str(tmp_path / "ext")
    _run(spec, out_dir=ext, iters=3)
    _run(spec, out_dir=ext, iters=K, resume=True)
    assert _bytes(os.path.join(ext, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    assert read_summary(os.path.join(ext, "summary.json"))["metrics"] == ref.summary["metrics"]


def test_resume_refuses_another_optimizer_or_factor(tmp_path):
    out = str(tmp_path / "run")
    _run("momentum:0.9", out_dir=out, iters=2)
    with pytest.raises(SettingsChangedError, match="optimizer"):
        _run("momentum:0.5", out_dir=out, iters=2, resume=True)
    with pytest.raises(SettingsChangedError, match="block_lr"):
        _run("momentum:0.9", out_dir=out, iters=2, resume=True, block_lr="layer1=2")
    with pytest.raises(SettingsChangedError, match="optimizer"):
        _run("sgd", out_dir=out, iters=2, resume=True)


def test_plain_sgd_is_the_papers_protocol_exactly(tmp_path):
    """``sgd`` and factors of 1 take the original path: the records are those of a run without the
    arguments."""
    task = tanh_mlp()
    plain = run_protocol(task, PATTERN, LR, K)
    for kw in ({"optimizer": "sgd"}, {"optimizer": "sgd", "block_lr": "layer2=1"}, {
            "block_lr": {}}):
        assert run_protocol(tanh_mlp(), PATTERN, LR, K, **kw).records == plain.records
    assert plain.summary["settings"]["optimizer"] == {"name": "sgd", "spec": "sgd"}
    assert plain.summary["settings"]["block_lr"] == {}
    # differs from a run with a factor (the generalized path is not a no-op)
    assert run_protocol(tanh_mlp(), PATTERN, LR, K, block_lr="layer2=2").records != plain.records


def test_a_run_from_before_the_optimizer_settings_resumes(tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        run_protocol(tanh_mlp(), PATTERN, LR, K, out_dir=out, checkpoint_every=1,
                     on_record=_kill_after(3))
    path = os.path.join(out, "checkpoint.pt")
    ck = torch.load(path, weights_only=True)
    for key in ("optimizer", "block_lr"):
        del ck["settings"][key]
    torch.save(ck, path)
    res = run_protocol(tanh_mlp(), PATTERN, LR, K, out_dir=out, resume=True)
    assert res.status == "complete" and res.records == run_protocol(tanh_mlp(), PATTERN, LR,
                                                                    K).records
    with pytest.raises(SettingsChangedError, match="optimizer"):
        run_protocol(tanh_mlp(), PATTERN, LR, K, out_dir=out, resume=True, optimizer="adam")


def test_a_checkpoint_without_the_optimizer_state_is_refused_in_one_line(tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        _run("adam", out_dir=out, checkpoint_every=1, on_record=_kill_after(3))
    path = os.path.join(out, "checkpoint.pt")
    ck = torch.load(path, weights_only=True)
    del ck["vectors"]["zs.exp_avg"]
    torch.save(ck, path)
    with pytest.raises(ResumeError, match="optimizer state") as err:
        _run("adam", out_dir=out, resume=True)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kw,needle", [
    ({"optimizer": "rmsprop"}, "unknown optimizer"),
    ({"optimizer": "momentum:1.5"}, "0 <= BETA < 1"),
    ({"block_lr": "nosuch=2"}, "unknown block"),
    ({"block_lr": "layer1=0"}, "> 0"),
])
def test_bad_optimizer_input_is_one_line(kw, needle):
    with pytest.raises(OptimizerError, match=needle) as err:
        run_protocol(tanh_mlp(), PATTERN, LR, 2, **kw)
    assert "\n" not in str(err.value)


def test_bound_reduces_to_the_papers_and_majorizes_the_cumulative_estimate():
    norms = [0.3, 1.2, 0.7, 2.0]
    assert math.isclose(optimizer_bound(parse_optimizer("sgd"), norms, 0.1, 1.0, 2.0, 3.0),
                        bound_bk(norms, 0.1, 2.0, 3.0), rel_tol=1e-14)
    # a convex quadratic: the power iteration finds ||H|| and G bounds every gradient, so the bound
    # majorizes the linearized gap the cumulative estimate measures (heavy ball with a block factor)
    gen = torch.Generator().manual_seed(3)
    Q = torch.randn(4, 4, generator=gen, dtype=torch.float64)
    A = Q @ Q.T / 4 + 0.5 * torch.eye(4, dtype=torch.float64)
    b = torch.randn(4, generator=gen, dtype=torch.float64)

    def loss(p):
        x = torch.cat([p["x1"], p["x2"]])
        return 0.5 * x @ (A @ x) - b @ x

    x0 = torch.randn(4, generator=gen, dtype=torch.float64)
    task = Task({"x1": x0[:2].clone(), "x2": x0[2:].clone()}, loss, {"x1": ["x1"], "x2": ["x2"]})
    res = run_protocol(task, "gs", 0.05, 40, optimizer="momentum:0.8", block_lr="x2=2")
    for r in res.records[5:]:  # after the power iteration has converged
        assert abs(r["cumulative"]) <= r["bound_bk"], r


@pytest.mark.portable
@pytest.mark.parametrize("name,label", [("tiny_mlp", "partial"), ("lora_bilinear", "gs")])
@pytest.mark.parametrize("kw", [{}, {"optimizer": "sgd"}])
def test_plain_records_are_those_of_the_protocol_before_optimizers(tmp_path, name, label, kw):
    """``tests/numeric/data/plain_*.csv`` were written by the protocol before it took optimizers
    (float64 golden cases, seed 0; their ``gap``/``gap_err`` since brought up to date by
    :func:`crosscurv.numeric.gap.reconcile`, the columns measured since then NaN); the plain path
    must reproduce them within the float64 record tolerances (the file was written on another CPU:
    its last digits depend on the kernels; bitwise agreement is promised only within one machine,
    tested by the resume and extension tests)."""
    from crosscurv.experiments.conformance.golden import build_case, case_task
    from crosscurv.numeric.record_comparison import compare_records, reference_tolerances
    from crosscurv.numeric.records import read_records, records_columns

    case = build_case(name)
    res = run_protocol(case_task(case), case.patterns[label], case.lr, case.iters, seed=0, **kw)
    expected = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                            f"plain_{name}_{label}.csv")
    ref = records_columns(read_records(expected))
    mine = records_columns(res.records)
    assert mine["k"] == ref["k"]
    comp = compare_records(mine, ref, tolerances=reference_tolerances(ref, "float64"))
    assert comp.ok, comp.first


@pytest.mark.parametrize("spec", ["momentum:0.9", "adam"])
def test_optimizer_error_columns_are_the_defect_bar_and_survive_a_resume(spec, tmp_path):
    """The error columns of an optimizer run: the symmetric bar of the defect interval of the
    records before (inf for the first DEFECT_WINDOW), equal to what the columns give afterwards; the
    certificates those of crosscurv.numeric.certificate inside the optimizer's regime (never for
    Adam); a run killed after its window filled resumes to the same bytes."""
    from crosscurv.numeric.certificate import CertificateState
    from crosscurv.numeric.error_estimates import DEFECT_WINDOW, defect_error, defect_interval
    from crosscurv.numeric.optimizer_estimates import optimizer_in_regime
    from crosscurv.numeric.records import ESTIMATES, read_records, records_columns

    n = DEFECT_WINDOW + 4
    ref_out = str(tmp_path / "ref")
    res = _run(spec, out_dir=ref_out, iters=n)
    cols = records_columns(res.records)
    opt = parse_optimizer(spec)
    for name in ESTIMATES:
        bars = [defect_error(lo, hi) for lo, hi in defect_interval(cols["gap"], cols[name])]
        assert cols[f"{name}_err"] == bars, name
        assert all(math.isinf(e) for e in bars[:DEFECT_WINDOW]) and all(math.isfinite(e)
            for e in bars[DEFECT_WINDOW:])
    state = CertificateState()
    # the certificate of crosscurv.numeric.certificate, with the optimizer's regime
    for r in res.records:
        want = state.record(r, optimizer_in_regime(opt, LR, 4.0, r["lambda_max"]))
        assert all(r[f"{name}_cert"] == want[name] for name in ESTIMATES), (r["k"], want)
    if spec == "adam":
        assert all(r[f"{e}_cert"] == 0.0 for r in res.records for e in ESTIMATES)
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        _run(spec, out_dir=out, iters=n, checkpoint_every=2, on_record=_kill_after(DEFECT_WINDOW
                                                                                   + 2))
    _run(spec, out_dir=out, iters=n, resume=True, checkpoint_every=2)
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    assert records_columns(read_records(os.path.join(out, "records.csv")))["k"] == list(range(1, n
                                                                                              + 1))


@pytest.mark.parametrize("spec,beta", [("sgd", 0.0), ("momentum:0.5", 0.5), ("momentum:0.9", 0.9)])
def test_the_edge_curvature_is_where_the_step_stops_contracting_a_quadratic(spec, beta):
    """On ``lambda/2 x^2`` the optimizer's step (its own update, torch.optim's arithmetic) contracts
    just below ``edge_curvature`` and grows just above it; Adam's is not derived (NaN)."""
    from crosscurv.numeric.optimizers import OptimizerState
    from crosscurv.numeric.optimizers.rules import RULES

    opt = parse_optimizer(spec)
    lr, f_max = 0.1, 2.0
    edge = opt.rule.edge_curvature(opt, lr, f_max)
    assert math.isclose(edge, 2.0 * (1.0 + beta) / (lr * f_max))

    def size_after(lam, steps=400):
        x = {"x": torch.tensor([1.0], dtype=torch.float64)}
        state = OptimizerState(0, {})
        for _ in range(steps):
            new = OptimizerState(state.step + 1, {})
            x = opt.rule.update(opt, ["x"], x, {"x": lam * x["x"]}, state, new, {"x": lr * f_max})
            state = new
        return abs(float(x["x"]))

    assert size_after(0.98 * edge) < 1.0 < size_after(1.02 * edge)
    adam = parse_optimizer("adam")
    assert math.isnan(RULES["adam"].edge_curvature(adam, lr, f_max))
