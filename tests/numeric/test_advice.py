"""crosscurv.numeric.advice: the JC-only predictions against a dense float64 reference, the embedded
error on a quadratic, the decision, candidates, and resume bit for bit."""

from __future__ import annotations

import math

import pytest
import torch

from crosscurv.experiments.problems.toys import coupled_quadratic
from crosscurv.numeric import Task, tree
from crosscurv.numeric.advice import (AdviceError, advise, decide, default_candidates,
                                      parse_candidates, read_advice_records)
from crosscurv.numeric.protocol import run_protocol
from tests.numeric.cases import dense_gradient, dense_hessian, dense_mask, tanh_mlp
from crosscurv.theory.patterns import PatternError, as_pattern


def _quadratic() -> Task:
    """``1/2 x^T A x - b^T x`` over blocks of 2, 3 and 2 coordinates (``A`` coupled, eigenvalues >=
    0.3)."""
    return coupled_quadratic([2, 3, 2], seed=3, shift=0.3)[0]


def test_predictions_match_dense_reference():
    """y_{k+1} = (I - eta H) y_k + eta^2 M_S g, prediction g.y + y.H y / 2, all dense along the JC
    run.
    """
    task = tanh_mlp()
    lr, K = 0.2, 6
    pats = ["gs", "gs:4,3,2,1", "chain", "2<-1,4<-2"]
    adv = advise(task, lr, K, ["jc"] + pats, checks=False)
    theta = tree.clone(task.params)
    ys = {p: torch.zeros(sum(v.numel() for v in theta.values()), dtype=torch.float64) for p in pats}
    for k in range(K + 1):
        g, h = dense_gradient(task, theta), dense_hessian(task, theta)
        for p in pats:
            y = ys[p]
            if k >= 1:
                want = float(g @ y + 0.5 * y @ h @ y)
                got = adv.per_iteration[k - 1]["estimates"][p]
                assert got == pytest.approx(want, rel=1e-10, abs=1e-15), (k, p)
                # Theorem 1's one-step estimate eta^2 g.M_S g
                m = dense_mask(task, as_pattern(p, 4))
                assert adv.per_iteration[k - 1]["one_step"][p] == pytest.approx(lr**2 * float(g @ (
                    m * h) @ g), rel=1e-10)
            ys[p] = y - lr * h @ y + lr**2 * (dense_mask(task, as_pattern(p, 4)) * h) @ g
        theta = tree.unflatten(tree.flatten(theta) - lr * g, theta)
    assert adv.per_iteration[0]["estimates"]["jc"] == 0.0


def test_jc_only_equals_protocol_column():
    task = tanh_mlp()
    adv = advise(task, 0.3, 8, "jc;gs;chain", checks=False)
    for p in ("gs", "chain"):
        recs = run_protocol(task, p, 0.3, 8).records
        assert [r["jc_only"] for r in recs] == pytest.approx([r["estimates"][p]
                                                              for r in adv.per_iteration],
                                                             rel=1e-12, abs=1e-16)


@pytest.mark.parametrize("lr", [0.1, 0.03])
def test_error_is_the_actual_error_on_a_quadratic(lr):
    """On a quadratic the corrected state keeps every O(eta^3) term: it is >= 30x closer to the
    measured gap than the JC-only estimate, and error = |corrected - jc_only| is the JC-only
    estimate's actual error to within 5% of its size."""
    task = _quadratic()
    K = int(3 / lr)
    adv = advise(task, lr, K, "jc;gs;gs:3,2,1;chain", checks=False)
    for p in ("gs", "gs:3,2,1", "chain"):
        gap = [r["gap"] for r in run_protocol(task, p, lr, K).records]
        est = [r["estimates"][p] for r in adv.per_iteration]
        err = [r["errors"][p] for r in adv.per_iteration]
        cor = [r["corrected"][p] for r in adv.per_iteration]
        actual = [abs(e - m) for e, m in zip(est, gap)]
        assert max(abs(c - m) for c, m in zip(cor, gap)) <= max(actual) / 30
        assert max(abs(e - a) for e, a in zip(err, actual)) <= 0.05 * max(actual)


def test_decide_and_certified():
    d = decide({"jc": 0.0, "gs": -1.0, "chain": -0.5}, {"jc": 0.0, "gs": 0.2, "chain": 0.2})
    assert (d["best"], d["runner_up"], d["certified"]) == ("gs", "chain", True)
    assert d["margin"] == 0.5
    d = decide({"jc": 0.0, "gs": -1.0, "chain": -0.5}, {"jc": 0.0, "gs": 0.3, "chain": 0.2})
    assert (d["best"], d["certified"]) == ("gs", False)  # margin 0.5 = 0.3 + 0.2: not above
    assert decide({"jc": 0.0, "gs": 0.0}, {"jc": 0.0, "gs": 0.0})["best"] == "jc"  # ties: the first


def test_default_candidates():
    assert default_candidates(1) == ["jc"]
    assert default_candidates(2) == ["jc", "gs", "gs:2,1"]  # the chain is GS for two blocks
    c3 = default_candidates(3)
    assert c3[:3] == ["jc", "gs", "gs:3,2,1"] and c3[-1] == "chain" and len(c3) == 1 + 6 + 1
    assert len(default_candidates(4)) == 1 + 24 + 1
    assert default_candidates(5) == ["jc", "gs", "gs:5,4,3,2,1", "chain"]


def test_candidates_keep_spelling_and_jc_first():
    task = tanh_mlp()
    got = parse_candidates(task, "gs:layer4,layer3,layer2,layer1; 2<-1")
    assert [n for n, _ in got] == ["jc", "gs:layer4,layer3,layer2,layer1", "2<-1"]
    with pytest.raises(AdviceError, match="same scheme"):
        parse_candidates(task, "gs;gs:1,2,3,4")
    with pytest.raises(PatternError):
        parse_candidates(task, "gs;3<-3")
    with pytest.raises(AdviceError, match="empty pattern"):
        parse_candidates(task, "gs;;chain")


def test_resume_equals_uninterrupted(tmp_path):
    task = tanh_mlp()
    full = advise(task, 0.2, 9, "jc;gs;chain", out_dir=str(tmp_path / "a"), checkpoint_every=2)

    class Stop(Exception):
        pass

    def stop_at_6(row):
        if row["k"] == 6:
            raise Stop

    with pytest.raises(Stop):
        advise(task, 0.2, 9, "jc;gs;chain", out_dir=str(tmp_path / "b"), checkpoint_every=2,
               on_record=stop_at_6)
    again = advise(task, 0.2, 9, "jc;gs;chain", out_dir=str(tmp_path / "b"), resume=True,
                   checkpoint_every=2)
    assert again.per_iteration == full.per_iteration
    assert (tmp_path / "a" / "advice.csv").read_bytes() == (tmp_path / "b"
                                                            / "advice.csv").read_bytes()
    # extending a finished run: the rows of an uninterrupted run to the new K
    longer = advise(task, 0.2, 12, "jc;gs;chain", out_dir=str(tmp_path / "c"), checkpoint_every=2)
    ext = advise(task, 0.2, 12, "jc;gs;chain", out_dir=str(tmp_path / "a"), resume=True,
                 checkpoint_every=2)
    assert ext.per_iteration == longer.per_iteration
    assert read_advice_records(str(tmp_path / "a" / "advice.csv"))[-1]["k"] == 12
    with pytest.raises(AdviceError, match="setting lr differs"):
        advise(task, 0.3, 12, "jc;gs;chain", out_dir=str(tmp_path / "a"), resume=True)
    with pytest.raises(AdviceError, match="already holds"):
        advise(task, 0.2, 12, "jc;gs;chain", out_dir=str(tmp_path / "a"))


def test_gs_orders_note_and_figure(tmp_path):
    task = _quadratic()
    adv = advise(task, 0.1, 20, "jc;gs;gs:3,2,1;chain")
    assert set(adv.orders["eta3"]) == {"gs", "gs:3,2,1"}
    assert all(math.isfinite(v["k0"]) for v in adv.orders["eta3"].values())
    assert "GS orders" in adv.recommendation and adv.recommendation.startswith("at K = 20: use ")
    path = adv.figure(str(tmp_path / "advice.png"))
    assert (tmp_path / "advice.png").stat().st_size > 1000 and path.endswith("advice.png")


def test_one_step_check_warns_outside_the_regime():
    """The smoke MLP (ReLU): at its preset lr the one-step gap is far from eta^2 C_S (kinks), at lr
    5e-4 not."""
    from crosscurv.experiments.tasks.loading import load_task

    task, settings = load_task("mlp", "smoke", device=torch.device("cpu"))
    far = advise(task, settings["lr"], 2, "jc;gs")
    near = advise(task, 5e-4, 2, "jc;gs")
    assert "Warning: the one-step expansion does not converge" in far.recommendation
    assert "Warning" not in near.recommendation
    c = near.one_step_checks[0]["gs"]  # float32: the difference is below the steps' rounding
    assert c["k"] == 0 and abs(c["measured"] - c["eta3"]) <= c["floor"]
    c = far.one_step_checks[0]["gs"]
    assert abs(c["measured"] - c["eta3"]) > max(10 * abs(c["eta3"] - c["eta2"]), c["floor"])
    # in float64 the one-step gap at lr 5e-4 agrees with eta^2 C_S + eta^3 c3 well inside the eta^3
    # term
    task64, _ = load_task("mlp", "smoke", device=torch.device("cpu"), dtype=torch.float64)
    c = advise(task64, 5e-4, 1, "jc;gs").one_step_checks[0]["gs"]
    assert abs(c["measured"] - c["eta3"]) <= 0.1 * abs(c["eta3"] - c["eta2"])
    # a quadratic at lr 0.1: the eta^3 term is large but the series converges: no warning
    assert "Warning" not in advise(_quadratic(), 0.1, 3, "jc;gs;chain;2<-1").recommendation


def test_batched_engine_gives_the_same_advice():
    """The batched (forward-over-reverse) engine: the same predictions and errors as the graph
    engine.
    """
    task = tanh_mlp()
    a = advise(task, 0.2, 5, "jc;gs;chain;2<-1", checks=False)
    b = advise(task, 0.2, 5, "jc;gs;chain;2<-1", hvp_method="forward", checks=False)
    for ra, rb in zip(a.per_iteration, b.per_iteration):
        for key in ("estimates", "errors", "corrected", "one_step"):
            assert list(ra[key]) == list(rb[key])
            assert list(ra[key].values()) == pytest.approx(list(rb[key].values()), rel=1e-9,
                                                           abs=1e-15)
        assert ra["best"] == rb["best"]


# -- optimizers and block learning rates
# ----------------------------------------------------------------
@pytest.mark.parametrize("optimizer, block_lr", [("momentum:0.9", None), ("adam", None), ("sgd",
    "layer2=2.0"),
                                                 ("adam:0.8,0.99,1e-6", "1=0.5")])
def test_optimizer_predictions_are_the_protocol_jc_only(optimizer, block_lr):
    """With an optimizer / block factors the prediction is the protocol's optimizer-aware jc_only
    column."""
    task = tanh_mlp()
    adv = advise(task, 0.05, 6, "jc;gs;chain", optimizer=optimizer, block_lr=block_lr)
    for p in ("gs", "chain"):
        recs = run_protocol(task, p, 0.05, 6, optimizer=optimizer, block_lr=block_lr).records
        assert [r["estimates"][p] for r in adv.per_iteration] == pytest.approx([r["jc_only"]
                                                                                for r in recs],
                                                                               rel=1e-12, abs=1e-16)
        assert [r["loss_jc"] for r in adv.per_iteration] == [r["loss_jc"] for r in recs]
    assert all(math.isnan(r["errors"]["gs"]) and not r["certified"] for r in adv.per_iteration)
    assert adv.settings["optimizer"]["spec"] != "sgd" or adv.settings["block_lr"]
    assert "carry no error estimate" in adv.recommendation


def test_optimizer_one_step_column_is_eta2_c_s_phi():
    from crosscurv.numeric.optimizer_estimates import optimizer_delay_curvature
    from crosscurv.numeric.optimizers import OptimizerState, block_factors, optimizer_scheme_step

    task = tanh_mlp()
    lr, spec = 0.05, "momentum:0.9"
    factors = block_factors(task, "layer3=2.0")
    adv = advise(task, lr, 3, "jc;gs;2<-1", optimizer=spec, block_lr="layer3=2.0")
    theta, state = tree.clone(task.params), OptimizerState()
    for k in range(3):
        if k >= 1:
            for p in ("gs", "2<-1"):
                want = lr ** 2 * optimizer_delay_curvature(task, theta, as_pattern(p, 4), spec,
                                                           state, factors)
                assert adv.per_iteration[k - 1]["one_step"][p] == pytest.approx(want, rel=1e-10,
                                                                                abs=1e-18)
        theta, state, _ = optimizer_scheme_step(task, theta, as_pattern("jc", 4), lr, spec, state,
                                                factors)


@pytest.mark.parametrize("optimizer, block_lr", [("momentum:0.5", None), ("sgd",
                                                                          "layer2=2.0,layer4=0.5"),
                                                 ("momentum:0.5", "1=3")])
def test_optimizer_prediction_error_is_third_order(optimizer, block_lr):
    """At fixed K the measured gap of the optimizer's trajectories is O(eta^2) and the JC-only
    prediction's error O(eta^3) (one step: eta^2 C_S^phi + O(eta^3); the tangent recursion drops
    terms of third order): halving eta divides the gap by 4 and the error by 8 (observed orders
    1.95-1.98 and 2.77-3.06)."""
    task = tanh_mlp()
    out = {}
    for lr in (0.002, 0.001):
        adv = advise(task, lr, 3, "jc;gs;chain", optimizer=optimizer, block_lr=block_lr)
        for p in ("gs", "chain"):
            gap = run_protocol(task, p, lr, 3, optimizer=optimizer, block_lr=block_lr).records[-1][
                "gap"]
            out[lr, p] = (gap, abs(gap - adv.per_iteration[-1]["estimates"][p]))
    for p in ("gs", "chain"):
        (g1, e1), (g2, e2) = out[0.002, p], out[0.001, p]
        assert 1.9 <= math.log2(g1 / g2) <= 2.1, p
        assert math.log2(e1 / e2) >= 2.6, p
        assert e1 <= 0.02 * abs(g1), p


def test_optimizer_resume_equals_uninterrupted(tmp_path):
    task = tanh_mlp()
    kw = dict(optimizer="adam", block_lr="layer1=2.0", checkpoint_every=2)
    full = advise(task, 0.02, 8, "jc;gs;chain", out_dir=str(tmp_path / "a"), **kw)

    class Stop(Exception):
        pass

    def stop_at_5(row):
        if row["k"] == 5:
            raise Stop

    with pytest.raises(Stop):
        advise(task, 0.02, 8, "jc;gs;chain", out_dir=str(tmp_path / "b"), on_record=stop_at_5, **kw)
    again = advise(task, 0.02, 8, "jc;gs;chain", out_dir=str(tmp_path / "b"), resume=True, **kw)
    assert (tmp_path / "a" / "advice.csv").read_bytes() == (tmp_path / "b"
                                                            / "advice.csv").read_bytes()
    assert [r["estimates"] for r in again.per_iteration] == [r["estimates"]
                                                             for r in full.per_iteration]
    with pytest.raises(AdviceError, match="setting optimizer differs"):
        advise(task, 0.02, 8, "jc;gs;chain", out_dir=str(tmp_path / "a"), resume=True,
               optimizer="momentum:0.9", block_lr="layer1=2.0")


def test_nothing_is_certified_past_the_edge_of_stability():
    """The same quadratic certified inside the regime, advised at a rate past its edge (eta
    lambda_max
    > 2): the sharpness is the quadratic's lambda_max (dense reference), and no iteration from the
    first past the edge is certified, which the recommendation says."""
    task = _quadratic()
    lam = float(torch.linalg.eigvalsh(dense_hessian(task, task.params)).max())
    inside = advise(task, 0.1, 30, "jc;gs;chain", checks=False)
    assert all(r["sharpness"] == pytest.approx(lam, rel=1e-3) for r in inside.per_iteration[20:])
    assert any(r["certified"]
               for r in inside.per_iteration) and "edge of stability" not in inside.recommendation
    lr = 2.05 / lam
    past = advise(task, lr, 30, "jc;gs;chain", checks=False)
    first = next(r["k"] for r in past.per_iteration if lr * r["sharpness"] >= 2)
    # lambda_max(H_JC^0) converged at k = 0 (the power iteration from its eigenvector after)
    assert first == 1
    assert not any(r["certified"] for r in past.per_iteration if r["k"] >= first)
    assert f"crossed the edge of stability at K = {first}" in past.recommendation


def test_a_first_step_remainder_withholds_the_first_certificates(monkeypatch):
    """The measured one-step remainder at theta^0 is the first dropped order of the first
    REMAINDER_WINDOW iterations: a large one withholds their certificates, and the recommendation
    warns."""
    import crosscurv.numeric.advice as advice
    from crosscurv.numeric.certificate import REMAINDER_WINDOW

    task = _quadratic()
    ok = advise(task, 0.1, 20, "jc;gs;chain")
    assert any(r["certified"] for r in ok.per_iteration)
    assert all(r["next_order"]["gs"] < 0.1 for r in ok.per_iteration[:REMAINDER_WINDOW])
    assert "does not converge" not in ok.recommendation

    def bad_check(task, cands, theta, lr, k, method="auto"):
        return {name: {"k": 0, "measured": 1.0, "eta2": 0.1, "eta3": 0.11, "c3": 0.0, "floor": 0.0}
                for name, p in cands if not p.is_jacobi}

    monkeypatch.setattr(advice, "one_step_check", bad_check)
    bad = advise(task, 0.1, 20, "jc;gs;chain")
    assert not any(r["certified"] for r in bad.per_iteration[:REMAINDER_WINDOW])
    assert all(r["next_order"]["gs"] >= 0.9 for r in bad.per_iteration[:REMAINDER_WINDOW])
    assert "does not converge at theta^0" in bad.recommendation


def test_a_converged_run_says_its_schemes_differ_below_the_loss_rounding():
    """On a quadratic run to convergence every predicted gap falls below the rounding of a loss
    difference (``crosscurv.numeric.certificate.rounding_floor``): nothing is certified there, and
    the recommendation says no measurement can tell the schemes apart. Early on it is silent."""
    from crosscurv.numeric.certificate import rounding_floor

    task = _quadratic()
    adv = advise(task, 0.5, 400, checks=False)
    last = adv.per_iteration[-1]
    assert not last["certified"] and last["margin"] <= rounding_floor(last["loss_jc"], "float64")
    assert all(v >= rounding_floor(last["loss_jc"], "float64")
               for n, v in last["next_order"].items() if n != "jc")
    assert "within the rounding of the loss" in adv.recommendation
    early = advise(task, 0.5, 5, checks=False)
    assert "within the rounding" not in early.recommendation


def test_blocks_that_never_interact_get_one_sentence_saying_so():
    """Two blocks of a separable loss (no cross-curvature anywhere): every prediction is exactly 0,
    nothing is certified, and the recommendation says the schemes take the same steps; the GS
    orders' eta^3 terms tie instead of being ranked. A coupled problem gets no such sentence."""
    params = {"a": torch.tensor([1.0, -0.5], dtype=torch.float64),
              "b": torch.tensor([0.3, 0.8], dtype=torch.float64)}

    def loss(p):
        return (p["a"] ** 2).sum() + 0.5 * (p["a"] ** 4).sum() + torch.cosh(p["b"]).sum()

    task = Task(params, loss, {"a": ["a"], "b": ["b"]}, "separable")
    adv = advise(task, 0.1, 12)
    assert all(v == 0.0 for r in adv.per_iteration for v in r["estimates"].values())
    assert not any(r["certified"] for r in adv.per_iteration)
    assert "Every prediction is exactly 0 at every K <= 12" in adv.recommendation
    assert "tie them too" in adv.recommendation and "rank them" not in adv.recommendation
    coupled = advise(_quadratic(), 0.5, 12)
    assert "Every prediction is exactly 0" not in coupled.recommendation


def test_a_loss_undefined_at_the_pairs_point_raises_loss_undefined():
    """The embedded pair's point ``theta_JC + yhat`` is visited by no scheme: a loss that raises
    there (a Cholesky factor of a matrix not positive definite) is told apart as
    ``LossUndefined``."""
    from crosscurv.numeric.advice_steps import LossUndefined, PatternCandidate, corrected_step
    from crosscurv.numeric.engine import choose_engine

    task = _quadratic()
    inner = task.loss

    def loss(p):
        if float(sum(v.detach().sum() for v in p.values())) > 1e3:
            raise RuntimeError("linalg.cholesky: the input is not positive-definite")
        return inner(p)

    task.loss = loss
    theta = tree.clone(task.params)
    g = {n: torch.zeros_like(v) for n, v in theta.items()}
    pat = as_pattern("gs", task.n_blocks, list(task.block_names))
    c = PatternCandidate("gs", pat, [(i, sorted(pat.fresh(i))) for i in range(3) if pat.fresh(i)])
    keys = [task.blocks[b] for b in task.block_names]
    engine = choose_engine(task, "auto")
    loss_jc = float(task.loss(theta))
    cor, trap, _ = corrected_step(engine, task, theta, loss_jc, g, g, None, 0.0, c, keys, g, 0.1,
                                  True)
    assert cor == 0.0 and trap == 0.0
    far = {n: torch.full_like(v, 1e3) for n, v in theta.items()}
    with pytest.raises(LossUndefined):
        corrected_step(engine, task, theta, loss_jc, g, far, None, 0.0, c, keys, g, 0.1, True)
    with pytest.raises(LossUndefined):  # the pair's point theta_hat + e
        corrected_step(engine, task, theta, loss_jc, g, g, far, 0.0, c, keys, g, 0.1, True)


def test_advise_goes_on_where_the_loss_is_undefined_at_a_pairs_point(monkeypatch):
    """Where the loss raises at a candidate's pair point from some k on, advise finishes: that
    candidate's errors are NaN and nothing is certified from there, the others keep theirs, and
    the recommendation says where and what the loss raised."""
    from crosscurv.numeric import advice_steps

    real, calls = advice_steps.corrected_step, []

    def fails_for_gs(engine, task, theta, loss_jc, g, yhat, e, effect, c, *rest):
        if c.name == "gs":
            calls.append(1)
            if len(calls) >= 6:
                raise advice_steps.LossUndefined(RuntimeError("not positive-definite"))
        return real(engine, task, theta, loss_jc, g, yhat, e, effect, c, *rest)

    monkeypatch.setattr(advice_steps, "corrected_step", fails_for_gs)
    adv = advise(_quadratic(), 0.5, 12)
    rows = adv.per_iteration
    lost = [r["k"] for r in rows if math.isnan(r["errors"]["gs"])]
    assert lost == list(range(6, 13))
    assert not any(r["certified"] for r in rows if r["k"] >= 6)
    assert all(math.isfinite(r["errors"][n]) for r in rows for n in r["errors"] if n != "gs")
    assert "for gs from K = 6 (RuntimeError: not positive-definite)" in adv.recommendation


def test_a_first_step_outside_the_loss_domain_leaves_the_check_silent(monkeypatch):
    """Where the loss raises at a candidate's exact first step (outside its domain), the one-step
    check measures nothing for it (NaN) instead of stopping advise, which certifies nothing of it
    and says why; a bug still propagates."""
    from crosscurv.numeric import steps

    real = steps.scheme_step

    def raises(task, theta, pattern, lr, **kw):
        if not pattern.is_jacobi:
            raise torch.linalg.LinAlgError("linalg.cholesky: the input is not positive-definite")
        return real(task, theta, pattern, lr, **kw)

    monkeypatch.setattr(steps, "scheme_step", raises)
    from crosscurv.numeric.one_step_check import one_step_check

    task = _quadratic()
    rows = one_step_check(task, [("gs", as_pattern("gs", 3))], tree.clone(task.params), 0.5)
    assert math.isnan(rows["gs"]["measured"]) and math.isfinite(rows["gs"]["eta2"])
    adv = advise(task, 0.5, 5)  # every exact S step raises: nothing measured, nothing certified
    assert adv.status == "complete" and not any(r["certified"] for r in adv.per_iteration)
    assert "gs at k = 0: the exact step could not be measured (nan)" in adv.recommendation

    def bug(*a, **kw):
        raise KeyError("a bug")

    monkeypatch.setattr(steps, "scheme_step", bug)
    with pytest.raises(KeyError):
        one_step_check(task, [("gs", as_pattern("gs", 3))], tree.clone(task.params), 0.5)
