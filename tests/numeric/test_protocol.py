"""The controlled protocol: exact zeros for JC, streaming, bit-for-bit resume, divergence, refusals.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from crosscurv.numeric import Task
from crosscurv.numeric.offload import Offloaded, Resident
from crosscurv.numeric.paper_estimates import _Parked
from crosscurv.numeric.protocol import ProtocolError, ResumeError, run_protocol
from crosscurv.numeric.records import read_records, read_summary
from crosscurv.numeric.task import TaskError
from crosscurv.theory.patterns import PatternError, from_pairs, gauss_seidel, jacobi
from tests.numeric.cases import dense_hessian, tanh_mlp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LR, K = 0.3, 8


class Kill(Exception):
    """Stands in for a kill: raised from the on_record hook."""


def _kill_after(n):
    def hook(rec):
        if rec["k"] == n:
            raise Kill(f"killed after {n} records")

    return hook


def _bytes(path):
    with open(path, "rb") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run (records.csv bytes and summary) to compare against."""
    out = str(tmp_path_factory.mktemp("ref") / "run")
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out)
    assert res.status == "complete"
    return out, res


def test_jacobi_pattern_gives_exact_zeros():
    task = tanh_mlp()
    res = run_protocol(task, jacobi(4), 0.3, 5)
    assert len(res.records) == 5
    for r in res.records:
        assert r["loss_s"] == r["loss_jc"]
        for f in ("gap", "gap_err", "recursive", "cumulative", "jc_only", "bound_bk"):
            assert r[f] == 0.0, (f, r)
    m = res.summary["metrics"]["cumulative"]
    assert m["correct"] == 100.0 and m["ties"] == 5 and m["jc_hits"] == [0, 0]


def test_records_stream_and_an_interrupted_run_keeps_complete_rows(tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, on_record=_kill_after(3))
    rows = read_records(os.path.join(out, "records.csv"))
    assert [r["k"] for r in rows] == [1, 2, 3]
    s = read_summary(os.path.join(out, "summary.json"))
    assert s["status"] == "interrupted" and "Kill" in s["message"] and s["records"] == 3


@pytest.mark.parametrize("every,kill_at", [(1, 5), (3, 5)])
def test_resume_equals_uninterrupted_bit_for_bit(tmp_path, reference, every, kill_at):
    ref_out, ref = reference
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, checkpoint_every=every,
                     on_record=_kill_after(kill_at))
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, resume=True,
                       checkpoint_every=every)
    assert res.status == "complete"
    # the kill came after row `kill_at` was written but before its checkpoint; rows after the
    # last checkpoint were truncated and recomputed
    assert res.summary["timing"]["resumed_from"] == ((kill_at - 1) // every) * every
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    assert res.records == ref.records
    assert res.summary["metrics"] == ref.summary["metrics"]
    assert res.summary["constants"] == ref.summary["constants"]


@pytest.mark.parametrize("offload", [False, True])
def test_resume_after_a_hard_kill_of_the_process(tmp_path, reference, offload):
    ref_out, _ = reference
    out = str(tmp_path / "run")
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {REPO!r})
        from tests.numeric.cases import dense_hessian, tanh_mlp
        from crosscurv.numeric.protocol import run_protocol
        from crosscurv.theory.patterns import gauss_seidel

        def hook(rec):
            if rec["k"] == 4:  # after the row is flushed, before its checkpoint
                os.kill(os.getpid(), signal.SIGKILL)

        run_protocol(tanh_mlp(), gauss_seidel(4), {LR}, {K}, out_dir=sys.argv[1], on_record=hook, \
offload={offload},
                     checkpoint_every=1)
    """))
    # the killed process runs with this process's thread count, whatever an earlier in-process CLI
    # call left in the environment: the resume compares the two
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.run([sys.executable, str(script), out], cwd=REPO, capture_output=True,
                          timeout=120, env=env)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert [r["k"] for r in read_records(os.path.join(out, "records.csv"))] == [1, 2, 3, 4]
    stale = [d for d in os.listdir(out) if d.startswith(".offload-")]
    assert len(stale) == (1 if offload else 0)  # the killed run could not clean up
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, resume=True,
                       offload=offload)
    assert res.summary["timing"]["resumed_from"] == 3
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    # stale folder removed
    assert sorted(os.listdir(out)) == ["checkpoint.pt", "records.csv", "summary.json"]


def test_resuming_a_complete_run_computes_nothing(reference, tmp_path):
    ref_out, ref = reference
    out = str(tmp_path / "run")
    run_protocol(tanh_mlp(), gauss_seidel(4), LR, 3, out_dir=out)
    before = _bytes(os.path.join(out, "records.csv"))
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, 3, out_dir=out, resume=True)
    assert res.status == "complete" and res.summary["timing"]["iterations_this_session"] == 0
    assert _bytes(os.path.join(out, "records.csv")) == before
    assert res.records == ref.records[:3]


def test_resume_refuses_different_settings(tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, on_record=_kill_after(2))
    before = _bytes(os.path.join(out, "records.csv"))
    with pytest.raises(ResumeError, match="setting lr "):
        run_protocol(tanh_mlp(), gauss_seidel(4), 0.2, K, out_dir=out, resume=True)
    with pytest.raises(ResumeError, match="setting pattern "):
        run_protocol(tanh_mlp(), from_pairs(4, [(1, 0)]), LR, K, out_dir=out, resume=True)
    with pytest.raises(ResumeError, match="setting theta0_sha256 "):
        run_protocol(tanh_mlp(seed=1), gauss_seidel(4), LR, K, out_dir=out, resume=True)
    with pytest.raises(ResumeError, match="extended, not shortened"):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K - 1, out_dir=out, resume=True)
    assert _bytes(os.path.join(out, "records.csv")) == before  # nothing touched


def test_existing_run_is_never_overwritten_and_missing_checkpoint_is_refused(tmp_path, reference):
    ref_out, _ = reference
    before = _bytes(os.path.join(ref_out, "records.csv"))
    with pytest.raises(ProtocolError, match="already holds a run"):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=ref_out)
    assert _bytes(os.path.join(ref_out, "records.csv")) == before
    with pytest.raises(ResumeError, match="nothing to resume"):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=str(tmp_path / "empty"),
                     resume=True)


def _quartic_task():
    """``sum a^4 + sum b^4 + a.b``: explodes doubly exponentially for a large step."""
    params = {"a": torch.tensor([1.0, 0.5], dtype=torch.float64), "b": torch.tensor([0.8],
        dtype=torch.float64)}

    def loss(p):
        return (p["a"] ** 4).sum() + (p["b"] ** 4).sum() + p["a"].sum() * p["b"].sum()

    return Task(params, loss, {"a": ["a"], "b": ["b"]}, name="quartic")


def test_divergence_stops_with_a_message_and_keeps_records(tmp_path):
    out = str(tmp_path / "run")
    res = run_protocol(_quartic_task(), gauss_seidel(2), 1.0, 50, out_dir=out)
    assert res.status == "diverged" and res.exit_code == 3
    k = res.diverged_at
    assert 2 <= k < 50
    assert res.message.startswith(f"diverged at k={k}: ")
    assert "records kept" in res.message
    rows = read_records(os.path.join(out, "records.csv"))
    assert [r["k"] for r in rows] == list(range(1, k))
    s = read_summary(os.path.join(out, "summary.json"))
    assert s["status"] == "diverged" and s["diverged_at"] == k and s["records"] == k - 1


def test_a_run_that_leaves_the_loss_domain_stops_as_diverged(tmp_path):
    """A loss that raises outside its domain (as a Cholesky factor of a matrix not positive
    definite does) where a run leaves it stops that run as a divergence, naming what it raised,
    with the records before it kept; advise's JC run likewise."""
    from crosscurv.numeric.advice import advise

    task = _quartic_task()
    inner = task.loss

    def loss(p):
        if max(float(v.detach().abs().max()) for v in p.values()) > 50:
            raise torch.linalg.LinAlgError("linalg.cholesky: the input is not positive-definite")
        return inner(p)

    task.loss = loss
    out = str(tmp_path / "run")
    res = run_protocol(task, gauss_seidel(2), 1.0, 50, out_dir=out)
    assert res.status == "diverged" and res.exit_code == 3
    k = res.diverged_at
    assert res.message.startswith(f"diverged at k={k}: the loss raised ")
    assert "LinAlgError: linalg.cholesky: the input is not positive-definite" in res.message
    assert [r["k"] for r in read_records(os.path.join(out, "records.csv"))] == list(range(1, k))
    adv = advise(task, 1.0, 50, checks=False)
    assert adv.status == "diverged" and "the loss raised at theta_JC" in adv.message


def test_bad_inputs():
    task = tanh_mlp()
    for lr in (0.0, -1.0, float("nan"), float("inf"), "x"):
        with pytest.raises(ProtocolError, match="learning rate"):
            run_protocol(task, gauss_seidel(4), lr, 3)
    for iters in (0, -2, 2.5, True):
        with pytest.raises(ProtocolError, match="iterations"):
            run_protocol(task, gauss_seidel(4), 0.1, iters)
    with pytest.raises(PatternError, match="4"):
        run_protocol(task, gauss_seidel(3), 0.1, 3)
    with pytest.raises(ProtocolError, match="HVP method"):
        run_protocol(task, gauss_seidel(4), 0.1, 3, hvp_method="sideways")
    with pytest.raises(ResumeError):
        run_protocol(task, gauss_seidel(4), 0.1, 3, resume=True)
    bad = Task({"a": torch.ones(2)}, lambda p: p["a"].sum() / 0.0 * 0.0, {"a": ["a"]})
    with pytest.raises(TaskError, match="not finite"):
        run_protocol(bad, jacobi(1), 0.1, 3)


@pytest.mark.parametrize("method,chunk", [("forward", None), ("forward", 1), ("rof", 2), (
    "reverse", None)])
def test_batched_engines_match_the_one_graph_default(reference, method, chunk):
    _, ref = reference
    assert ref.summary["hvp"]["used"] == "reverse" and "graph" in ref.summary["hvp"]["engine"]
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, hvp_method=method, chunk_size=chunk)
    assert res.summary["hvp"]["used"] == method
    for field in ("gap", "recursive", "cumulative", "jc_only", "bound_bk"):
        a = [r[field] for r in res.records]
        b = [r[field] for r in ref.records]
        scale = max(abs(x) for x in b)
        assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-12 * scale, field


def test_auto_falls_back_to_batched_forward_products_without_double_backward(reference,
                                                                             monkeypatch):
    import crosscurv.numeric.engine as engine

    class NoDoubleBackward:
        def __init__(self, *a, **k):
            raise RuntimeError("derivative for this kernel is not implemented")

    _, ref = reference
    monkeypatch.setattr(engine, "PointCurvature", NoDoubleBackward)
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K)
    assert res.summary["hvp"]["used"] == "forward" and res.summary["hvp"][
        "engine_name"] == "batched"
    for field in ("gap", "recursive", "cumulative", "jc_only"):
        a, b = [r[field] for r in res.records], [r[field] for r in ref.records]
        assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-12 * max(abs(x) for x in b), field


def test_offloading_the_carried_vectors_changes_no_record_and_leaves_no_files(reference, tmp_path):
    ref_out, ref = reference
    out = str(tmp_path / "run")
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, offload=True)
    assert res.summary["settings"]["offload"] is True and ref.summary["settings"][
        "offload"] is False
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))
    assert sorted(os.listdir(out)) == ["checkpoint.pt", "records.csv", "summary.json"]
    # no run directory: a temporary folder
    mem = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, offload=True)
    assert [r["cumulative"] for r in mem.records] == [r["cumulative"] for r in ref.records]
    with pytest.raises(ProtocolError, match="offload"):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, offload="yes")


def test_resume_may_switch_offloading(reference, tmp_path):
    ref_out, _ = reference
    out = str(tmp_path / "run")
    with pytest.raises(Kill):
        run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, offload=True,
                     on_record=_kill_after(3))
    res = run_protocol(tanh_mlp(), gauss_seidel(4), LR, K, out_dir=out, resume=True, offload=False)
    assert res.status == "complete"
    assert _bytes(os.path.join(out, "records.csv")) == _bytes(os.path.join(ref_out, "records.csv"))


def test_measured_gap_is_the_loss_difference_within_its_bound_and_sharpness_a_rayleigh_quotient(
        reference):
    """float64: gap agrees with loss_s - loss_jc (whose own round-off is ~eps |L|) within gap_err;
    gap_err is small against the gap; sharpness_k lies in the dense spectrum of H(theta_JC^k) and
    the run's L is the largest |sharpness| seen (or the k = 0 quotient)."""
    from crosscurv.numeric.steps import jacobi_step

    _, ref = reference
    task = tanh_mlp()
    theta = dict(task.params)
    eps = torch.finfo(torch.float64).eps
    for r in ref.records:
        plain = r["loss_s"] - r["loss_jc"]
        assert abs(r["gap"] - plain) <= r["gap_err"] + 4 * eps * abs(r["loss_jc"]), r
        # conservative (Simpson's error), still small
        assert 0 < r["gap_err"] < 1e-3 * abs(r["gap"]), r
    L = ref.summary["constants"]["L"]
    assert max(abs(r["sharpness"]) for r in ref.records) <= L
    for k in range(1, K + 1):
        theta = jacobi_step(task, theta, LR)
        if k in (1, K):
            ev = torch.linalg.eigvalsh(dense_hessian(task, theta))
            s = ref.records[k - 1]["sharpness"]
            assert float(ev[0]) - 1e-12 <= s <= float(ev[-1]) + 1e-12
    # the power iteration converged
    assert ref.records[-1]["sharpness"] == pytest.approx(float(ev[-1]), rel=0.05)


def test_undecided_iterations_are_counted_in_the_summary(reference):
    _, ref = reference
    for m in ref.summary["metrics"].values():
        assert m["undecided"] == 0  # float64: every gap is far above its error bound
        assert m["jc_hits"][1] + m["s_hits"][1] + m["ties"] == m["K"]


def test_a_pattern_may_be_given_by_its_command_line_spelling(reference):
    _, ref = reference
    res = run_protocol(tanh_mlp(), "gs", LR, K)
    assert res.records == ref.records
    with pytest.raises(PatternError):
        run_protocol(tanh_mlp(), "gs:1,2", LR, 2)


def _vec(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(37, 53, generator=g).to(dtype), "b": torch.randn(1001, generator=g).to(
        dtype)}


def _same(a, b):
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("offloaded", [False, True])
def test_a_parked_vector_is_fetched_on_first_use_only(tmp_path, offloaded):
    store = Offloaded("cpu", str(tmp_path)) if offloaded else Resident()
    v = _vec(6)
    store.park("vmax", v)
    store.park("vmin", None)
    assert store.holds("vmax") and not store.holds("vmin") and not store.holds("absent")
    fetches = []
    fetch = store.fetch
    store.fetch = lambda name: fetches.append(name) or fetch(name)
    lazy = _Parked(store, "vmax")
    assert fetches == []
    assert list(lazy) == list(v) and len(lazy) == 2 and torch.equal(lazy["w"], v["w"])
    assert _same({n: lazy[n] + lazy[n] for n in lazy}, {n: v[n] + v[n] for n in v})
    assert fetches == ["vmax"]
    store.close()


def test_a_product_is_freed_before_the_next_product_is_taken():
    """The body's products ``H_JC [p, z, y, Delta]`` come one at a time: once the body drops a
    product, nothing holds it while the next one is taken (two products beside the graph would raise
    the peak memory)."""
    import weakref

    from crosscurv.numeric.point import PointCurvature
    from crosscurv.numeric.protocol import _products

    task = tanh_mlp()
    point = PointCurvature(task.loss, task.params)
    alive_at_fetch = []
    previous = []

    def getter():
        alive_at_fetch.append([ref() is not None for ref in previous])
        return {k: torch.ones_like(t) for k, t in task.params.items()}

    names = []
    for name, v, Hv in _products(point, 1, [(n, getter) for n in ("p", "z", "y", "delta")]):
        names.append(name)
        previous.append(weakref.ref(next(iter(Hv.values()))))
        del v, Hv
    assert names == ["p", "z", "y", "delta"]
    assert alive_at_fetch == [[], [False], [False, False], [False, False, False]]
