"""Guarding the ``eta^3`` coefficient against cancellation with a cubic tilt.

An order study of an ``O(eta^3)`` remainder observes order 3 only if the ``eta^3`` coefficient
``c3`` is not (nearly) zero by cancellation among its terms (:func:`c3_terms`). :func:`guard_cubic`
checks ``|c3| >= kappa * sum |terms|`` and, when it fails, adds the cubic tilt ``sigma/6 (u.(theta -
theta^0))^3`` (:func:`tilt_task`), which leaves ``g`` and ``H`` at ``theta^0`` (hence ``C_S``)
unchanged and moves ``c3`` by ``sigma`` times :func:`tilt_weights`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crosscurv.numeric import tree
from crosscurv.numeric.steps import block_keys
from crosscurv.numeric.task import Task
from crosscurv.theory.patterns import DelayPattern

from .problem import Problem


def c3_terms(task: Task, pattern: DelayPattern, params=None) -> list[float]:
    """The terms of the one-step ``eta^3`` coefficient ``c3`` (``crosscurv.theory.one_step``), each
    a float.

    ``[-g^T M_S^2 g, -g^T H M_S g, -1/2 T[E_i g, P_i g, P_i g] for each block i]`` (``E_i g`` keeps
    block ``i`` of ``g``, ``P_i g`` the blocks of ``S(i)``); their sum is ``c3``. Computed with the
    matrix-free products of :mod:`numeric`.
    """
    from crosscurv.numeric.curvature import masked_product
    from crosscurv.numeric.hvp import grad, hvp
    from crosscurv.numeric.third import third_derivative

    p = task.params if params is None else params
    _, g = grad(task.loss, p)
    keys = block_keys(task)
    mg = masked_product(task, p, pattern, g)
    mmg = masked_product(task, p, pattern, mg)
    hmg = hvp(task.loss, p, mg)
    terms = [-float(tree.dot(g, mmg)), -float(tree.dot(g, hmg))]
    for i in range(task.n_blocks):
        fresh = pattern.fresh_items(i, keys)
        if not fresh:
            terms.append(0.0)
            continue
        pg = tree.restrict(g, fresh)
        terms.append(-0.5 * float(third_derivative(task.loss, p, tree.restrict(g, keys[i]), pg,
                                                   pg)))
    return terms


def tilt_weights(task: Task, pattern: DelayPattern, u: dict, params=None) -> list[float]:
    """What a unit tilt along ``u`` adds to each block's cubic term of ``c3``.

    ``w_i = -1/2 (u.E_i g) (u.P_i g)^2`` (the tilt adds ``sigma u^{(x)3}`` to ``T``).
    """
    from crosscurv.numeric.hvp import grad

    p = task.params if params is None else params
    _, g = grad(task.loss, p)
    keys = block_keys(task)
    out = []
    for i in range(task.n_blocks):
        fresh = pattern.fresh_items(i, keys)
        a = float(tree.dot(u, tree.restrict(g, keys[i])))
        b = float(tree.dot(u, tree.restrict(g, fresh))) if fresh else 0.0
        out.append(-0.5 * a * b * b)
    return out


def _tilt_directions(task: Task) -> list[dict]:
    """Unit tilt directions ``u = sum_i alpha_i E_i g / ||E_i g||^2`` (normalised), 6 weightings."""
    from crosscurv.numeric.hvp import grad

    _, g = grad(task.loss, task.params)
    keys = block_keys(task)
    n = task.n_blocks
    weightings = [
        [1.0] * n,
        [1.0 + i for i in range(n)],
        [float(n - i) for i in range(n)],
        [1.0 + 2.0 * (i % 2) for i in range(n)],
        [3.0**i for i in range(n)],
        [3.0 ** (n - 1 - i) for i in range(n)],
    ]
    out = []
    for alpha in weightings:
        u = tree.zeros_like(g)
        for a, ks in zip(alpha, keys):
            gi = tree.restrict(g, ks)
            n2 = float(tree.dot(gi, gi))
            if n2 > 0:
                u = tree.add(u, tree.scale(gi, a / n2))
        un = float(tree.norm(u))
        if un > 0:
            out.append(tree.scale(u, 1.0 / un))
    return out


@dataclass
class CubicGuard:
    """Outcome of :func:`guard_cubic`: the (possibly tilted) ``problem``, the tilt ``sigma`` (0:
    none), the guarded ``coefficient`` after it, the ``magnitude`` (sum of its terms' magnitudes),
    the required ratio ``kappa`` and absolute size ``least``, and whether both hold (``achieved``).
    """

    problem: Problem
    sigma: float
    coefficient: float
    magnitude: float
    kappa: float
    least: float = 0.0
    achieved: bool = True


def _term_layout(task: Task, signed, local: bool) -> tuple[list[float], list[tuple[int, int]]]:
    """Signed terms of all patterns, and for each term ``(pattern index, block)`` (block -1: not a
    T-term)."""
    terms, where = [], []
    for p, (pattern, sign) in enumerate(signed):
        t = c3_terms(task, pattern)
        head = t[:1] if local else t[:2]  # l0 = c3 + g^T H M_S g drops the -g^T H M_S g term
        terms += [sign * x for x in head] + [sign * x for x in t[2:]]
        where += [(p, -1)] * len(head) + [(p, i) for i in range(len(t) - 2)]
    return terms, where


def guard_cubic(problem: Problem, signed_patterns, kappa: float = 0.25, local: bool = False,
                absolute: float = 1e-3) -> CubicGuard:
    """Make the leading ``eta^3`` coefficient non-degenerate by construction.

    The coefficient guarded is ``sum_p sign_p * c3(pattern_p)`` (``[(S, +1)]`` for the one-step gap,
    ``[(GS_o1, +1), (GS_o2, -1)]`` for two GS orders). The guard requires

    * ``|coefficient| >= kappa * sum |terms|`` (terms of :func:`c3_terms`), and
    * ``|coefficient| >= absolute * lam^2 * sum_p sum_i ||E_i g|| ||P_i^p g||`` (``lam`` the
      untilted curvature scale).

    When either fails it adds the smallest cubic tilt ``sigma/6 (u.(theta - theta^0))^3``
    (:func:`tilt_task`; ``g``, ``H`` and ``C_S`` at ``theta^0`` unchanged) over the directions of
    :func:`_tilt_directions` and a geometric grid of sizes, capped at ``lam / |u.g|``; if none
    meets both, the closest capped tilt with ``achieved=False``. ``local=True`` guards
    ``l0 = c3 + g^T H M_S g`` instead, the ``eta^3`` coefficient of Theorem 2's remainder at k = 1.
    """
    from crosscurv.numeric.hvp import grad

    task = problem.task
    terms, where = _term_layout(task, signed_patterns, local)
    _, g = grad(task.loss, task.params)
    keys = block_keys(task)
    natural = 0.0
    for pattern, _ in signed_patterns:
        for i in range(task.n_blocks):
            fresh = pattern.fresh_items(i, keys)
            if fresh:
                natural += float(tree.norm(tree.restrict(g, keys[i]))) * float(tree.norm(
                    tree.restrict(g, fresh)))
    least = absolute * problem.scale**2 * natural

    def judge(vals):
        coef, mag = sum(vals), sum(abs(v) for v in vals)
        ratio = abs(coef) / (kappa * mag) if mag else (math.inf if coef else 0.0)
        size = abs(coef) / least if least else math.inf
        return coef, mag, min(ratio, size)

    coef, mag, score = judge(terms)
    if score >= 1.0:
        return CubicGuard(problem, 0.0, coef, mag, kappa, least, True)
    best = None  # (achieved, -|sigma| if achieved else score, sigma, u)
    for u in _tilt_directions(task):
        weights = [tilt_weights(task, pattern, u) for pattern, _ in signed_patterns]
        w = [0.0 if i < 0 else signed_patterns[p][1] * weights[p][i] for p, i in where]
        if not any(w):
            continue
        ug = abs(float(tree.dot(u, g)))
        cap = problem.scale / ug if ug > 0 else problem.scale / float(tree.norm(g))
        for j in range(60, -1, -1):  # smallest sizes first
            for sign in (1.0, -1.0):
                sig = sign * cap * 2.0**-j
                _, _, sc = judge([t + sig * x for t, x in zip(terms, w)])
                cand = (sc >= 1.0, -abs(sig) if sc >= 1.0 else sc, sig, u)
                if best is None or cand[:2] > best[:2]:
                    best = cand
    if best is None:
        raise ValueError("no tilt direction moves the eta^3 coefficient (zero block gradients?)")
    achieved, _, sigma, u = best
    tilted = problem.tilted(sigma, u)
    terms2, _ = _term_layout(tilted.task, signed_patterns, local)
    coef2, mag2, score2 = judge(terms2)
    return CubicGuard(tilted, sigma, coef2, mag2, kappa, least, bool(achieved and score2 >= 1.0
                                                                     - 1e-6))
