"""Errors and certificates for the front of a pattern search, on the search's own predictions.

A front row names, for a budget of ``D`` sequential stages, the best pattern ``S`` and its
runner-up ``R`` by their JC-only predictions ``estimate^K`` (per-pair sums,
:mod:`crosscurv.numeric.pair_records`).  The certificate is that of a single candidate of
:func:`crosscurv.numeric.advice.advise`:

* the embedded-pair error of each named pattern (:mod:`crosscurv.numeric.advice`): the state
  ``yhat`` that keeps what the JC-only estimate drops to first order, at
  ``theta_hat^k = theta_JC^k + yhat_k``::

      yhat_0 = 0,  yhat_1 = eta^2 M_S (g_JC^0 - eta M_S g_JC^0),
      yhat_{k+1} = yhat_k - eta (g(theta_hat^k) - g_JC^k)
                   + eta^2 M_S(theta_hat^k) (g(theta_hat^k) - eta M_S(theta_JC^k) g_JC^k),
      error_S^k = max(|L(theta_hat^k + e_k) - L(theta_JC^k) - estimate_S^k|,
                      |1/2 (g_JC^k + g(theta_hat^k)) . yhat_k + P(y_k + e_k) - P(y_k)
                       - estimate_S^k|),

  with ``estimate_S^k`` the search's per-pair sum, ``e`` the local errors carried along the run
  and ``P(y + e) - P(y)`` their effect on the quadratic model, as advise's
  (:func:`crosscurv.numeric.advice_steps.pair_error`; the pattern's JC-only state ``y`` is
  carried beside ``e``);
* the gates: the one-step check at ``theta^0`` (measured one-step gap against
  ``eta^2 C_S + eta^3 c3``, :func:`crosscurv.numeric.advice_text.check_failures`) and the regime
  gate (``eta * sharpness_k < 2`` for every ``k``, ``sharpness`` as advise's:
  ``lambda_max(H_JC^0)`` converged, then one power step per iteration);
* certified: ``estimate_R - estimate_S > F (N_S + N_R)`` at ``K``, ``F``
  :data:`crosscurv.numeric.certificate.SAFETY` and ``N`` a pattern's largest error over the last
  :data:`crosscurv.numeric.certificate.REMAINDER_WINDOW` iterations, at least the loss's rounding
  and times the edge amplification at ``K`` (advise's certificate between
  two candidates, :func:`crosscurv.numeric.certificate.certify_best`), and both gates hold (the
  one-step check runs only where some budget's margin exceeds that: elsewhere it could withdraw no
  certificate). Each pattern's error includes the local errors of its forcing measured by exact
  scheme steps and carried along the run, as advise's (the pattern's own JC-only state carried
  beside it, one product each per iteration).

Cost: one JC point per iteration (gradient with its graph, one product per fresh block shared by the
named patterns, one power step) and, per named pattern, one gradient at ``theta_hat^k``, one
product per fresh block, the products of its JC-only state and carried error, and one exact scheme
step with one more product per fresh block (what the pair's forcing leaves out); plus the one-step
checks at ``theta^0`` (third derivatives), skipped where nothing could be certified.
"""

from __future__ import annotations

import math

import numpy as np

from crosscurv.theory.pattern_spaces import pair_list
from crosscurv.theory.patterns import as_pattern

from . import tree
from .advice_run import inside_regime
from .advice_steps import (PatternCandidate, column_products, column_sources,
                           masked_from_columns)
from .advice_text import check_failures, check_note, edge_note
from .certificate import SAFETY, edge_amplification, rounding_floor
from .pattern_search_eval import stages_text
from .one_step_check import one_step_check
from .estimates import init_power_vector, power_step, solve_extremes

__all__ = ["rankable", "certify_front", "front_candidates", "first_step_checks", "embedded_errors"]


def rankable(row: dict) -> bool | None:
    """Whether a front row's choice stands out from its runner-up: ``False`` when the predicted
    margin is within the sum of their embedded errors (the search cannot rank the two), ``True``
    when it exceeds it, ``None`` without errors or runner-up."""
    m, e, f = row.get("margin"), row.get("error"), row.get("runner_up_error")
    if row.get("runner_up") is None or not all(
        isinstance(x, float) and math.isfinite(x) for x in (m, e, f)
    ):
        return None
    return bool(m > e + f)


def front_candidates(front: list[dict]) -> list[str]:
    """The named patterns of the rows on the front and their runners-up (JC excluded), in order."""
    names: list[str] = []
    for r in front:
        for n in (r["best"], r["runner_up"]):
            if n is not None and n != "jc" and n not in names and r["on_front"]:
                names.append(n)
    return names


def first_step_checks(task, cands, lr: float, method: str) -> dict:
    """advise's one-step check at ``theta^0`` over the candidates ``cands``
    (:func:`crosscurv.numeric.one_step_check.one_step_check`, the rows :func:`check_failures`
    reads)."""
    named = [(c.name, c.pattern) for c in cands]
    return one_step_check(task, named, tree.clone(task.params), lr, 0, method)


def _sharpness(state: dict, point, theta, seed: int) -> float:
    """advise's regime gate ``lambda_max(H_JC^k)``: converged at ``k = 0``, then the power iteration
    from its eigenvector; the larger of the two."""
    if state.get("p") is None:
        try:
            ext = solve_extremes(point.hvp, theta, seed=seed)
            state["lam0"], state["p"] = float(ext.lam_max), ext.v_max
        except (ValueError, RuntimeError, ArithmeticError):  # non-finite products
            state["lam0"], state["p"] = math.nan, init_power_vector(theta, seed)
    rq, state["p"] = power_step(state["p"], point.hvp(state["p"]))
    return max((x for x in (state["lam0"], rq) if x is not None and math.isfinite(x)),
               default=math.nan)


def embedded_errors(task, lr: float, records, cands, engine, seed: int = 0, progress=None):
    """The errors of ``cands`` at every ``k`` (module docstring) along the JC run, its sharpness and
    each pattern's own JC-only prediction: ``(errors {name: [error^k, k = 1..K]}, rows [{"k",
    "sharpness"}], predictions {name: [g_k . y_k + 1/2 y_k . H_k y_k, k = 1..K]})``; ``error^k``
    is measured against the search's per-pair sum, or against the pattern's own prediction when
    the records hold ``K`` only (``records.final_only``); it is the
    embedded pair's, its other member completed by the local errors carried along the run, as
    advise's (:func:`crosscurv.numeric.advice_steps.jc_point_step`,
    :func:`crosscurv.numeric.advice_steps.corrected_step`)."""
    from .advice_steps import (LossUndefined, corrected_step, first_yhat, jc_point_step,
                               pair_error)
    from .steps import block_keys

    keys = block_keys(task)
    sources, K = column_sources(cands, keys), records.iters
    pl = pair_list(task.n_blocks)
    rows_of = {c.name: np.array([[p in c.pattern.pairs for p in pl]]) for c in cands}
    theta = tree.clone(task.params)
    yh = {c.name: tree.zeros_like(theta) for c in cands}
    ys = {c.name: tree.zeros_like(theta) for c in cands}  # the JC-only states
    es: dict = {c.name: None for c in cands}  # their errors e, None while nothing is carried
    errors: dict = {c.name: [] for c in cands}
    own: dict = {c.name: [] for c in cands}
    gate_rows, state = [], {}
    lost: dict = {}  # {name: (k, what the loss raised)} where the pair's points left its domain
    for k in range(K + 1):
        last = k == K
        point = engine.point(task.loss, theta)
        g = point.grad
        sharp = _sharpness(state, point, theta, seed)
        cols = column_products(point, keys, g, sources)
        mgs = {c.name: masked_from_columns(c, keys, cols, g) for c in cands}
        effect: dict = {}
        e_now, loss_jc = dict(es), float(point.value)  # e_k, read out at theta_hat below
        for c in cands:  # P(y + e) - P(y) and both states' steps, as advise's
            y = ys[c.name]
            effect[c.name], hy, ys[c.name], es[c.name] = jc_point_step(
                task, point, keys, c, theta, g, mgs[c.name], y, es[c.name], lr, k, last,
                measure=c.name not in lost, lost=lambda exc, n=c.name: lost.setdefault(n, (k, exc)))
            if k:  # the pattern's own JC-only prediction g . y + 1/2 y . H y
                own[c.name].append(float(tree.dot(g, y)) + 0.5 * float(tree.dot(y, hy)))
            if k == 0 and not last:
                yh[c.name] = first_yhat(point, c, keys, g, mgs[c.name], lr)
        point.release()
        del point
        for c in cands if k else ():
            try:
                if c.name in lost:
                    raise LossUndefined(lost[c.name][1])
                cor, trap, yh[c.name] = corrected_step(
                    engine, task, theta, loss_jc, g, yh[c.name], e_now[c.name], effect[c.name], c,
                    keys, mgs[c.name], lr, last)
            except LossUndefined as exc:
                lost.setdefault(c.name, (k, exc))
                cor = trap = math.nan
            est = (own[c.name][-1] if records.final_only
                   else float(records.predict(rows_of[c.name], k)[0]))
            errors[c.name].append(pair_error(est, cor, trap))
        if k:
            gate_rows.append({"k": k, "sharpness": sharp})
            if progress is not None:
                progress(k, K)
        if not last:
            theta = {n: theta[n] - lr * g[n] for n in theta}
    return errors, gate_rows, own, lost


def undefined_note(lost: dict) -> str:
    """The recommendation's sentence for the patterns whose error estimate's points left the
    loss's domain (``""`` for none)."""
    if not lost:
        return ""
    parts = [f"{n} from K = {k} ({type(e.args[0] if e.args else e).__name__})"
             for n, (k, e) in lost.items()]
    return (" The loss raised at points only the error estimate visits, for " + "; ".join(parts)
            + ": their errors are unknown from there and they are not certified.")


def _order(errors: dict, name) -> float:
    """A named pattern's first dropped order at ``K``: its largest error over the last
    :data:`crosscurv.numeric.certificate.REMAINDER_WINDOW` iterations (JC's is 0; NaN without
    errors)."""
    from .certificate import REMAINDER_WINDOW

    if name == "jc":
        return 0.0
    e = errors.get(name) if name is not None else None
    return float(max(e[-REMAINDER_WINDOW:])) if e else math.nan


def _last(errors: dict, name) -> float:
    """A named pattern's error at ``K`` (JC's is 0; NaN for a pattern not certified)."""
    if name == "jc":
        return 0.0
    e = errors.get(name) if name is not None else None
    return float(e[-1]) if e else math.nan


def _full_estimates(front: list[dict], own: dict, n_blocks: int, one_step=None) -> None:
    """Replace each front row's estimates at ``K`` (without the quadratic term, from
    :func:`crosscurv.numeric.pair_adjoint.pair_adjoint`) by its patterns' full JC-only predictions
    carried by the certification, and the margin with them; where the full predictions reverse
    the two, the runner-up becomes the row's best (its stages and ``one_step(name)``, ``eta^2
    C_S``, with it), and ``on_front`` follows the full predictions."""
    lowest = 0.0
    for r in front:
        for key, name in (("estimate", r["best"]), ("runner_up_estimate", r["runner_up"])):
            if name is not None and own.get(name):
                r[key] = own[name][-1]
        if r["runner_up"] is not None:
            r["margin"] = r["runner_up_estimate"] - r["estimate"]
            if r["margin"] < 0:  # the restored quadratic term reverses them
                r["best"], r["runner_up"] = r["runner_up"], r["best"]
                r["estimate"], r["runner_up_estimate"] = r["runner_up_estimate"], r["estimate"]
                r["margin"] = -r["margin"]
                r["stages_text"] = stages_text(r["best"], n_blocks)
                if one_step is not None:
                    r["one_step"] = one_step(r["best"])
        if r["stages"] > 1:
            r["on_front"] = bool(r["estimate"] < lowest)
            lowest = min(lowest, r["estimate"])


def certify_front(task, lr: float, records, front: list[dict], *, hvp_method: str = "auto",
                  seed: int = 0, progress=None) -> tuple:
    """Fill each front row's ``error``, ``runner_up_error`` (at ``K``) and ``certified`` (module
    docstring); returns ``(note, predictions)``: the gates' note for the recommendation (``""``
    when they hold) and each named pattern's own JC-only prediction at ``k = 1..K``, ``{name:
    [float]}``. ``progress(k, K)`` after each iteration of the run along the JC trajectory.
    """
    from .protocol import choose_engine

    n = task.n_blocks
    cands = []
    for name in front_candidates(front):
        pat = as_pattern(name, n, list(task.block_names))
        cands.append(PatternCandidate(name, pat, [(i, sorted(pat.fresh(i)))
                                                  for i in range(n) if pat.fresh(i)]))
    engine = choose_engine(task, hvp_method)
    errors, rows, own, lost = embedded_errors(task, lr, records, cands, engine, seed, progress)
    if records.final_only:  # the full predictions at K, quadratic term included
        _full_estimates(front, own, n, lambda name: float(records.one_step(
            [[p in as_pattern(name, n).pairs for p in pair_list(n)]], records.iters)[0]))
    inside = inside_regime(rows, lr)
    floor = rounding_floor(float(records.loss_jc[-1]), task.dtype) if rows else 0.0
    amp = edge_amplification(lr * float(rows[-1]["sharpness"])) if rows else 1.0

    def order(name):  # advise's first dropped order: floored at the loss's rounding, amplified
        o = _order(errors, name)
        return o if name == "jc" else max(o, floor) * amp

    apart = []
    for r in front:
        e, f = _last(errors, r["best"]), _last(errors, r["runner_up"])
        r["error"], r["runner_up_error"] = e, f
        if r["runner_up"] is None or not (math.isfinite(e) and math.isfinite(f)):
            r["certified"] = None
        else:  # advise's certificate between the two: the margin beyond F times both orders
            m, n = r["margin"], order(r["best"]) + order(r["runner_up"])
            r["certified"] = bool(math.isfinite(m) and m > SAFETY * n)
            apart.append(r)
    # the one-step check can only withdraw certificates: run when there is one to withdraw
    checks = [first_step_checks(task, cands, lr, engine.method)] if any(
        r["certified"] for r in apart) else []
    gate = bool(rows) and not check_failures(checks) and bool(inside[-1])
    for r in apart:
        r["certified"] = bool(r["certified"] and gate)
    return (check_note(checks) + (edge_note(rows, inside, lr) if rows else "")
            + undefined_note(lost)), own
