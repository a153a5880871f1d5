"""The driver: which block scheme does a user's step perform (``crosscurv validate-step``)?"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from crosscurv.theory.patterns import DelayPattern, PatternError, jacobi

from .. import tree
from ..hvp_differences import CurvatureRoute
from ..optimizers import STATE_BUFFERS, block_factors, parse_optimizer
from ..steps import scheme_step
from ..threads import computes_with_threads
from .candidates import Candidate, candidate_patterns, evaluate, pattern_label
from .factors import StepFactors, inferred_factors
from .freshness import freshness_fit
from .inputs import UserStep, ValidationInputError, call_step
from .report import StepReport
from .states import default_eta0, seeded_optimizer_states, seeded_states

__all__ = ["identify_step"]


@computes_with_threads
def identify_step(user: UserStep, *, seeds: Sequence[int] = (0, 1, 2), perturb: float = 0.5,
                  eta0: float | None = None, n_etas: int = 5, rtol: float = 1e-9,
                  atol_eps: float = 64.0, max_all_orders: int = 4, fit: bool = True,
                  block_lr: str | Mapping | None = None, infer_factors: bool = True,
                  optimizer=None) -> StepReport:
    """Which scheme does ``user.step`` perform? (See the module docstring.)

    Args:
        user: the :class:`UserStep` (task in float64).
        seeds: seeds of the states (:func:`seeded_states`).
        perturb: perturbation size of the states, relative to each tensor's RMS.
        eta0: largest step size (default :func:`default_eta0`).
        n_etas: number of step sizes ``eta0 * 2^-k``, ``k = 0..n_etas-1`` (>= 3).
        rtol, atol_eps: the match tolerance, per state and ``eta``:
            ``||U - R|| <= rtol * ||R - theta|| + atol_eps * eps64 * ||theta||``
            (round-off relative to the step size, plus the round-off of
            storing ``theta - eta g`` itself).
        max_all_orders: try every GS order up to this many blocks.
        fit: also fit the second-order term (:func:`freshness_fit`) and try
            the pattern it suggests as a candidate.
        block_lr: per-block step factors ``"NAME=FACTOR,..."`` or ``{name:
            factor}`` (``crosscurv run --block-lr``): block ``i`` of every
            candidate steps with ``eta f_i``.
        infer_factors: with no ``block_lr``, read the factors from the
            step's first-order term (:func:`infer_step_factors`) and use them
            when they differ between blocks.
        optimizer: ``"momentum:BETA"`` or ``"adam[:B1,B2,EPS]"``
            (:func:`crosscurv.numeric.optimizers.parse_optimizer`): the step is called
            as ``step(params, lr, state)`` with a seeded optimizer state
            (:func:`seeded_optimizer_states`, heavy ball's buffer or Adam's
            moments at step 3) and compared with the optimizer-aware scheme
            steps of :func:`crosscurv.numeric.optimizers.optimizer_scheme_step` (block
            ``i``'s fresh gradient feeds its move and its state).  The
            factors are not inferred and the second-order fit is skipped
            (the fit's form is that of plain gradient steps).

    Returns:
        a :class:`StepReport`.  Curvature products (the default ``eta0`` and
        the fit) fall back to central differences of gradients when the model
        has no second derivatives (:class:`CurvatureRoute`).
    """
    if n_etas < 3:
        raise ValidationInputError(f"need at least 3 step sizes to observe an order, got {n_etas}")
    task = user.task
    given = None
    if block_lr is not None:
        fs = block_factors(task, block_lr)
        given = StepFactors(fs, list(fs), [0.0] * task.n_blocks, "--block-lr")
    states = seeded_states(task, seeds, perturb)
    spec = parse_optimizer(optimizer)
    opt_states = seeded_optimizer_states(task, spec, states, seeds) if spec.stateful else None
    ost = [None] * len(states) if opt_states is None else opt_states

    route = CurvatureRoute(task.loss)
    if eta0 is None:
        eta0 = default_eta0(task, states, route=route)
    if not (eta0 > 0 and math.isfinite(eta0)):
        raise ValidationInputError(f"eta0 must be a positive finite number, got {eta0!r}")
    etas = [eta0 * 2.0**-k for k in range(n_etas)]
    user_outs = [[call_step(user.step, st, h, user.name, ost[si]) for h in etas]
                 for si, st in enumerate(states)]
    nondet = _nondeterminism(user, states[0], etas[0], user_outs[0][0], ost[0])
    deterministic = nondet <= rtol

    factors, notes = given, []
    if factors is None and infer_factors and deterministic and not spec.stateful:
        factors, notes = inferred_factors(task, states, etas, user_outs)
    fl = None if factors is None else factors.factors
    cands = candidate_patterns(task, user.pattern, max_all_orders)
    results = [evaluate(c, user, states, etas, user_outs, rtol, atol_eps, fl, spec, opt_states)
               for c in cands]
    report = StepReport(user.name, task, user.pattern, etas, list(seeds), perturb, rtol, atol_eps,
                        results, deterministic=deterministic, nondeterminism=nondet,
                        factors=factors)
    report.notes.extend(notes)
    report.optimizer = spec.describe()
    _state_notes(report, spec)
    if fit and task.n_blocks > 1 and deterministic and not spec.stateful:
        report.fit = freshness_fit(user, states, etas[-1], factors=fl, route=route)
        _use_fit(report, user, states, etas, user_outs, cands)
    if route.products or route.rough:
        report.route = route
    _route_note(report, route)
    _explain(report)
    return report


def _nondeterminism(user: UserStep, state: Mapping, eta: float, first: Mapping, opt_state) -> float:
    """``||U(theta, eta) - U'(theta, eta)|| / ||theta_JC - theta||``: two calls with the same input
    (``first`` is the earlier call's result), relative to the JC step's size."""
    task = user.task
    again = call_step(user.step, state, eta, user.name, opt_state)
    jc0 = scheme_step(task, state, jacobi(task.n_blocks), eta)
    stepn = float(tree.norm(tree.sub(jc0, state))) or 1.0
    return float(tree.norm(tree.sub(again, first))) / stepn


def _state_notes(report: StepReport, spec) -> None:
    """Notes on the optimizer state the step got, and on a step that is not a function."""
    if spec.stateful:
        report.notes.append(
            f"optimizer {spec.describe()}: the step got a seeded state "
            f"({', '.join(STATE_BUFFERS[spec.name])}) and is compared with the optimizer-aware "
            "scheme steps; no second-order fit"
        )
    if not report.deterministic:
        report.notes.append(
            "two calls with the same (params, lr) returned different results: the step keeps state "
            "between calls (for example a gradient cached from an earlier call: a stale gradient)"
        )


def _route_note(report: StepReport, route: CurvatureRoute) -> None:
    """A note when a product by differences of gradients behind the fit is uncertain."""
    if (
        route.name == "central-differences"
        and report.fit is not None
        and route.max_rel_error > 0.05
    ):
        report.notes.append(
            f"a curvature product by differences of gradients is uncertain (estimated relative "
            f"error {route.max_rel_error:.1e}, e.g. a ReLU kink or float32 arithmetic inside the "
            "model within the difference step): the second-order fit may be off; the matches "
            "above need gradients only"
        )


def _factor_list(report: StepReport):
    return None if report.factors is None else report.factors.factors


def _use_fit(report: StepReport, user: UserStep, states, etas, user_outs, cands) -> None:
    task, ft = user.task, report.fit
    names = task.block_names

    def pairs_text(pairs):
        return ", ".join(f"{names[i]}<-{names[j]}" for i, j in pairs)

    if ft.is_pattern_form:
        pairs = ft.inferred_pairs(1)
        try:
            pat = DelayPattern(task.n_blocks, frozenset(pairs), "inferred")
        except PatternError as exc:
            report.notes.append(
                "the second-order term has delay-pattern form but its pairs form no acyclic "
                f"pattern ({exc})"
            )
            return
        known = [c for c in cands if c.pattern.pairs == pat.pairs]
        if known:
            if "inferred" not in known[0].roles:
                known[0].roles.append("inferred")
        else:
            cand = Candidate(pattern_label(task, pat), pat, ["inferred"])
            report.results.append(
                evaluate(cand, user, states, etas, user_outs, report.rtol, report.atol_eps,
                         _factor_list(report))
            )
    elif ft.is_sign_flipped:
        report.notes.append(
            "the freshness term has the WRONG SIGN for pairs "
            + pairs_text(ft.inferred_pairs(-1))
            + ": the step's second-order term is -sum H_ij g_j where a sequential scheme has +sum "
              "H_ij g_j "
              "(e.g. the fresh state built as theta_j + eta g_j instead of theta_j - eta g_j)"
        )
    else:
        worst = max(ft.residual)
        report.notes.append(
            "the step's second-order term is not of delay-pattern form (largest fit residual "
            f"{worst:.2f}; coefficients not all 0 or 1): it is no scheme of Definition 2 (e.g. "
            "fresh weights combined with stale activations or adjoints)"
        )


def _explain(report: StepReport) -> None:
    if report.matches:
        return
    finite = [r.order for r in report.results if math.isfinite(r.order)]
    if finite and max(finite) < 1.5:
        report.notes.append(
            "the step differs from every candidate at first order in eta: its gradient is not the "
            "gradient at the current point (a stale gradient from another point, a wrong "
            "learning-rate scaling, or a wrong sign)"
        )
