"""The checks an implementation must pass: statements of the paper, measured on its functions.

Every check is a :class:`Check`, called with an :class:`~crosscurv.testing.Implementation` (or any
object with some of ``step``, ``cross_curvature``, ``protocol``, ``records``, ``one_step``); it
returns nothing or raises :class:`AssertionError` whose message is the evidence: the
step-identification table, or the remainders on the step-size grid ``eta_k = eta0 2^-k`` with their
pairwise observed orders ``log2(r_k / r_{k+1})`` and ``r / eta^p`` (as pyadjoint's Taylor test
prints its convergence rates), with crosscurv's own numbers on the same problem beside them, or the
verdict of ``validate-records``. A check whose function the implementation lacks is skipped
(``pytest.skip``) with the name of that function.

* ``step_is_scheme``: ``step`` performs the scheme of every pattern it is given (JC, GS in two
  orders, a chain, a partial pattern): equal to crosscurv's step to round-off at a seeded state and
  step sizes (validate-step's harness, :func:`crosscurv.numeric.testing.assert_step_is`);
* ``one_step_remainder``: ``L_S - L_JC - eta^2 C_S = O(eta^3)`` (Theorem 1) with the losses after
  one ``step`` and ``C_S`` from ``cross_curvature`` (else crosscurv's): observed order >= 3 - 0.2;
* ``recursion_remainder``: ``gap - recursive = O(eta^3)`` at ``k = K`` of ``protocol`` runs with
  ``eta K`` fixed (Theorem 2: one step of the recursion from the measured
  ``Delta theta^{K-1}``): observed order >= 3 - 0.2;
* ``cumulative_order``: ``gap - cumulative = O(K eta^3) = O(eta^2)`` at ``k = K``, ``eta K`` fixed
  (Theorem 3): observed order >= 2 - 0.2;
* ``gs_order_invariance``: two full GS orders, ``L_GS(o1) - L_GS(o2) = O(eta^3)`` after one
  ``step`` (both have ``C_S = C_cross / 2``, Corollary 1): observed order >= 3 - 0.2, and not zero
  where crosscurv's orders differ;
* ``golden_records``: ``records`` (plain data, no torch), else ``protocol``, on the golden cases
  (four problems x JC, GS, partial) agrees with crosscurv's records: the verdict of
  ``validate-records``, with its formula-level diagnoses (:mod:`crosscurv.testing.golden`);
* ``golden_one_step``: ``one_step`` (plain data, no torch), else ``step`` and ``cross_curvature``,
  agrees with the golden ``one_step.json`` of each case.

The first, second and fifth check call ``step`` on crosscurv's (torch) tasks, the third and fourth
``protocol``; the golden checks need no torch when given plain data.

The problems (:func:`check_problems`) are small float64 ones fixed by seed: a quartic polynomial
over blocks of sizes (2, 1, 2) and a tanh MLP 3-4-2 with its four tensors in three blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

from .golden import (GOLDEN_CASES, GOLDEN_LABELS, check_golden_one_step, check_golden_records,
                     golden_dir, set_golden_dir)
from .implementation import (Implementation, as_implementation, records_columns,
                             reference_implementation)

__all__ = ["Check", "CHECKS", "check_problems", "golden_dir", "set_golden_dir",
           "check_step_is_scheme", "check_one_step_remainder", "check_recursion_remainder",
           "check_cumulative_order", "check_gs_order_invariance", "check_golden_records",
           "check_golden_one_step", "GOLDEN_CASES", "GOLDEN_LABELS"]

#: Points of every step-size grid ``eta0 2^-k``, ``k = 0..GRID-1``.
GRID = 6
#: ``eta0 * lam`` of the one-step grids (``lam``: the problem's curvature scale).
ONE_STEP_FACTOR = 1.0 / 16
#: ``eta0 * lam``, iterations at ``eta0`` and points of the trajectory grids: ``K = K0 2^k``
#: iterations at ``eta0 2^-k``, so ``T = eta K = eta0 K0`` is fixed.
TRAJECTORY_FACTOR, K0, TRAJECTORY_GRID = 1.0 / 32, 8, 5
#: Allowed shortfall of every observed order (least-squares slope and each pairwise rate).
ORDER_TOL = 0.2
#: Patterns of each check, in the CLI spelling (1-based blocks).
STEP_PATTERNS = ("jc", "gs", "gs:3,2,1", "chain", "3<-1")
ONE_STEP_PATTERNS = ("gs", "chain", "3<-1")
TRAJECTORY_PATTERNS = ("gs", "3<-1")
GS_ORDER_PAIRS = (((0, 1, 2), (2, 1, 0)), ((0, 1, 2), (1, 2, 0)))


@dataclass(frozen=True)
class Check:
    """One check: ``check(implementation)`` returns, or raises :class:`AssertionError` (evidence).

    Attributes:
        name: the test id part (``step_is_scheme``...).
        run: ``run(implementation)``, the check itself.
        needs: the implementation's functions it calls, each ``"a"`` or ``"a|b"`` (either one);
            one missing -> skipped.
        statement: what it asserts, in one line.
    """

    name: str
    run: Callable[[Implementation], None]
    needs: tuple = ()
    statement: str = ""

    def __call__(self, implementation) -> None:
        __tracebackhide__ = True  # pytest shows the test's line and the evidence, not this frame
        impl = as_implementation(implementation)
        missing = [
            n for n in self.needs if all(getattr(impl, a) is None for a in n.split("|"))
        ]
        if missing:
            import pytest

            what = ", ".join(n.replace("|", " or ") for n in missing)
            pytest.skip(f"{impl.name} has no {what}: {self.name} needs it ({self.statement})")
        self.run(impl)

    def __repr__(self) -> str:
        return self.name


# --------------------------------------------------------------------------------------------------
# problems, grids, floors
# --------------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def check_problems() -> tuple:
    """The problems of the checks (:class:`crosscurv.experiments.problems.Problem`, 3 blocks)."""
    from crosscurv.experiments.problems import quartic_problem, tanh_mlp_problem

    return (
        quartic_problem(11, (2, 1, 2)),
        tanh_mlp_problem(5, (3, 4, 2), n_blocks=3, n_examples=6),
    )


def _pattern(task, spec):
    from crosscurv.theory.patterns import as_pattern

    return as_pattern(spec, task.n_blocks, task.block_names)


def _etas(eta0: float, n: int) -> list:
    return [eta0 * 2.0**-k for k in range(n)]


def _floor(scale: float) -> float:
    from crosscurv.experiments.scaling.study import roundoff_floor

    return roundoff_floor(scale)


def _rounding_scale(task) -> float:
    from crosscurv.experiments.scaling.loss_gap import rounding_scale

    return rounding_scale(task, task.params)


def _loss_after(impl: Implementation, task, pattern, lr: float) -> float:
    """``L`` after one ``impl.step`` from a copy of ``task.params`` (the result checked, copied)."""
    from crosscurv.numeric.validation import check_step_output

    params = {n: v.detach().clone() for n, v in task.params.items()}
    out = check_step_output(
        impl.step(task, params, pattern, lr), task.params, lr, where=f"{impl.name}.step"
    )
    return float(task.loss(out))


def _order_failure(errors, etas, order: float, floor: float, what: str) -> str | None:
    """The message of :func:`crosscurv.numeric.testing.assert_observed_order` (at least ``order``),
    or None when the order is observed."""
    from crosscurv.numeric.testing import assert_observed_order

    try:
        assert_observed_order(
            errors, etas, order, tol=ORDER_TOL, floor=floor, at_least=True, what=what
        )
    except AssertionError as exc:
        return str(exc)
    return None


def _fail(head: str, failures: Sequence[str]) -> None:
    __tracebackhide__ = True
    if failures:
        raise AssertionError(head + "\n\n" + "\n\n".join(failures))


def _describe(pattern) -> str:
    return pattern.describe()


# --------------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------------
def check_step_is_scheme(impl: Implementation) -> None:
    """``impl.step`` performs exactly the scheme of each pattern of :data:`STEP_PATTERNS`."""
    __tracebackhide__ = True
    from crosscurv.numeric.testing import assert_step_is

    failures = []
    for problem in check_problems():
        task = problem.task
        for spec in STEP_PATTERNS:
            pattern = _pattern(task, spec)

            def step(params, lr, pattern=pattern):
                return impl.step(task, params, pattern, lr)

            step.__name__ = f"{impl.name}.step"
            try:
                assert_step_is(step, task, pattern, seeds=(0,), n_etas=3, max_all_orders=3)
            except AssertionError as exc:
                failures.append(f"{task.name}, pattern {spec} ({_describe(pattern)}):\n{exc}")
    _fail(
        f"{impl.name}.step does not perform the scheme it is given "
        f"({len(failures)} of {len(STEP_PATTERNS) * len(check_problems())} problem-pattern cases):",
        failures,
    )


def check_one_step_remainder(impl: Implementation) -> None:
    """``L_S - L_JC - eta^2 C_S = O(eta^3)`` after one step from ``theta^0`` (Theorem 1)."""
    __tracebackhide__ = True
    from crosscurv.numeric.curvature import cross_curvature_table
    from crosscurv.theory.patterns import jacobi

    failures = []
    for problem in check_problems():
        task = problem.task
        etas = _etas(problem.eta0(ONE_STEP_FACTOR), GRID)
        jc = jacobi(task.n_blocks)
        table = cross_curvature_table(task)
        scale0 = _rounding_scale(task)
        for spec in ONE_STEP_PATTERNS:
            S = _pattern(task, spec)
            ref_C = table.C_S(S)
            C = float(impl.cross_curvature(task, task.params, S)) if impl.cross_curvature else ref_C
            errors, scale = [], scale0
            for eta in etas:
                ls, lj = _loss_after(impl, task, S, eta), _loss_after(impl, task, jc, eta)
                errors.append(ls - lj - eta**2 * C)
                scale = max(scale, abs(ls) + abs(lj) + scale0)
            if impl.cross_curvature:
                values = f"their C_S = {C:.10g}, crosscurv's C_S = {ref_C:.10g}"
            else:
                values = f"C_S = {C:.10g} (crosscurv's: no cross_curvature given)"
            bad = _order_failure(errors, etas, 3, _floor(scale), "L_S - L_JC - eta^2 C_S")
            if bad:
                failures.append(
                    f"{task.name}, S = {spec} = {_describe(S)}: {values}, "
                    f"C_cross/2 = {table.C_cross / 2:.10g}\n{bad}"
                )
    _fail(
        f"{impl.name}: the one-step remainder L_S - L_JC - eta^2 C_S is not O(eta^3) (Theorem 1):",
        failures,
    )


_TRAJECTORY_CACHE: dict = {}


def _trajectory_rows(impl: Implementation, problem, S) -> tuple:
    """The record at ``k = K`` of ``impl.protocol`` for each ``(eta, K)`` of the trajectory grid."""
    key = (impl, id(problem), S.pairs)
    if key not in _TRAJECTORY_CACHE or _TRAJECTORY_CACHE[key][0] is not problem:
        task = problem.task
        etas = _etas(problem.eta0(TRAJECTORY_FACTOR), TRAJECTORY_GRID)
        rows = []
        for j, eta in enumerate(etas):
            K = K0 * 2**j
            cols = records_columns(impl.protocol(task, S, eta, K))
            ks = [int(k) for k in cols["k"]]
            if K not in ks:
                raise AssertionError(
                    f"{impl.name}.protocol(task, {S.describe()}, lr={eta:g}, iters={K}) "
                    f"returned no record k = {K} (k: {ks[:3]}...{ks[-3:]})"
                )
            i = ks.index(K)
            rows.append({c: v[i] for c, v in cols.items()})
        _TRAJECTORY_CACHE[key] = (problem, etas, rows)
    return _TRAJECTORY_CACHE[key][1:]


def _trajectory_errors(impl: Implementation, problem, S, column: str, scale0: float) -> tuple:
    """``(etas, gap - column at k = K, floor)`` over the trajectory grid of ``impl.protocol``."""
    etas, rows = _trajectory_rows(impl, problem, S)
    errors = [r["gap"] - r[column] for r in rows]
    # the cumulative state ignores the measured trajectories: their roundings add up (random walk)
    spread = [1.0 if column == "recursive" else math.sqrt(K0 * 2**j) for j in range(len(etas))]
    scale = max(abs(r["loss_s"]) + abs(r["loss_jc"]) + s * scale0 for r, s in zip(rows, spread))
    return etas, errors, _floor(scale)


def _trajectory_check(impl: Implementation, column: str, order: float, theorem: str) -> None:
    __tracebackhide__ = True
    from crosscurv.numeric.orders import observe_order

    failures = []
    problem = check_problems()[0]
    task = problem.task
    scale0 = _rounding_scale(task)
    for spec in TRAJECTORY_PATTERNS:
        S = _pattern(task, spec)
        etas, errors, floor = _trajectory_errors(impl, problem, S, column, scale0)
        bad = _order_failure(errors, etas, order, floor, f"gap - {column} at k = K ({impl.name})")
        if bad:
            _, ref_errors, ref_floor = _trajectory_errors(
                reference_implementation(), problem, S, column, scale0
            )
            ref = observe_order(etas, ref_errors, floor=ref_floor, expected=order)
            failures.append(
                f"{task.name}, S = {spec} = {_describe(S)}, eta K = {etas[0] * K0:g} fixed, K = "
                f"{K0} 2^k:\n{bad}\ncrosscurv's gap - {column} on the same grid (observed order "
                f"{ref.slope:.3f}):\n{ref.table()}"
            )
    _fail(f"{impl.name}: {theorem}", failures)


def check_recursion_remainder(impl: Implementation) -> None:
    """``gap - recursive = O(eta^3)`` at ``k = K``, ``eta K`` fixed (Theorem 2)."""
    __tracebackhide__ = True
    _trajectory_check(
        impl, "recursive", 3, "Theorem 2's recursive estimate is not within O(eta^3) of the gap:"
    )


def check_cumulative_order(impl: Implementation) -> None:
    """``gap - cumulative = O(K eta^3) = O(eta^2)`` at ``k = K``, ``eta K`` fixed (Theorem 3)."""
    __tracebackhide__ = True
    _trajectory_check(
        impl,
        "cumulative",
        2,
        "Theorem 3's cumulative estimate is not within O(K eta^3) = O(eta^2) of the gap "
        "at fixed eta K:",
    )


def check_gs_order_invariance(impl: Implementation) -> None:
    """Full GS in two orders: ``L_GS(o1) - L_GS(o2) = O(eta^3)`` after one step (Corollary 1)."""
    __tracebackhide__ = True
    from crosscurv.theory.patterns import gauss_seidel

    ref = reference_implementation()
    failures = []
    for problem in check_problems():
        task = problem.task
        etas = _etas(problem.eta0(ONE_STEP_FACTOR), GRID)
        scale0 = _rounding_scale(task)
        for o1, o2 in GS_ORDER_PAIRS:
            p1, p2 = gauss_seidel(task.n_blocks, o1), gauss_seidel(task.n_blocks, o2)
            diffs = []  # (errors, floor) of impl, then of crosscurv
            for who in (impl, ref):
                errors, scale = [], scale0
                for eta in etas:
                    l1, l2 = _loss_after(who, task, p1, eta), _loss_after(who, task, p2, eta)
                    errors.append(l1 - l2)
                    scale = max(scale, abs(l1) + abs(l2) + scale0)
                diffs.append((errors, _floor(scale)))
            (errors, floor), (ref_errors, ref_floor) = diffs
            what = f"L_GS({p1.name}) - L_GS({p2.name})"
            bad = _order_failure(errors, etas, 3, floor, what)
            if (
                bad
                and all(abs(e) <= floor for e in errors)
                and any(abs(e) > ref_floor for e in ref_errors)
            ):
                bad = (
                    f"{what}: the two orders give the same loss to round-off (floor {floor:.3g}) "
                    "at every eta, where crosscurv's differ: does the step use the blocks updated "
                    "before it (is it GS)?"
                )
            if bad:
                failures.append(
                    f"{task.name}, {p1.name} = {p1.describe()}, {p2.name} = {p2.describe()}:\n{bad}"
                    "\ncrosscurv's steps: "
                    + ", ".join(f"eta={eta:.4g}: {e:.6g}" for eta, e in zip(etas, ref_errors))
                )
    _fail(
        f"{impl.name}: full GS in two block orders does not agree to O(eta^3) after one step "
        "(Corollary 1):",
        failures,
    )


CHECKS = (
    Check(
        "step_is_scheme",
        check_step_is_scheme,
        ("step",),
        "the step performs exactly the scheme of its pattern",
    ),
    Check(
        "one_step_remainder",
        check_one_step_remainder,
        ("step",),
        "L_S - L_JC - eta^2 C_S = O(eta^3), Theorem 1",
    ),
    Check(
        "recursion_remainder",
        check_recursion_remainder,
        ("protocol",),
        "gap - recursive = O(eta^3) at fixed eta K, Theorem 2",
    ),
    Check(
        "cumulative_order",
        check_cumulative_order,
        ("protocol",),
        "gap - cumulative = O(eta^2) at fixed eta K, Theorem 3",
    ),
    Check(
        "gs_order_invariance",
        check_gs_order_invariance,
        ("step",),
        "two full GS orders agree to O(eta^3), Corollary 1",
    ),
    Check(
        "golden_records",
        check_golden_records,
        ("protocol|records",),
        "the records agree with the golden cases",
    ),
    Check(
        "golden_one_step",
        check_golden_one_step,
        ("step|one_step",),
        "the one-step quantities agree with the golden cases",
    ),
)
