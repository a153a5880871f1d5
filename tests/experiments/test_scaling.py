"""``crosscurv scaling`` and the machinery behind it (crosscurv.experiments.scaling, problems,
figures).

The full study (with the MNIST MLP) takes minutes and runs in ``make report``; here the command runs
on the quartic problem only (``--problems quartic``).
"""

from __future__ import annotations

import json
import math

import mpmath
import pytest
import torch
from PIL import Image

from crosscurv.experiments import scaling as S
from crosscurv.experiments.cli import main
from crosscurv.experiments.problems import (mnist_mlp_problem, quartic_problem, relu_kink_radius,
                                            tanh_mlp_problem)
from crosscurv.experiments.scaling.figures import FIGURES
from crosscurv.numeric import tree
from crosscurv.numeric.hvp import grad
from crosscurv.theory.patterns import chain


@pytest.fixture(scope="module")
def quartic_run(tmp_path_factory):
    """One quick run of the command on the quartic problem: (exit code, JSON, out dir)."""
    out = tmp_path_factory.mktemp("scaling")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["scaling", "--quick", "--problems", "quartic", "--json", "--out", str(out)])
    return rc, json.loads(buf.getvalue()), out


def test_command_writes_report_figures_and_json_orders(quartic_run):
    rc, orders, out = quartic_run
    assert rc == 0
    assert list(orders) == ["quartic"]
    assert set(orders["quartic"]) == set(S.OFFICIAL)
    for q, p in orders["quartic"].items():
        assert abs(p - S.EXPECTED[q]) <= S.TOLERANCE, (q, p)
    text = (out / "scaling.md").read_text()
    assert "## quartic" in text and "least-squares order" in text
    assert "All orders are within tolerance." in text
    first = text.splitlines()[2:4]  # what was found comes first
    assert first[0].startswith("- quartic: fitted orders 3.0")
    assert first[0].endswith("(expected 3, 3, 2, 3).")
    assert first[1] == "- Every fitted order is within tolerance."
    for stem in FIGURES:
        png = out / "figures" / f"{stem}.png"
        assert f"figures/{stem}.png" in text
        with Image.open(png) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200


def test_exit_code_1_and_report_when_an_order_is_outside_tolerance(quartic_run, tmp_path,
                                                                   monkeypatch, capsys):
    # the same real results, judged with a tolerance no fitted order can meet
    results = S.scaling_suite(quick=True, problems=["quartic"])
    monkeypatch.setattr(S, "scaling_suite", lambda **kw: results)
    monkeypatch.setattr(S, "TOLERANCE", 1e-12)
    rc = main(["scaling", "--quick", "--problems", "quartic", "--out", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "outside tolerance: quartic one_step" in err
    assert "Outside tolerance: quartic one_step" in (tmp_path / "scaling.md").read_text()


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["scaling", "--problems", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("crosscurv: error: unknown problem(s) nope")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["scaling", "--problems", "quartic", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot create output folder" in err[0]


def test_study_drops_points_below_the_floor_and_fits_the_rest():
    etas = S.eta_grid(0.5)
    errors = [3.0 * e**3 for e in etas]
    floors = [errors[-1] * 1.5] * len(etas)  # the last point lies below its floor
    st = S.make_study("synthetic", "one_step", etas, errors, floors, predicted=3.0)
    assert st.n_kept == 5 and not st.points[-1]["kept"]
    assert st.fitted == pytest.approx(3.0, abs=1e-12) and st.min_rate == pytest.approx(3.0,
                                                                                       abs=1e-12)
    assert st.measured == pytest.approx(3.0) and st.extrapolated == pytest.approx(3.0)
    assert "dropped (below floor)" in st.table() and st.within()
    bad = S.make_study("synthetic", "one_step", etas, [e**2 for e in etas], [0.0] * 6)
    assert bad.fitted == pytest.approx(2.0) and not bad.within()


def test_loss_gap_is_exact_for_a_quartic_and_matches_a_plain_difference():
    problem = quartic_problem(11, (2, 3))
    task, poly = problem.task, problem.poly
    gen = torch.Generator().manual_seed(0)
    a = {k: v + 0.1 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k,
         v in task.params.items()}
    b = task.params
    with mpmath.workdps(40):
        flat = lambda p: [mpmath.mpf(float(x)) for x in tree.flatten(p)]  # noqa: E731
        exact = poly.loss_mp(flat(a)) - poly.loss_mp(flat(b))
        assert abs(S.loss_gap(task, a, b) - float(exact)) <= 1e-15 * abs(float(exact))
    mlp = tanh_mlp_problem(2, (3, 4, 2), n_blocks=2).task
    a = {k: v + 0.05 for k, v in mlp.params.items()}
    plain = float(mlp.loss(a)) - float(mlp.loss(mlp.params))
    assert S.loss_gap(mlp, a, mlp.params) == pytest.approx(plain, rel=1e-9)


def test_relu_kink_radius_is_where_the_first_unit_flips():
    problem = mnist_mlp_problem(0, examples=4, widths=(784, 16, 12, 10), scale_iters=2)
    task = problem.task
    _, g = grad(task.loss, task.params)
    d = {k: -v for k, v in g.items()}
    radius = relu_kink_radius(problem, d)
    assert math.isfinite(radius) and radius > 0
    x = problem.extras["x"]

    def signs(eta):
        p = {k: task.params[k] + eta * d[k] for k in d}
        h, out = x, []
        for l in (1, 2):
            z = h @ p[f"layer{l}.weight"].T + p[f"layer{l}.bias"]
            out.append(z > 0)
            h = torch.relu(z)
        return torch.cat([t.reshape(-1) for t in out])

    base = signs(0.0)
    assert torch.equal(signs(0.5 * radius), base)  # no unit flips inside the radius

    # the radius is the first-order flip for a step of either sign: the linearised pre-activations
    # z +- eta z_dot (an explicit jvp of the two hidden layers) first reach zero at eta = radius.
    # Along
    # +direction the actual flip can come much later: on seed 0 the unit attaining the minimum moves
    # away
    # from zero along +d (the first unit moving towards zero crosses at 9x radius, to first order).
    def pre(p):
        h, out = x, []
        for l in (1, 2):
            z = h @ p[f"layer{l}.weight"].T + p[f"layer{l}.bias"]
            out.append(z.reshape(-1))
            h = torch.relu(z)
        return torch.cat(out)

    z, zdot = torch.func.jvp(pre, (dict(task.params),), (d,))
    moving = zdot != 0
    assert float((z[moving].abs() / zdot[moving].abs()).min()) == pytest.approx(radius, rel=1e-9)
    # to first order, +direction flips a unit first at its crossing, never inside radius
    towards = z * zdot < 0
    assert float((-z[towards] / zdot[towards]).min()) >= radius


def test_gs_order_invariance_study_reports_equal_C_S():
    problem = quartic_problem(5, (1, 2, 2))
    st = S.order_invariance_study(problem, (0, 1, 2), (2, 1, 0))
    half = st.info["C_cross_half"]
    for key in ("C_S_order1", "C_S_order2", "C_S_order1_numeric", "C_S_order2_numeric"):
        assert st.info[key] == pytest.approx(half, rel=1e-10, abs=1e-14)
    assert st.predicted is not None and st.fitted == pytest.approx(3.0, abs=0.15)
    # chain patterns differ from GS: their one-step C_S is a different sum of c_ij
    assert S.predicted_coefficients(problem, chain(3))[2] != pytest.approx(half)


def test_optimizer_studies_are_reported_with_their_orders(tmp_path, monkeypatch, capsys):
    """``--optimizers``: the generalized estimates' observed orders, in the JSON and in scaling.md
    (a section of findings that does not set the exit code); the paper's problems are stubbed out to
    keep this fast."""
    from crosscurv.experiments.scaling import optimizers as O

    monkeypatch.setattr(S, "scaling_suite", lambda **kw: [])
    rc = main(["scaling", "--quick", "--problems", "quartic", "--optimizers", "sgd", "--json",
               "--out", str(tmp_path)])
    assert rc == 0
    orders = json.loads(capsys.readouterr().out)["optimizers"]["sgd@4"]
    assert set(orders) == set(O.QUANTITIES)
    # per-block step sizes (F = 1, 4, 0.5): the paper's orders carry over
    for q, p in orders.items():
        assert abs(p - S.EXPECTED[q]) <= S.TOLERANCE, (q, p)
    text = (tmp_path / "scaling.md").read_text()
    assert "## Optimizers beyond the paper" in text and "### `sgd`: cumulative, T fixed (2)" in text
    assert main(["scaling", "--problems", "quartic", "--optimizers", "momentum", "--out", str(
        tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "momentum:BETA" in err[0]
    assert O.parse_rows("none") == () and O.parse_rows("sgd;adam:0.9,0.99,1e-6@8") == (("sgd", 4), (
        "adam:0.9,0.99,1e-6", 8))


def test_an_undefined_order_is_its_own_outcome_and_exits_3(tmp_path, monkeypatch, capsys):
    """Fewer than two points above the floor: no order, reported as 'no point in the asymptotic
    window' (neither ok nor outside); the command exits 3, or 1 when another order is outside its
    tolerance.
    """
    etas = S.eta_grid(1e-5)
    none = S.make_study("synthetic", "one_step", etas, [1e-18 * e for e in etas], [1e-16] * 6)
    assert none.n_kept == 0 and not none.determined
    assert none.outcome() == S.NO_WINDOW and not none.within()
    one = S.make_study("synthetic", "one_step", etas, [1e-15] + [1e-18] * 5, [1e-16] * 6)
    assert one.n_kept == 1 and one.outcome() == S.NO_WINDOW
    fitted = S.make_study("synthetic", "one_step", etas, [e**3 for e in etas], [0.0] * 6)
    assert fitted.outcome() == "ok" and S.make_study("s", "one_step", etas, etas, [0.0]
                                                     * 6).outcome() == "outside"

    def good(q):  # a synthetic study of quantity q whose order is 0.05 above the expected one
        return S.make_study("synthetic", q, etas, [e ** (S.EXPECTED[q] + 0.05) for e in etas], [
            0.0] * 6)

    studies = {q: good(q) for q in S.OFFICIAL + ("jc_only",)}
    studies["recursion"] = S.make_study("synthetic", "recursion", etas, [1e-18] * 6, [1e-16] * 6)
    results = [S.ProblemResult("quartic", "synthetic", studies)]
    assert results[0].failures() == [] and results[0].undetermined() == ["recursion"]
    monkeypatch.setattr(S, "scaling_suite", lambda **kw: results)
    rc = main(["scaling", "--quick", "--problems", "quartic", "--out", str(tmp_path)])
    assert rc == 3
    captured = capsys.readouterr()
    assert f"{S.NO_WINDOW}: quartic recursion" in captured.err and "recursion n/a" in captured.out
    text = (tmp_path / "scaling.md").read_text()
    assert f"Finding, {S.NO_WINDOW}: quartic recursion" in text
    assert "All orders are within tolerance" not in text
    assert f"n/a (0/6 pts) *{S.NO_WINDOW}*" in text and "3 none outside" in text
    # and now the fitted orders are outside: the failure wins
    monkeypatch.setattr(S, "TOLERANCE", 1e-12)
    assert main(["scaling", "--quick", "--problems", "quartic", "--out", str(tmp_path)]) == 1


def test_the_relu_piece_is_the_network_inside_the_kink_radius_and_smooth_beyond():
    from crosscurv.experiments.scaling.relu_piece import relu_piece
    from crosscurv.numeric.steps import scheme_step
    from crosscurv.theory.patterns import gauss_seidel

    net = mnist_mlp_problem(0, examples=4, widths=(784, 16, 12, 10), scale_iters=2)
    piece = relu_piece(net)
    task, ptask = net.task, piece.task
    _, g = grad(task.loss, task.params)
    d = {k: -v for k, v in g.items()}
    radius = relu_kink_radius(net, d)

    def at(eta):
        return {k: task.params[k] + eta * d[k] for k in d}

    assert float(ptask.loss(task.params)) == pytest.approx(float(task.loss(task.params)), rel=1e-15)
    inside = at(0.5 * radius)
    assert float(ptask.loss(inside)) == pytest.approx(float(task.loss(inside)), rel=1e-14)
    # many units flipped: the piece is the smooth extension, no longer the network
    far = at(4096 * radius)
    assert abs(float(ptask.loss(far)) - float(task.loss(far))) > 1e-9
    # the same derivatives at theta0: the same one-step coefficients C_S and c3 (Theorem 1)
    gs = gauss_seidel(task.n_blocks)
    c_net, c_piece = S.predicted_coefficients(net, gs), S.predicted_coefficients(piece, gs)
    for p in (2, 3):
        assert c_piece[p] == pytest.approx(c_net[p], rel=1e-9), p
    # and, beyond the kink radius, the piece's one-step remainder follows c3 eta^3 (the network's
    # does not)
    st = S.one_step_study(piece, gs, eta0=piece.eta0(1.0 / 16), coefficients=c_piece)
    assert st.outcome() == "ok" and st.fitted == pytest.approx(3.0, abs=S.TOLERANCE)
    along_gs = relu_kink_radius(net, {k: (v - task.params[k]) / 2.0**-14 for k, v in
                                      scheme_step(task, task.params, gs, 2.0**-14).items()})
    assert st.info["eta0"] > 2 * min(radius, along_gs)  # the grid starts beyond the first kink


def test_the_report_goes_on_past_an_order_with_no_window_but_not_past_a_failed_one(tmp_path):
    from crosscurv.experiments.reports import build

    for rc, expect_ok in ((3, True), (1, False), (0, True)):
        got = build.build_report(tmp_path / f"r{rc}", "smoke", (), scaling=True, derive=False,
                                 motivation=False, studies=False, device="cpu", command=lambda argv,
                                 rc=rc: rc if argv[0] == "scaling" else 0)
        assert (got == 0) == expect_ok, rc
