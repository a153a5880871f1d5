"""How the JC run of ``crosscurv advise`` steps and predicts, one class per update rule.

:class:`PlainSteps` is the paper's ``theta - eta g`` with the embedded pair of
:mod:`crosscurv.numeric.advice` (the JC-only state ``y`` and the corrected state ``yhat`` at
``theta_hat = theta_JC + yhat``); :class:`OptimizerSteps` is a block-separable optimizer (per-block
step factors, heavy ball, Adam) with the optimizer-aware JC-only estimate and no embedded pair.
Both share the candidates' ``M_S`` rows (:func:`column_products`: one product ``H (E_j v)`` per
fresh block ``j``, shared by every candidate).

The interface :func:`crosscurv.numeric.advice.advise` calls, in this order each run:

* ``start(like, names)`` or ``load(vectors, step, names)`` (a resumed run), then per iteration
  ``iteration(...)`` (the candidates' ``(estimate, error, corrected, one_step)`` at ``theta_JC^k``;
  it releases the point) and ``step(...)`` (``theta_JC^{k+1}``); ``vectors()`` what a checkpoint
  keeps;
* ``checks``: whether the one-step check at ``theta^0`` applies; ``note``: what the recommendation
  adds.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from crosscurv.theory.patterns import DelayPattern, jacobi

from . import tree
from .estimates import propagate, quadratic_from_linear
from .optimizer_estimates import TangentStep, factor_tree, scaled_direction
from .optimizers import OptimizerState, direction_jacobian_apply, optimizer_scheme_step
from .point import PointCurvature
from .trajectory.runner import outside_domain, raised_text

__all__ = ["PatternCandidate", "column_products", "column_sources", "masked_from_columns", "masked",
           "step_error", "error_effect", "carried", "jc_point_step", "first_yhat",
           "corrected_step", "pair_error", "LossUndefined", "PlainSteps", "OptimizerSteps",
           "advice_steps"]


@dataclass
class PatternCandidate:
    """A non-JC candidate: its name, pattern and ``[(i, [fresh j ascending])]`` for the blocks with
    a fresh set."""

    name: str
    pattern: DelayPattern
    plan_rows: list


def column_products(point, keys: list, g: Mapping, sources: Mapping[int, list]) -> dict:
    """``{j: H (E_j g)}`` restricted to the rows of the blocks that read ``j`` (restricted products
    on the graph engine, full batched products otherwise)."""
    if isinstance(point, PointCurvature):
        return {j: point.hvp({k: g[k] for k in keys[j]}, rows) for j, rows in sources.items()}
    named = [(j, (lambda j=j: {k: (g[k] if k in set(keys[j]) else torch.zeros_like(g[k]))
                               for k in g}))
             for j in sources]
    return dict(point.products(named))


def masked_from_columns(cand: PatternCandidate, keys: list, cols: Mapping, like: Mapping) -> dict:
    """``M_S g``: row block ``i`` sums ``[H (E_j g)]_i`` over ``j in S(i)`` in increasing ``j``."""
    out = {}
    for i, fresh in cand.plan_rows:
        for k in keys[i]:
            acc = None
            for j in fresh:
                acc = cols[j][k] if acc is None else acc + cols[j][k]
            out[k] = acc
    return {k: out[k] if k in out else torch.zeros_like(like[k]) for k in like}


def masked(point, cand: PatternCandidate, keys: list, v: Mapping) -> dict:
    """``M_S v`` at ``point`` (Lemma 1): one product per fresh block ``j`` of ``S``, rows of its
    readers."""
    sources: dict = {}
    for i, fresh in cand.plan_rows:
        for j in fresh:
            sources.setdefault(j, []).extend(keys[i])
    cols = column_products(point, keys, v, dict(sorted(sources.items())))
    return masked_from_columns(cand, keys, cols, v)


def step_error(task, theta: Mapping, point, keys: list, c: PatternCandidate, g: Mapping,
               mg: Mapping, lr: float) -> dict | None:
    """What the embedded pair's forcing leaves out at ``theta``: ``r = (theta_S^+ - theta_JC^+) -
    eta^2 M_S g + eta^3 M_S^2 g`` by one exact ``S`` step from ``theta`` (``theta^+`` a scheme's
    step from ``theta``; ``mg`` ``M_S g`` and ``M_S^2 g`` by :func:`masked` at ``point``, the JC
    point at ``theta``): Lemma 1's third-derivative term, the orders above ``eta^3`` and a kink
    crossed by the step. ``None`` where every coordinate of ``r`` is within the rounding of the two
    steps' coordinates, ``|r_i| <= 2 eps (|theta_S^+_i| + |theta_JC^+_i|)`` (rounding, not a dropped
    order; on a quadratic ``r`` is zero). Coordinates, not ``g . r``: where a block's gradient
    vanishes (a LoRA factor ``A`` while ``B = 0``) ``r`` is orthogonal to ``g`` and still moves
    every later iterate."""
    from .steps import scheme_step

    with loss_defined(), torch.no_grad():  # the S step's inner points may leave the domain
        s1 = scheme_step(task, theta, c.pattern, lr, grad_at_params=g)
    lr2, lr3 = lr * lr, lr ** 3
    jc1 = {n: theta[n] - lr * g[n] for n in g}
    e = {n: (s1[n] - jc1[n]) - lr2 * mg[n] for n in g}
    # M_S (M_S g): M_S g lives on the blocks that read a fresh block, so only chains i <- j <- l
    # contribute (none on two blocks)
    readers = {i for i, _ in c.plan_rows}
    chains = [(i, js) for i, fresh in c.plan_rows if (js := [j for j in fresh if j in readers])]
    if chains:
        mmg = masked(point, PatternCandidate(c.name, c.pattern, chains), keys, mg)
        e = {n: e[n] + lr3 * mmg[n] for n in e}
    eps = torch.finfo(next(iter(theta.values())).dtype).eps
    above = any(bool((e[n].abs() > 2 * eps * (s1[n].abs() + jc1[n].abs())).any()) for n in e)
    return e if above else None


def error_effect(point, g: Mapping, y: Mapping, e: Mapping) -> tuple:
    """``(P(y + e) - P(y), H y, H e)`` at ``point``: ``g . e + y . H e + 1/2 e . H e``, the two
    products built together."""
    hs = dict(point.products([("y", lambda: y), ("e", lambda: e)]))
    hy, he = hs["y"], hs["e"]
    return float(tree.dot(g, e) + tree.dot(y, he) + 0.5 * tree.dot(e, he)), hy, he


def carried(e: Mapping | None, he: Mapping | None, r: Mapping | None, lr: float) -> dict | None:
    """``e_{k+1} = (I - eta H_k) e_k + r_k`` (``None``: nothing carried; ``e`` ``None`` is 0,
    ``r`` ``None`` adds nothing)."""
    if e is None:
        return None if r is None else dict(r)
    out = propagate(e, he, None, lr)
    return out if r is None else {n: out[n] + r[n] for n in out}


def jc_point_step(task, point, keys: list, c: PatternCandidate, theta: Mapping, g: Mapping,
                  mg: Mapping, y: Mapping, e: Mapping | None, lr: float, k: int, last: bool,
                  measure: bool = True, lost=None) -> tuple:
    """One candidate's states at ``theta_JC^k``: ``(P(y + e) - P(y), H y, y_{k+1}, e_{k+1})`` with
    ``y_{k+1} = (I - eta H) y + eta^2 M_S g`` and ``e_{k+1}`` :func:`carried` with the measured
    :func:`step_error` (``e`` unchanged where ``measure`` is false; ``y``, ``e`` unchanged at the
    ``last`` iteration). ``mg``: ``M_S g`` at ``point``. ``lost(exc)``: called where the exact
    step leaves the loss's domain (:class:`LossUndefined`), ``e_{k+1}`` then NaN (or ``None``);
    without it the exception propagates."""
    he = None
    if k >= 1 and e is not None:
        effect, hy, he = error_effect(point, g, y, e)
    else:
        effect, hy = 0.0, (point.hvp(y) if k else tree.zeros_like(g))
    if last:
        return effect, hy, y, e
    yn = propagate(y, hy, None, lr)
    yn = {n: yn[n] + lr * lr * mg[n] for n in yn}
    if measure:
        try:
            r = step_error(task, theta, point, keys, c, g, mg, lr)
        except LossUndefined as exc:
            if lost is None:
                raise
            lost(exc)
            return effect, hy, yn, None if e is None else nan_like(e)
        e = carried(e, he, r, lr)
    return effect, hy, yn, e


def first_yhat(point, c: PatternCandidate, keys: list, g: Mapping, mg: Mapping, lr: float) -> dict:
    """The corrected state after the first step, ``yhat_1 = eta^2 M_S (g - eta M_S g)`` at
    ``theta^0``."""
    u = masked(point, c, keys, {n: g[n] - lr * mg[n] for n in g})
    return {n: lr * lr * u[n] for n in g}


class LossUndefined(Exception):
    """The loss raised at a point the embedded pair evaluates and no scheme's run visits
    (``theta_hat``, an exact ``S`` step from a JC point): a Cholesky factor of a matrix not
    positive definite, a distribution's parameter outside its support. The candidate's error is
    unknown from there."""


@contextmanager
def loss_defined():
    """Inside it, a loss that raises outside its domain
    (:func:`crosscurv.numeric.trajectory.outside_domain`) raises :class:`LossUndefined` instead;
    other errors propagate."""
    try:
        yield
    except Exception as exc:
        if not outside_domain(exc):
            raise
        raise LossUndefined(exc) from exc


def nan_like(v: Mapping) -> dict:
    """``v``'s tree filled with NaN: a state lost where the loss is undefined."""
    return {n: torch.full_like(x, math.nan) for n, x in v.items()}


def corrected_step(engine, task, theta: Mapping, loss_jc: float, g: Mapping, yhat: Mapping,
                   e: Mapping | None, effect: float, c: PatternCandidate, keys: list, mg: Mapping,
                   lr: float, last: bool) -> tuple:
    """``(exact^k, trapezoid^k, yhat_{k+1})``: two read-outs of the pair's other member, the loss
    difference at its estimate ``theta_JC^k + yhat_k + e_k`` of ``theta_S^k`` (``e`` ``None``:
    0), and ``yhat``'s step at ``theta_hat = theta_JC^k + yhat_k`` (``yhat`` itself at the
    ``last`` iteration):

    * ``exact^k = L(theta_JC^k + yhat_k + e_k) - L(theta_JC^k)`` (``loss_jc``: ``L(theta_JC^k)``);
    * ``trapezoid^k = 1/2 (g + g(theta_hat)) . yhat_k + effect``, the trapezoid rule along
      ``theta_JC^k -> theta_hat`` and the carried error's ``effect`` ``P(y + e) - P(y)`` on the
      quadratic model at ``theta_JC^k``.

    ``mg``: ``M_S g`` at ``theta_JC^k``. :class:`LossUndefined` where the loss raises at either
    point."""
    with loss_defined():
        at = engine.point(task.loss, {n: theta[n] + yhat[n] for n in theta})
        if e is None:
            far = at.value
        else:
            with torch.no_grad():
                far = task.loss({n: theta[n] + yhat[n] + e[n] for n in theta})
        gh = at.grad
    exact = float(far) - loss_jc
    trapezoid = float(0.5 * tree.dot({n: g[n] + gh[n] for n in g}, yhat)) + effect
    if not last:
        u = masked(at, c, keys, {n: gh[n] - lr * mg[n] for n in g})
        yhat = {n: yhat[n] - lr * (gh[n] - g[n]) + lr * lr * u[n] for n in yhat}
        del u
    at.release()
    return exact, trapezoid, yhat


def pair_error(estimate: float, exact: float, trapezoid: float) -> float:
    """The embedded error of ``estimate``: its larger distance to the pair's two read-outs (the two
    agree to second order along the segment; where the ``S`` run is far from the JC run either
    can miss the gap, and a certificate needs the pair's error to cover it). NaN where either is
    (a read-out lost is no error bar)."""
    d = (abs(exact - estimate), abs(trapezoid - estimate))
    return math.nan if math.isnan(d[0]) or math.isnan(d[1]) else max(d)


class PlainSteps:
    """The paper's steps ``theta - eta g``: the JC-only estimate, its embedded pair (``yhat`` per
    candidate) completed by the local errors of its forcing carried along the run (``error`` per
    candidate).

    ``yhat``: ``{candidate: tree}``, the corrected states (zeros at ``k = 0``). ``error``:
    ``{candidate: tree or None}``, ``e_k``: what the pair's forcing leaves out, measured at every
    step (:func:`step_error`) and carried, ``e_{k+1} = (I - eta H_k) e_k + r_k`` (``None`` while
    nothing is carried).
    """

    checks = True

    def __init__(self):
        self.yhat: dict = {}
        self.error: dict = {}
        #: ``{candidate: (k, what the loss raised)}`` where the pair's points left its domain
        self.undefined: dict = {}

    @property
    def note(self) -> str:
        """What the recommendation adds: where the loss was undefined at the pair's points."""
        if not self.undefined:
            return ""
        parts = [f"{n} from K = {k} ({why})" for n, (k, why) in self.undefined.items()]
        return (" The loss raised at points only the error estimate visits (theta_JC + yhat, or "
                "an exact step's inner points), for " + "; ".join(parts) + ": those candidates' "
                "errors are unknown from there and nothing is certified.")

    def _lose(self, name: str, k: int, exc: Exception) -> None:
        """The candidate's error is unknown from ``k`` on: its states NaN."""
        cause = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
        self.undefined.setdefault(name, (k, raised_text(cause)))
        self.yhat[name] = nan_like(self.yhat[name])
        if self.error.get(name) is not None:
            self.error[name] = nan_like(self.error[name])

    def settings(self) -> dict:
        return {}

    def start(self, like: Mapping, names: Sequence[str]) -> None:
        self.yhat = {n: tree.zeros_like(like) for n in names}
        self.error = {n: None for n in names}

    #: candidates whose first step the one-step check finds outside the expansion (nothing of
    #: theirs is certified at any ``k``): no ``e`` carried
    withdrawn: frozenset = frozenset()

    def vectors(self) -> dict:
        """The checkpoint's vectors: ``yhat:CANDIDATE``, and ``error:CANDIDATE`` where one is
        carried."""
        out = {f"yhat:{n}": v for n, v in self.yhat.items()}
        out.update({f"error:{n}": v for n, v in self.error.items() if v is not None})
        return out

    def load(self, vec: Mapping, step: int, names: Sequence[str]) -> None:
        self.yhat = {n: vec[f"yhat:{n}"] for n in names}
        self.error = {n: vec.get(f"error:{n}") for n in names}
        self.undefined = {n: (step, "before the run was resumed") for n in names
                          if not all(bool(torch.isfinite(v).all()) for v in self.yhat[n].values())}

    def iteration(self, engine, task, point, keys, sources, active, jc_name, g, ys, theta, lr, k,
                  last) -> dict:
        """Every candidate's ``(estimate, error, corrected, eta^2 C_S)`` at ``theta_JC^k``, and the
        steps of its ``y`` and ``e`` (at ``theta_JC^k``) and ``yhat`` (at ``theta_hat^k``);
        releases ``point`` before the ``theta_hat`` points are built."""
        lr2 = lr * lr
        yh = self.yhat
        cols = column_products(point, keys, g, sources) if active else {}
        vals: dict = {jc_name: (0.0, 0.0, 0.0, 0.0)}
        mgs: dict = {}
        effects: dict = {}
        es = dict(self.error)  # e_k, read out at theta_hat below
        loss_jc = float(point.value)
        # at theta_JC^k: M_S g (shared columns), H y, the JC-only estimate and y's step; the carried
        # error e, its effect on the estimate P(y + e) - P(y) and its step
        for c in active:
            mg = mgs[c.name] = masked_from_columns(c, keys, cols, g)
            one = lr2 * float(tree.dot(g, mg))
            y = ys[c.name]
            effects[c.name], hy, ys[c.name], self.error[c.name] = jc_point_step(
                task, point, keys, c, theta, g, mg, y, self.error.get(c.name), lr, k, last,
                measure=c.name not in self.withdrawn and c.name not in self.undefined,
                lost=lambda exc, n=c.name: self._lose(n, k, exc))
            est = float(quadratic_from_linear(tree.dot(g, y), y, hy)) if k else 0.0
            vals[c.name] = (est, one)
            if k == 0 and not last:  # yhat_0 = 0: theta_hat is theta_JC^0
                yh[c.name] = first_yhat(point, c, keys, g, mg, lr)
            del hy, y
        point.release()
        del point
        # at theta_hat = theta_JC^k + yhat_k: the corrected estimate and yhat's step
        for c in active:
            est, one = vals[c.name]
            if k == 0:
                vals[c.name] = (0.0, 0.0, 0.0, one)
                continue
            if c.name in self.undefined:
                vals[c.name] = (est, math.nan, math.nan, one)
                continue
            try:
                cor, trap, yh[c.name] = corrected_step(
                    engine, task, theta, loss_jc, g, yh[c.name], es.get(c.name), effects[c.name],
                    c, keys, mgs[c.name], lr, last)
            except LossUndefined as exc:
                self._lose(c.name, k, exc)
                cor = trap = math.nan
            vals[c.name] = (est, pair_error(est, cor, trap), cor, one)
        return vals

    def step(self, task, theta: Mapping, g: Mapping, lr: float) -> dict:
        """``theta_JC^{k+1} = theta - eta g``."""
        return {n: theta[n] - lr * g[n] for n in theta}


class OptimizerSteps:
    """The JC run's block-separable optimizer (not plain ``sgd``) and the candidates' state
    differences.

    ``state``: the JC run's :class:`crosscurv.numeric.optimizers.OptimizerState` (step ``k`` at
    iteration ``k``); ``ys``: ``{candidate: {buffer: tree}}``, the optimizer-state part of each
    JC-only state (:class:`crosscurv.numeric.optimizer_estimates.TangentStep`), zeros at ``k = 0``.
    """

    checks = False

    def __init__(self, task, setup):
        self.setup, self.spec = setup, setup.spec
        self.factors = list(setup.factors)
        self.f = factor_tree(task, self.factors)
        self.state = OptimizerState()
        self.ys: dict = {}
        self.note = (f" Optimizer {setup.describe()}: the predictions are the optimizer-aware "
                     f"JC-only estimate and carry no error estimate (the embedded pair is derived "
                     f"for plain steps), so none is certified.")

    def settings(self) -> dict:
        return self.setup.settings()

    def start(self, like: Mapping, names: Sequence[str]) -> None:
        self.state = OptimizerState()
        self.ys = {n: {b: tree.zeros_like(like) for b in self.setup.buffers} for n in names}

    def vectors(self) -> dict:
        """The checkpoint's vectors: ``sj:BUFFER`` (JC state) and ``ys:CANDIDATE:BUFFER``."""
        out = {f"sj:{b}": v for b, v in self.state.buffers.items()}
        out.update({f"ys:{n}:{b}": v for n, d in self.ys.items() for b, v in d.items()})
        return out

    def load(self, vec: Mapping, step: int, names: Sequence[str]) -> None:
        self.state = OptimizerState(step, {b: vec[f"sj:{b}"] for b in self.setup.buffers
                                           if f"sj:{b}" in vec})
        self.ys = {n: {b: vec[f"ys:{n}:{b}"] for b in self.setup.buffers} for n in names}

    def iteration(self, engine, task, point, keys, sources, active, jc_name, g, ys, theta, lr, k,
                  last) -> dict:
        """At ``theta_JC^k``: every candidate's ``(estimate, NaN, NaN, eta^2 C_S^phi)`` and its
        state's tangent step; releases ``point``.

        The forcing ``M_S F phi(g_JC^k, s_JC^k)`` comes from the shared columns ``H E_j (F phi)``;
        the JC-only state steps ``(y, ys) <- TangentStep(y, ys, H y - eta M_S F phi)`` (what the
        protocol's ``jc_only`` column does with an optimizer); ``C_S^phi = g^T F J_phi M_S F phi``
        (:func:`crosscurv.numeric.optimizer_estimates.optimizer_delay_curvature`).
        """
        sj, f, lr2, nan = self.state, self.f, lr * lr, math.nan
        w = scaled_direction(self.spec, sj, g, f)
        cols = column_products(point, keys, w, sources) if active else {}
        step = None if last else TangentStep(self.spec, lr, f, sj, g)
        vals: dict = {jc_name: (0.0, 0.0, 0.0, 0.0)}
        for c in active:
            mg = masked_from_columns(c, keys, cols, w)
            jm = direction_jacobian_apply(self.spec, sj, g, mg)
            one = lr2 * float(tree.dot(g, {n: jm[n] * f[n] for n in jm}))
            if k >= 1:
                hy = point.hvp(ys[c.name])
                est = float(quadratic_from_linear(tree.dot(g, ys[c.name]), ys[c.name], hy))
            else:
                hy, est = tree.zeros_like(g), 0.0
            vals[c.name] = (est, nan, nan, one)
            if step is not None:
                ys[c.name], self.ys[c.name] = step.apply(ys[c.name], self.ys[c.name],
                                                         {n: hy[n] - lr * mg[n] for n in hy})
            del hy, mg, jm
        point.release()
        return vals

    def step(self, task, theta: Mapping, g: Mapping, lr: float) -> dict:
        """The JC run's optimizer step from ``theta`` (``g`` its gradient); advances :attr:`state`.
        """
        new, self.state, _ = optimizer_scheme_step(task, theta, jacobi(task.n_blocks), lr,
                                                   self.spec, self.state, self.factors,
                                                   grad_at_params=g)
        return new


def advice_steps(task, setup):
    """:class:`PlainSteps` for plain steps (``setup.plain``), else :class:`OptimizerSteps`."""
    return PlainSteps() if setup.plain else OptimizerSteps(task, setup)


def column_sources(cands, keys) -> dict:
    """``{j: [param keys]}``: the rows of the blocks that read block ``j`` in some candidate
    (:class:`PatternCandidate` ``plan_rows``; ``keys[i]``: block ``i``'s parameter names), ``j``
    ascending."""
    sources: dict = {}
    for c in cands:
        for i, fresh in c.plan_rows:
            for j in fresh:
                rows = sources.setdefault(j, [])
                rows.extend(k for k in keys[i] if k not in rows)
    return dict(sorted(sources.items()))
