"""Per-pair sums against a dense JC-only reference, against advise's own estimates, and the search's
argmin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from crosscurv.numeric import Task
from crosscurv.numeric.advice import advise
from crosscurv.numeric.pair_records import pair_run, predict
from crosscurv.numeric.pattern_search import best_per_depth, local_descent, search
from crosscurv.numeric.pattern_search_certify import front_candidates
from crosscurv.theory.pattern_spaces import all_acyclic, pair_list, stages
from crosscurv.theory.patterns import as_pattern

SIZES = (2, 1, 2)


def _task(seed=0):
    g = torch.Generator().manual_seed(seed)
    d = sum(SIZES)
    A = torch.randn(d, d, generator=g, dtype=torch.float64)
    A = A @ A.T / d + 0.5 * torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    W = torch.randn(d, d, generator=g, dtype=torch.float64) / d
    x = torch.randn(d, generator=g, dtype=torch.float64)
    off = np.cumsum((0,) + SIZES)
    names = [f"x{i + 1}" for i in range(len(SIZES))]
    params = {n: x[off[i] : off[i + 1]].clone() for i, n in enumerate(names)}

    def loss(p):
        t = torch.cat([p[n] for n in names])
        return 0.5 * t @ A @ t - b @ t + 0.1 * torch.tanh(W @ t).pow(2).sum() + 0.05 * (t**4).sum()

    return Task(params, loss, {n: [n] for n in names}, name="dense3")


def _dense_predictions(task, lr, K, members):
    """JC-only estimate of every pattern row by explicit Hessians: ``(K, n_patterns)``."""
    names = list(task.params)
    off = np.cumsum((0,) + SIZES)
    pl = pair_list(len(SIZES))

    def flat_loss(t):
        return task.loss({n: t[off[i] : off[i + 1]] for i, n in enumerate(names)})

    t = torch.cat([task.params[n] for n in names])
    ys = np.zeros((len(members), len(t)))
    out = np.zeros((K, len(members)))
    for k in range(K + 1):
        g = torch.autograd.functional.jacobian(flat_loss, t).numpy()
        H = torch.autograd.functional.hessian(flat_loss, t).numpy()
        if k >= 1:
            out[k - 1] = ys @ g + 0.5 * np.einsum("nd,de,ne->n", ys, H, ys)
        for r, s in enumerate(members):
            mask = np.zeros_like(H)
            for p in np.flatnonzero(s):
                i, j = pl[p]
                mask[off[i] : off[i + 1], off[j] : off[j + 1]] = 1.0
            ys[r] = ys[r] - lr * H @ ys[r] + lr * lr * (mask * H) @ g
        t = t - lr * torch.from_numpy(g)
    return out


def test_pair_sums_equal_the_dense_jc_only_prediction_of_every_acyclic_pattern():
    task, lr, K = _task(), 0.1, 6
    space = all_acyclic(3)
    rec = pair_run(task, lr, K)
    dense = _dense_predictions(task, lr, K, space.members)
    for k in range(1, K + 1):
        got = rec.predict(space.members, k)
        scale = np.abs(dense[k - 1]).max()
        assert scale > 1e-6
        np.testing.assert_allclose(got, dense[k - 1], rtol=0, atol=1e-11 * scale)


def test_pair_sums_equal_advise_estimates_and_theorem_1_terms():
    task, lr, K = _task(1), 0.1, 5
    cands = ["jc", "gs", "gs:3,1,2", "chain", "3<-1", "stages:1,2/3"]
    adv = advise(task, lr, K, cands, checks=False)
    rec = pair_run(task, lr, K)
    pl = pair_list(3)
    from crosscurv.theory.patterns import as_pattern

    for c in cands[1:]:
        row = np.array([[p in as_pattern(c, 3).pairs for p in pl]])
        for r in adv.per_iteration:
            a, b = r["estimates"][c], rec.predict(row, r["k"])[0]
            assert abs(a - b) <= 1e-12 * max(1e-9, abs(a)) + 1e-15, (c, r["k"], a, b)
            assert math.isclose(
                r["one_step"][c], rec.one_step(row, r["k"])[0], rel_tol=1e-10, abs_tol=1e-16
            )


def test_search_returns_the_exhaustive_argmin_per_number_of_stages():
    task, lr, K = _task(2), 0.1, 6
    res = search(task, lr, K, "all", certify=False)
    space = res.space
    vals = predict(space.members, res.records.linear[K - 1], res.records.gram[K - 1])
    for row in res.front[1:]:
        d = row["stages"]
        cls = np.flatnonzero(space.depth <= d)
        best = cls[np.argmin(vals[cls])]
        assert row["best"] == space.name(int(best))
        assert row["estimate"] == pytest.approx(vals[best], abs=1e-15)
        assert row["estimate"] == pytest.approx(res.predict(row["best"]), abs=1e-15)
        st = as_pattern(row["best"], 3).stages()
        assert row["stages_text"] == ("-" if st is None else " > ".join(
            "{" + ",".join(str(b + 1) for b in x) + "}" for x in st))
    assert "(-)" not in res.recommendation


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_per_depth_is_exact_on_a_large_space_with_near_ties(seed):
    space = stages(6, 4)
    P = len(pair_list(6))
    rng = np.random.default_rng(seed)
    lin = rng.normal(size=P)
    a = rng.normal(size=(P, P)) * 1e-3
    gram = a + a.T
    # pair 1 a copy of pair 0 up to 1e-12: patterns holding one of the two tie below float32's
    # resolution
    lin[1] = lin[0] + 1e-12
    gram[1, :], gram[:, 1] = gram[0, :], gram[:, 0]
    gram[1, 1] = gram[0, 0]
    vals = predict(space.members, lin, gram)
    got = best_per_depth(space, lin, gram)
    for d, (b, v, r, rv) in got.items():
        cls = np.flatnonzero(space.depth <= d)
        order = cls[np.lexsort((cls, vals[cls]))]
        assert b == int(order[0]) and v == pytest.approx(vals[order[0]], rel=1e-14)
        if len(order) > 1:
            assert r == int(order[1]) and rv == pytest.approx(vals[order[1]], rel=1e-14)
        else:
            assert r == -1


def test_search_certifies_its_front_with_advise_errors_and_decisions():
    """The certification along the search's JC run gives each named pattern advise's embedded error
    (to rounding: advise's estimate is its own state, the search's the per-pair sum) and advise's
    certificate between each budget's best and runner-up (its factor and look-back)."""
    from crosscurv.numeric.certificate import REMAINDER_WINDOW, advice_next_orders, certify_best

    task, lr, K = _task(3), 0.05, 4
    res = advise(task, lr, K, search="stages")
    names = ["jc"] + [n for n in front_candidates(res.front)]
    adv = advise(task, lr, K, names)
    last = adv.per_iteration[-1]
    checked = 0
    for row in res.front[1:]:
        if not row["on_front"]:
            continue
        for n, err in ((row["best"], row["error"]), (row["runner_up"], row["runner_up_error"])):
            assert err == pytest.approx(last["errors"][n], rel=1e-9, abs=1e-15)
        two = (row["best"], row["runner_up"])
        window = [{n: r["errors"][n] for n in two} for r in adv.per_iteration[-REMAINDER_WINDOW:]]
        v = certify_best({n: last["estimates"][n] for n in two},
                         advice_next_orders(window, {}, K), True)
        assert row["certified"] == (v["certified"] and v["best"] == row["best"])
        checked += 1
    assert checked >= 2 and any(r["certified"] for r in res.front)
    assert "over 13 patterns (stages:3)" in res.recommendation
    assert res.cost["pair_run_s"] > 0 and res.cost["plain_pattern_s"] > 0


def test_a_front_pattern_whose_pair_point_leaves_the_loss_domain_is_not_certified(monkeypatch):
    """Where the loss raises at a front pattern's pair point, the certification goes on: that
    pattern's rows carry NaN errors and no certificate, and the recommendation says so."""
    from crosscurv.numeric import advice_steps

    task, lr, K = _task(3), 0.05, 4
    whole = advise(task, lr, K, search="stages")
    victim = next(r["best"] for r in whole.front[1:] if r["certified"])
    real = advice_steps.corrected_step

    def fails(engine, task, theta, loss_jc, g, yhat, e, effect, c, *rest):
        if c.name == victim:
            raise advice_steps.LossUndefined(RuntimeError("not positive-definite"))
        return real(engine, task, theta, loss_jc, g, yhat, e, effect, c, *rest)

    monkeypatch.setattr(advice_steps, "corrected_step", fails)
    res = advise(task, lr, K, search="stages")
    rows = [r for r in res.front if victim in (r["best"], r["runner_up"])]
    assert rows and not any(r["certified"] for r in rows)
    assert all(math.isnan(r["error"] if r["best"] == victim else r["runner_up_error"])
               for r in rows)
    assert f"for {victim} from K = 1 (RuntimeError)" in res.recommendation


@pytest.mark.parametrize("seed", [0, 1])
def test_local_descent_improves_the_stage_start_to_a_single_pair_local_minimum(seed):
    n = 5
    space, full = stages(n), all_acyclic(n)
    P = len(pair_list(n))
    rng = np.random.default_rng(10 + seed)
    lin = rng.normal(size=P)
    a = rng.normal(size=(P, P)) * 0.3
    gram = a + a.T
    vals = predict(full.members, lin, gram)
    index = {tuple(r): i for i, r in enumerate(full.members)}
    for d, (b, v, _, _) in best_per_depth(space, lin, gram).items():
        row, value, _, _, moves = local_descent(n, lin, gram, space.members[b], d)
        assert value <= v + 1e-12
        assert value >= vals[full.depth <= d].min() - 1e-12  # not below the global minimum
        for p in range(P):  # no acyclic neighbour within the budget is lower
            nb = row.copy()
            nb[p] = not nb[p]
            if tuple(nb) in index and full.depth[index[tuple(nb)]] <= d:
                assert vals[index[tuple(nb)]] >= value - 1e-12


def test_best_per_depth_never_names_a_non_finite_prediction():
    space = stages(4)
    P = len(pair_list(4))
    rng = np.random.default_rng(5)
    lin = rng.normal(size=P) - 1.0
    gram = np.zeros((P, P))
    gram[0, 0] = np.inf  # every pattern holding pair 0 (2<-1) predicts +inf or NaN
    got = best_per_depth(space, lin, gram)
    assert got and all(math.isfinite(v) and not space.members[b, 0] for b, v, _, _ in got.values())
    vals = predict(space.members, lin, gram)
    for d, (b, v, _, _) in got.items():
        cls = np.flatnonzero((space.depth <= d) & ~space.members[:, 0])
        assert v == pytest.approx(vals[cls].min(), rel=1e-14)


def test_saved_pair_records_predict_any_pattern_at_any_k(tmp_path):
    task, lr, K = _task(4), 0.1, 4
    res = advise(task, lr, K, search="orders", checks=False, out_dir=str(tmp_path))
    z = np.load(tmp_path / "pair_records.npz")
    pl = [tuple(int(x) - 1 for x in p) for p in z["pairs"]]
    from crosscurv.theory.patterns import as_pattern

    row = np.array([[p in as_pattern("3<-1,2<-3", 3).pairs for p in pl]])
    for k in (1, K):
        got = predict(row, z["linear"][k - 1], z["gram"][k - 1])[0]
        assert got == pytest.approx(res.predict("3<-1,2<-3", k), rel=1e-14)
    assert (tmp_path / "search.json").exists()


@pytest.mark.parametrize("seed", [0, 1])
def test_screened_values_are_within_their_bound_of_every_prediction(seed):
    from crosscurv.numeric.pattern_search import _screen

    rng = np.random.default_rng(seed)
    for space in (stages(6), stages(5, 2)):
        P = len(pair_list(space.n_blocks))
        lin = rng.normal(size=P) * 1e-3
        a = rng.normal(size=(P, 2))  # rank SCREEN_RANK plus a small tail: a tight screen
        gram = a @ a.T * 1e-4 + np.diag(rng.normal(size=P)) * 1e-6
        bad = np.zeros(P, dtype=bool)
        value, bound = _screen(space, lin, gram, bad)
        exact = predict(space.members, lin, gram)
        assert (np.abs(exact - value) <= bound).all()
        assert bound.max() < 0.1 * np.ptp(exact)  # tight enough to screen
        bad[3] = True
        value, _ = _screen(space, lin, gram, bad)
        assert (np.isinf(value) == space.members[:, 3]).all()


def test_a_margin_within_the_errors_is_reported_as_no_ranking():
    from crosscurv.numeric.pattern_search import _recommendation, rankable

    row = {"runner_up": "gs:2,1", "margin": 1e-8, "error": 1e-6, "runner_up_error": 2e-6}
    assert rankable(row) is False
    assert rankable(dict(row, margin=1e-5)) is True
    assert rankable(dict(row, error=math.nan)) is None
    assert rankable(dict(row, runner_up=None)) is None
    task = _task(1)
    res = search(task, 0.1, 4, "orders", certify=False)
    assert all(r["rankable"] is None for r in res.front)
    best = res.front[-1]
    best.update(certified=False, error=abs(best["margin"]) + 1.0, runner_up_error=1.0)
    best["rankable"] = rankable(best)
    text = _recommendation(res)
    assert f"{best['stages']} stages: cannot rank" in text and "train the top few" in text
    assert f"{best['stages']} stages: {best['best']} (" not in text


def _same_records(a, b):
    for key in ("loss_jc", "linear", "gram", "pair_curvature"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key


def test_a_resumed_search_equals_the_uninterrupted_one(tmp_path):
    from crosscurv.numeric.advice import AdviceError

    task, lr = _task(3), 0.1
    whole = search(task, lr, 7, "stages", certify=False)
    short = search(task, lr, 3, "stages", certify=False, out_dir=str(tmp_path / "a"))
    assert short.records.iters == 3
    longer = search(task, lr, 7, "stages", certify=False, out_dir=str(tmp_path / "a"), resume=True)
    _same_records(longer.records, whole.records)
    assert longer.front == whole.front and longer.per_iteration == whole.per_iteration

    class Killed(Exception):
        pass

    def kill(k, K):
        if k == 5:
            raise Killed

    with pytest.raises(Killed):  # killed after k = 5; states saved at k = 2, 4
        search(task, lr, 7, "stages", certify=False, out_dir=str(tmp_path / "b"), progress=kill,
               checkpoint_every=2)
    seen = []
    again = search(task, lr, 7, "stages", certify=False, out_dir=str(tmp_path / "b"), resume=True,
                   progress=lambda k, K: seen.append(k))
    assert seen == [4, 5, 6, 7]  # continued from the state at k = 4, not from the start
    _same_records(again.records, whole.records)
    assert again.front == whole.front

    with pytest.raises(AdviceError, match="setting lr differs"):
        search(task, 0.2, 7, "orders", certify=False, out_dir=str(tmp_path / "a"), resume=True)
    with pytest.raises(AdviceError, match="extended, not shortened"):
        search(task, lr, 5, "orders", certify=False, out_dir=str(tmp_path / "a"), resume=True)
    with pytest.raises(AdviceError, match="nothing to resume"):
        search(task, lr, 5, "orders", certify=False, out_dir=str(tmp_path / "c"), resume=True)


def test_the_search_one_step_check_is_advise_s():
    """The certification's one-step check is advise's at theta^0 over the named patterns (JC
    skipped)."""
    from crosscurv.numeric import tree
    from crosscurv.numeric.advice_steps import PatternCandidate
    from crosscurv.numeric.one_step_check import one_step_check
    from crosscurv.numeric.pattern_search_certify import first_step_checks
    from crosscurv.theory.patterns import as_pattern

    task, lr = _task(1), 0.05
    names = ["gs", "stages:1/2,3", "2<-1,3<-1"]
    pats = [(n, as_pattern(n, task.n_blocks)) for n in names]
    cands = [PatternCandidate(n, p, []) for n, p in pats]
    ours = first_step_checks(task, cands, lr, "auto")
    theirs = one_step_check(task, pats + [("jc", as_pattern("jc", task.n_blocks))],
                            tree.clone(task.params), lr, 0, "auto")
    assert ours == theirs and sorted(ours) == sorted(names)
