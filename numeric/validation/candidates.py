"""The reference schemes a step is compared with, and the observed order of each difference.

A candidate is a delay pattern (JC, full GS in an order, the declared or the inferred pattern); its
exact step (:mod:`crosscurv.numeric.steps`, Definitions 1 and 2) is compared with the user's step on
the grid ``eta_k = eta0 2^-k``, and the errors above round-off are fitted as ``||U - R|| ~ C eta^p``
(:func:`crosscurv.numeric.orders.observe_order`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import torch

from crosscurv.theory.patterns import DelayPattern, gauss_seidel, jacobi

from .. import tree
from ..optimizers import optimizer_scheme_step
from ..orders import OrderStudy, observe_order
from ..steps import scheme_step
from ..task import Task
from .inputs import UserStep

__all__ = ["Candidate", "order_label", "pattern_label", "candidate_patterns", "reference_step",
           "CandidateResult", "compare", "evaluate"]

EPS64 = float(torch.finfo(torch.float64).eps)


@dataclass
class Candidate:
    """A reference scheme the step is compared with: its ``label`` (``"jc"``, ``"gs:B,A"``,
    ``"pattern {2<-1}"``), ``pattern`` and ``roles`` (``"jc"``, ``"gs order"``, ``"declared"``,
    ``"inferred"``).
    """

    label: str
    pattern: DelayPattern
    roles: list = field(default_factory=list)


def order_label(task: Task, order: Sequence[int]) -> str:
    return ",".join(task.block_names[b] for b in order)


def pattern_label(task: Task, pattern: DelayPattern) -> str:
    if pattern.is_jacobi:
        return "jc"
    if pattern.is_full_gs():
        return "gs:" + order_label(task, pattern.order())
    names = task.block_names
    return "{" + ", ".join(f"{names[i]}<-{names[j]}" for i, j in sorted(pattern.pairs)) + "}"


def candidate_patterns(
    task: Task, declared: DelayPattern | None = None, max_all_orders: int = 4
) -> list[Candidate]:
    """JC, full GS in every block order (``N <= max_all_orders``; else only the declared pattern's
    order, or index order) and the declared pattern; patterns with the same pairs are one candidate.
    """
    n = task.n_blocks
    out: list[Candidate] = []

    def add(p: DelayPattern, role: str) -> None:
        for c in out:
            if c.pattern.pairs == p.pairs:
                if role not in c.roles:
                    c.roles.append(role)
                return
        out.append(Candidate(pattern_label(task, p), p, [role]))

    add(jacobi(n), "jc")
    if n <= max_all_orders:
        orders = list(itertools.permutations(range(n)))
    else:
        orders = [declared.order() if declared is not None else tuple(range(n))]
    for o in orders:
        add(gauss_seidel(n, o), "gs order")
    if declared is not None:
        add(declared, "declared")
    return out


def reference_step(task: Task, params: Mapping, pattern: DelayPattern, lr: float,
                   factors: Sequence[float] | None, spec=None, opt_state=None) -> dict:
    """The exact step of ``pattern`` with block step sizes ``lr f_i`` (plain :func:`scheme_step`
    when all are 1), with optimizer ``spec`` from ``opt_state`` when given
    (:func:`crosscurv.numeric.optimizers.optimizer_scheme_step`)."""
    if spec is not None and spec.stateful:
        return optimizer_scheme_step(task, params, pattern, lr, spec, state=opt_state,
                                     factors=None if factors is None else list(factors))[0]
    if factors is None or all(f == 1.0 for f in factors):
        return scheme_step(task, params, pattern, lr)
    return optimizer_scheme_step(task, params, pattern, lr, "sgd", factors=list(factors))[0]


@dataclass
class CandidateResult:
    """The step against one candidate on the whole grid: ``etas`` (largest first), ``errors``
    (``max_s ||U - R||`` per ``eta``), ``rel_errors`` (over ``||R - theta_s||``), ``within`` (every
    state within the match tolerance) and ``study``, the observed order of the errors above the
    tolerance (:class:`crosscurv.numeric.orders.OrderStudy`).
    """

    candidate: Candidate
    etas: list
    errors: list
    rel_errors: list
    within: list
    study: OrderStudy

    @property
    def matches(self) -> bool:
        return all(self.within)

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def order(self) -> float:
        """Fitted order of the difference (``nan`` when it is at round-off everywhere)."""
        return self.study.slope

    def describe(self) -> str:
        if self.matches:
            return "matches (round-off at every eta)"
        o = self.order
        if not math.isfinite(o):
            return "differs (order undetermined: fewer than 2 points above round-off)"
        return f"differs at O(eta^{round(o)}) (observed order {o:.2f})"

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "roles": list(self.candidate.roles),
            "pattern": self.candidate.pattern.to_dict(),
            "etas": self.etas,
            "errors": self.errors,
            "rel_errors": self.rel_errors,
            "within_tolerance": self.within,
            "matches": self.matches,
            "observed_order": self.order if math.isfinite(self.order) else None,
            "rates": [r if math.isfinite(r) else None for r in self.study.rates],
        }


def compare(user_outs, refs, states, etas, rtol, atol_eps) -> tuple[list, list, list, list]:
    """Per ``eta``: max error, max relative error, all-within flag, and the largest tolerance over
    states."""
    errors, rels, within, tols = [], [], [], []
    for ei in range(len(etas)):
        e_max, r_max, t_max, ok = 0.0, 0.0, 0.0, True
        for si, st in enumerate(states):
            u, r = user_outs[si][ei], refs[si][ei]
            err = float(tree.norm(tree.sub(u, r)))
            stepn = float(tree.norm(tree.sub(r, st)))
            thr = rtol * stepn + atol_eps * EPS64 * float(tree.norm(st))
            e_max = max(e_max, err)
            t_max = max(t_max, thr)
            r_max = max(r_max, err / stepn if stepn > 0 else (0.0 if err == 0 else math.inf))
            ok = ok and err <= thr
        errors.append(e_max)
        rels.append(r_max)
        within.append(ok)
        tols.append(t_max)
    return errors, rels, within, tols


def evaluate(cand: Candidate, user: UserStep, states, etas, user_outs, rtol, atol_eps, factors=None,
             spec=None, opt_states=None) -> CandidateResult:
    refs = [
        [
            reference_step(user.task, st, cand.pattern, h, factors, spec,
                           None if opt_states is None else opt_states[si])
            for h in etas
        ]
        for si, st in enumerate(states)
    ]
    errors, rels, within, tols = compare(user_outs, refs, states, etas, rtol, atol_eps)
    kept = [(h, e) for h, e, w in zip(etas, errors, within) if not w]
    dropped = [(h, e) for h, e, w in zip(etas, errors, within) if w]
    study = observe_order([h for h, _ in kept], [e for _, e in kept])
    # points at round-off carry no order information: dropped (and listed), never fitted
    study.dropped = dropped
    study.floor = max((t for t, w in zip(tols, within) if w), default=0.0)
    return CandidateResult(cand, list(etas), errors, rels, within, study)
