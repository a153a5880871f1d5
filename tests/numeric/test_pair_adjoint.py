"""The adjoint sweep's per-pair terms at ``K`` against the forward per-pair states, on problems of
several kinds, and the final-only search against the full one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crosscurv.numeric.pair_adjoint import pair_adjoint
from crosscurv.numeric.pair_records import pair_run
from crosscurv.numeric.pattern_search import search
from crosscurv.numeric.pattern_search_certify import front_candidates
from crosscurv.theory.errors import AdviceError


def _problems():
    from crosscurv.experiments.problems import quartic_problem, tanh_mlp_problem
    from crosscurv.experiments.problems.factorisation import factorisation_problem

    q = quartic_problem(0, (2, 1, 2, 2))
    t = tanh_mlp_problem(1, widths=(3, 5, 4, 2), n_blocks=4)
    f = factorisation_problem(0, n_factors=3)
    return [("quartic", q.task, q.scale), ("tanh", t.task, t.scale), ("factorisation", f.task,
                                                                      f.scale)]


@pytest.mark.parametrize("kind", range(3))
@pytest.mark.parametrize("iters", [1, 2, 9, 16])
def test_adjoint_terms_equal_the_forward_states_at_K(kind, iters):
    """``l^K`` and ``c^K`` by the sweep equal the forward states' to rounding (float64), for ``K``
    on and off the stored-iterate grid; the losses are the same run's, to rounding (a double
    backward's graph may take other kernels than a plain gradient)."""
    _, task, lam = _problems()[kind]
    lr = 0.7 / lam
    a, b = pair_run(task, lr, iters), pair_adjoint(task, lr, iters)
    assert b.final_only and b.iters == a.iters == iters
    np.testing.assert_allclose(b.loss_jc, a.loss_jc, rtol=1e-12)  # routes differ in kernels
    scale = np.abs(a.linear[-1]).max()
    assert scale > 0
    np.testing.assert_allclose(b.linear[-1], a.linear[-1], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(b.pair_curvature[-1], a.pair_curvature[-1], rtol=1e-12)
    assert np.isnan(b.linear[:-1]).all() and (b.gram[-1] == 0).all()


def test_diverged_run_stops_at_the_last_finite_iterate():
    """A run whose loss overflows ends at the last finite ``k`` with that ``k``'s terms."""
    from crosscurv.experiments.problems import quartic_problem

    p = quartic_problem(0, (2, 2, 2))
    task, lr = p.task, 0.5 / p.scale
    a, b = pair_run(task, lr, 60), pair_adjoint(task, lr, 60)
    assert a.status == b.status == "diverged" and a.iters == b.iters < 60
    assert b.message == a.message
    fin = np.isfinite(a.linear[-1])
    assert fin.any()
    np.testing.assert_allclose(b.linear[-1][fin], a.linear[-1][fin], rtol=1e-9)


def test_final_only_records_refuse_other_k():
    _, task, lam = _problems()[1]
    rec = pair_adjoint(task, 0.5 / lam, 4)
    rows = np.ones((1, len(rec.pairs)), dtype=bool)
    assert np.isfinite(rec.predict(rows, 4)).all()
    with pytest.raises(AdviceError, match="K = 4 only"):
        rec.predict(rows, 3)


@pytest.mark.parametrize("kind,lr_lam", [(1, 0.25), (2, 0.25), (0, 1.0)])
def test_final_only_search_names_the_full_searchs_front(kind, lr_lam):
    """On problems where the quadratic term is small against the margins, the final-only search
    names the full search's patterns; once certified, its estimates are the full ones (the
    certification's own states) and its certificates the full search's."""
    _, task, lam = _problems()[kind]
    lr, K = lr_lam / lam, 12
    full = search(task, lr, K, "stages")
    fast = search(task, lr, K, "stages", final_only=True)
    assert [r["best"] for r in fast.front] == [r["best"] for r in full.front]
    for a, b in zip(fast.front, full.front):
        assert a["estimate"] == pytest.approx(b["estimate"], rel=1e-9, abs=1e-15)
        assert a["certified"] == b["certified"]
        assert a["error"] == pytest.approx(b["error"], rel=1e-6, abs=1e-15)
    named = front_candidates(fast.front)  # what the certification carries
    assert [p["k"] for p in fast.per_iteration] == (list(range(1, K + 1)) if named else [K])
    for a, b in zip(fast.per_iteration if named else [],
                    full.per_iteration):  # the certification's own states
        for name, v in a["estimates"].items():
            assert v == pytest.approx(b["estimates"][name], rel=1e-9, abs=1e-15)
    with pytest.raises(AdviceError):
        fast.best(K - 1)
    bare = search(task, lr, K, "stages", final_only=True, certify=False)
    assert [p["k"] for p in bare.per_iteration] == [K]


def test_a_killed_sweep_resumes_to_the_uninterrupted_records(tmp_path, monkeypatch):
    """A run killed in the sweep, after a saved state, continues from it on ``resume`` to the
    records of an uninterrupted run, bit for bit (one route, one machine); another ``iters`` or
    nothing saved is refused."""
    from crosscurv.numeric import pair_adjoint as mod

    _, task, lam = _problems()[1]
    lr, K, path = 0.5 / lam, 20, str(tmp_path / mod.STATE_FILE)
    whole = pair_adjoint(task, lr, K)
    real, calls = mod._grad_and_products, []

    def dies(*a):
        calls.append(1)
        if len(calls) > 12:  # the products at K, then 11 of the sweep's 20 iterations
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(mod, "_grad_and_products", dies)
    with pytest.raises(KeyboardInterrupt):
        pair_adjoint(task, lr, K, state_path=path, checkpoint_every=1)
    monkeypatch.setattr(mod, "_grad_and_products", real)
    saved = torch.load(path, weights_only=True)
    assert 0 < saved["done"] < K
    again = pair_adjoint(task, lr, K, state_path=path, resume=True)
    assert np.array_equal(again.linear, whole.linear, equal_nan=True)
    assert np.array_equal(again.pair_curvature, whole.pair_curvature, equal_nan=True)
    assert np.array_equal(again.loss_jc, whole.loss_jc)
    with pytest.raises(AdviceError, match="predicts at its own K"):
        pair_adjoint(task, lr, K + 1, state_path=path, resume=True)
    with pytest.raises(AdviceError, match="nothing to resume"):
        search(task, lr, 3, "orders", final_only=True, out_dir=str(tmp_path / "x"), resume=True)


def test_the_sweep_is_cheaper_than_the_forward_states_in_products():
    """The point of the sweep: ``N + 1`` directions per batched backward, not ``N^2``; counted on
    an 8-block task by wrapping the batched backward."""
    from crosscurv.experiments.studies.pattern_search import eight_blocks
    from crosscurv.numeric import pair_adjoint as mod

    _, task, lam = eight_blocks()[0]
    seen = []
    real = mod._grad_and_products

    def counting(loss, theta, layout, directions):
        out = real(loss, theta, layout, directions)
        seen.append(out[2].shape[0])
        return out

    mod._grad_and_products = counting
    try:
        pair_adjoint(task, 0.5 / lam, 5)
    finally:
        mod._grad_and_products = real
    assert seen == [8] + [9] * 5


def test_a_costly_full_search_points_to_the_final_only_one():
    """Where the full search cost more than training 8 patterns, its recommendation names the
    cheaper final-only search and its product count; the final-only search does not."""
    from crosscurv.numeric.pattern_search import _recommendation

    _, task, lam = _problems()[1]
    full = search(task, 0.25 / lam, 4, "orders", certify=False)
    fast = search(task, 0.25 / lam, 4, "orders", certify=False, final_only=True)
    for res in (full, fast):
        res.cost["ratio_8"] = 2.0
    assert "--final-only (final_only=True) needs 5 Hessian-vector products per iteration " \
           "instead of 16." in _recommendation(full)
    assert "--final-only" not in _recommendation(fast)
    full.cost["ratio_8"] = 0.5
    assert "--final-only" not in _recommendation(full)


def test_advise_takes_final_only_with_a_search_only():
    """``crosscurv.advise(..., search=SPACE, final_only=True)`` is the final-only search; without a
    search the option is refused."""
    import crosscurv

    _, task, lam = _problems()[1]
    res = crosscurv.advise(task, 0.25 / lam, 4, search="orders", checks=False, final_only=True)
    assert res.records.final_only
    with pytest.raises(AdviceError, match="final_only is an option of a search"):
        crosscurv.advise(task, 0.25 / lam, 4, final_only=True)


@pytest.mark.parametrize("final_only", [False, True])
def test_search_progress_counts_the_run_and_the_certification(final_only):
    """``progress(j, total)`` climbs to one total over the JC run (the sweep's iterations
    included) and the certification, so a user sees the certification too."""
    _, task, lam = _problems()[1]
    seen = []
    res = search(task, 0.25 / lam, 6, "stages", final_only=final_only,
                 progress=lambda j, t: seen.append((j, t)))
    total = (12 if final_only else 6) + 6
    assert {t for _, t in seen} == {total}
    assert [j for j, _ in seen] == list(range(1, total + 1))
    assert any(r["certified"] is not None for r in res.front)


def _zoo():
    from crosscurv.experiments.problems.zoo import BEYOND, FRESH, ZOO

    return [p for p in ZOO + BEYOND + FRESH]


@pytest.mark.portable
@pytest.mark.parametrize("problem", _zoo(), ids=lambda p: p.name)
def test_the_sweep_equals_the_forward_states_on_every_zoo_problem(problem):
    """The promise held to every problem of the zoo, beyond it and the fresh ones (at ``eta
    lambda_max = 1``, ``K = 7``): the sweep's ``l^K`` and ``c^K`` are the forward states' to
    rounding. Float64: fixed bounds. The float32 round: ``8 K`` float32 roundings of the largest
    term (the bound of the float32 test below), or where the problem amplifies rounding more (a
    Cholesky factor of an ill-conditioned matrix) 8 times the change of the forward states when
    ``theta^0`` moves by one float32 rounding, whichever is larger: measured, on the machine."""
    from crosscurv.experiments.problems.zoo import lambda_max0

    task = problem.task(0)
    if task.n_blocks < 2:
        pytest.skip("one block: no pairs")
    K = 7
    lr = 1.0 / lambda_max0(task)
    a, b = pair_run(task, lr, K), pair_adjoint(task, lr, K)
    assert a.status == b.status and a.iters == b.iters
    tol = (1e-12, 1e-10, 1e-12)
    if task.dtype != torch.float64:
        eps = float(torch.finfo(task.dtype).eps)
        moved = problem.task(0)
        moved.params = {n: v * (1 + eps) for n, v in moved.params.items()}
        c = pair_run(moved, lr, K)
        sens = [float(np.nanmax(np.abs(x - y)) / max(np.nanmax(np.abs(x)), 1e-300))
                for x, y in ((a.loss_jc, c.loss_jc), (a.linear[-1], c.linear[-1]),
                             (a.pair_curvature[-1], c.pair_curvature[-1]))]
        tol = tuple(max(8 * K * eps, 8 * s) for s in sens)
    np.testing.assert_allclose(b.loss_jc, a.loss_jc, rtol=tol[0])  # routes differ in kernels
    fin = np.isfinite(a.linear[-1])
    scale = np.abs(a.linear[-1][fin]).max()
    np.testing.assert_allclose(b.linear[-1][fin], a.linear[-1][fin], rtol=0, atol=tol[1] * scale)
    cs = np.abs(a.pair_curvature[-1]).max()
    np.testing.assert_allclose(b.pair_curvature[-1], a.pair_curvature[-1], rtol=0,
                               atol=tol[2] * cs)


@pytest.mark.portable
def test_the_sweep_in_float32_agrees_to_float32_rounding():
    """On the built-in smoke MLP in float32 (the default dtype) the two routes sum the same products
    in different orders: they agree to a bound of ``8 K`` float32 roundings of the largest term
    (measured: 4e-7 relative at ``K = 5``, 2e-7 at ``K = 20``), and rank the orders alike."""
    from crosscurv.experiments.tasks.loading import load_task

    task, settings = load_task("mlp", "smoke", device=torch.device("cpu"))
    K = 5
    a, b = pair_run(task, settings["lr"], K), pair_adjoint(task, settings["lr"], K)
    scale = np.abs(a.linear[-1]).max()
    eps = float(torch.finfo(torch.float32).eps)
    np.testing.assert_allclose(b.linear[-1], a.linear[-1], rtol=0, atol=8 * K * eps * scale)
    assert np.argmin(a.linear[-1]) == np.argmin(b.linear[-1])


def test_full_predictions_that_reverse_best_and_runner_up_swap_them():
    """A final-only front ranks by predictions without the quadratic term; where the full ones
    (the certification's) reverse a row's best and runner-up, the row names the better of the two
    with its stages and one-step term, the margin stays positive and ``on_front`` follows."""
    from crosscurv.numeric.pattern_search_certify import _full_estimates

    def row(d, best, est, ru, ru_est):
        return {"stages": d, "best": best, "stages_text": "?", "estimate": est, "one_step": 0.5,
                "runner_up": ru, "runner_up_estimate": ru_est, "margin": ru_est - est,
                "on_front": True}

    front = [row(1, "jc", 0.0, None, float("nan")), row(2, "gs:1,2,3", -3.0, "1<-2,1<-3", -2.0),
             row(3, "gs:3,2,1", -4.0, "gs:2,1,3", -3.5)]
    own = {"gs:1,2,3": [-1.0], "1<-2,1<-3": [-1.5], "gs:3,2,1": [-1.2], "gs:2,1,3": [-1.1]}
    _full_estimates(front, own, 3, lambda name: {"1<-2,1<-3": 0.25}[name])
    swapped, kept = front[1], front[2]
    assert (swapped["best"], swapped["runner_up"]) == ("1<-2,1<-3", "gs:1,2,3")
    assert (swapped["estimate"], swapped["runner_up_estimate"], swapped["margin"]) == (
        -1.5, -1.0, 0.5)
    assert swapped["stages_text"] == "{2,3} > {1}" and swapped["one_step"] == 0.25
    assert (kept["best"], kept["estimate"]) == ("gs:3,2,1", -1.2)
    assert kept["margin"] == pytest.approx(0.1)
    assert kept["stages_text"] == "?" and kept["one_step"] == 0.5  # not reversed: untouched
    assert swapped["on_front"] and not kept["on_front"]  # -1.2 is above -1.5
