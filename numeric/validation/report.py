"""The report of a step check: the candidates' table, the fits, and the verdict in words."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from crosscurv.theory.patterns import DelayPattern

from ..hvp_differences import CurvatureRoute
from ..task import Task
from .candidates import CandidateResult, pattern_label
from .factors import StepFactors
from .freshness import FreshnessFit

__all__ = ["StepReport"]


@dataclass
class StepReport:
    """Outcome of :func:`identify_step`: the step's ``name``, ``task``, ``declared`` pattern, the
    grid (``etas``, ``seeds``, ``perturb``) and match tolerance (``||U - R|| <= rtol ||R - theta|| +
    atol_eps * eps64 * ||theta||``), one :class:`CandidateResult` per candidate, the
    :class:`FreshnessFit` (or ``None``), whether two identical calls agreed (``deterministic``,
    ``nondeterminism``), ``notes``, the ``factors`` every candidate uses and the curvature
    ``route``.
    """

    name: str
    task: Task
    declared: DelayPattern | None
    etas: list
    seeds: list
    perturb: float
    rtol: float
    atol_eps: float
    results: list
    fit: FreshnessFit | None = None
    deterministic: bool = True
    nondeterminism: float = 0.0
    notes: list = field(default_factory=list)
    factors: StepFactors | None = None
    route: CurvatureRoute | None = None
    optimizer: str = "sgd"

    @property
    def factors_label(self) -> str:
        """``" with step factors personal=2, shared=1"`` when the candidates use factors other than
        1, else ``""``."""
        if self.factors is None or self.factors.plain:
            return ""
        return " with step factors " + self.factors.text(self.task.block_names)

    @property
    def matches(self) -> list:
        """Labels of the candidates matched to round-off."""
        return [r.label for r in self.results if r.matches]

    def result(self, label: str) -> CandidateResult:
        for r in self.results:
            if r.label == label:
                return r
        raise KeyError(label)

    @property
    def declared_label(self) -> str | None:
        return None if self.declared is None else pattern_label(self.task, self.declared)

    @property
    def nearest(self) -> CandidateResult:
        """The candidate with the smallest error at the smallest ``eta`` (ties: higher order)."""
        return min(
            self.results, key=lambda r: (r.errors[-1], -(r.order if math.isfinite(r.order) else 99))
        )

    @property
    def ok(self) -> bool:
        """Matches the declared pattern (or, with none declared, some candidate) and is
        deterministic."""
        if not self.deterministic:
            return False
        if self.declared is not None:
            return self.declared_label in self.matches
        return bool(self.matches)

    def verdict(self) -> str:
        """One sentence: what the step is."""
        m = self.matches
        dl = self.declared_label
        if not self.deterministic:
            return (
                "NOT A FUNCTION OF (params, lr): two identical calls differ by "
                f"{self.nondeterminism:.2e} of the step size, so it performs no fixed scheme (does "
                "it keep a gradient from an earlier call, i.e. a stale gradient, or draw random "
                "numbers?)"
            )
        if m:
            s = "matches " + " and ".join(m) + self.factors_label
            if len(m) > 1:
                s += (" (indistinguishable on this task: the couplings between these schemes "
                      "vanish here)")
            if dl is not None and dl not in m:
                s += f"; it does NOT perform the declared pattern {dl}"
            elif dl is not None:
                s += " (the declared pattern)"
        else:
            near = self.nearest
            how = near.describe().replace("differs", "differs from")
            s = (f"matches none of the candidates{self.factors_label}; nearest is {near.label}, "
                 f"which it {how}")
            extra = [
                r
                for r in self.results
                if r is not near and ("jc" in r.candidate.roles or "declared" in r.candidate.roles)
            ]
            gs = [
                r
                for r in self.results
                if r is not near and r not in extra and "gs order" in r.candidate.roles
            ]
            if gs:
                extra.append(min(gs, key=lambda r: r.errors[-1]))
            for r in extra:
                s += f"; from {r.label} it {r.describe()}"
            if self.fit is not None and self.fit.is_sign_flipped:
                s += "; its freshness term eta^2 M_S g has the WRONG SIGN"
            elif self.fit is not None and not self.fit.is_pattern_form:
                s += ("; its second-order term is that of no delay pattern (not a scheme of "
                      "Definition 2)")
            if dl is not None:
                s += f"; declared {dl}"
        return s

    @property
    def diagnosis(self) -> str:
        """A short code for what was found: ``"declared"``, ``"match"`` (nothing declared),
        ``"wrong-order"`` (declared full GS, GS in another order), ``"jc-instead"``,
        ``"other-pattern"``, ``"sign-flip"`` (freshness term of the wrong sign), ``"not-a-scheme"``,
        ``"first-order"`` (differs from every candidate at first order), ``"nondeterministic"`` or
        ``"no-match"``.
        """
        if not self.deterministic:
            return "nondeterministic"
        m = self.matches
        dl = self.declared_label
        if m:
            if dl is None:
                return "match"
            if dl in m:
                return "declared"
            if self.declared.is_full_gs() and any(
                self.result(x).candidate.pattern.is_full_gs() for x in m
            ):
                return "wrong-order"
            if not self.declared.is_jacobi and "jc" in m:
                return "jc-instead"
            return "other-pattern"
        if self.fit is not None and self.fit.is_sign_flipped:
            return "sign-flip"
        finite = [r.order for r in self.results if math.isfinite(r.order)]
        if finite and max(finite) < 1.5:
            return "first-order"
        if self.fit is not None and not self.fit.is_pattern_form:
            return "not-a-scheme"
        return "no-match"

    def table(self, fmt: str = "github") -> str:
        """Candidates with their largest relative error, error at the smallest eta, and observed
        order."""
        from tabulate import tabulate

        rows = []
        for r in self.results:
            tag = (
                r.label
                + (" (declared)" if "declared" in r.candidate.roles else "")
                + (" (inferred)" if "inferred" in r.candidate.roles else "")
            )
            rows.append(
                [tag, f"{max(r.rel_errors):.2e}", f"{r.rel_errors[-1]:.2e}",
                 "" if not math.isfinite(r.order) else f"{r.order:.2f}",
                 "MATCH" if r.matches else "differs"]
            )
        head = ["candidate", "max rel. error", f"rel. error at eta={self.etas[-1]:.3g}",
                "order of difference", "verdict"]
        return tabulate(rows, headers=head, tablefmt=fmt, disable_numparse=True)

    def text(self, verbose: bool = False) -> str:
        """The full human-readable report."""
        t = self.task
        lines = [
            f"step: {self.name}",
            f"task: {t.name} ({t.n_blocks} blocks: {', '.join(t.block_names)}; {t.num_params()} "
            "parameters; float64)",
            f"states: {len(self.seeds)} seeded (seeds {', '.join(map(str, self.seeds))}, "
            f"perturbation {self.perturb:g}); "
            f"eta = {self.etas[0]:.4g} * 2^-k, k = 0..{len(self.etas) - 1}",
            f"match tolerance: ||step - reference|| <= {self.rtol:g} ||reference - theta|| + "
            f"{self.atol_eps:g} eps ||theta|| at every state and eta",
            f"declared pattern: {self.declared_label or 'none'}",
        ]
        if self.factors is not None:
            how = (
                "given by --block-lr"
                if self.factors.source != "inferred"
                else "inferred from the first-order term"
            )
            lines.append(f"step factors ({how}): {self.factors.text(t.block_names)}")
        if self.route is not None:
            lines.append(self.route.describe())
        lines += ["", self.table(), ""]
        if self.fit is not None:
            lines += [
                "second-order term fitted as sum_j a_ij H_ij g_j (a pattern S has a_ij = 1 for "
                "(i,j) in S, 0 otherwise):",
                self.fit.table(),
                "",
            ]
        if verbose:
            for r in self.results:
                lines += [f"{r.label}: error ||step - reference|| (max over states) against eta",
                          r.study.table(), ""]
        for n in self.notes:
            lines.append("note: " + n)
        lines.append("verdict: " + self.verdict())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "task": self.task.name,
            "blocks": self.task.block_names,
            "declared": self.declared_label,
            "etas": self.etas,
            "seeds": self.seeds,
            "perturb": self.perturb,
            "rtol": self.rtol,
            "atol_eps": self.atol_eps,
            "matches": self.matches,
            "nearest": self.nearest.label,
            "ok": self.ok,
            "diagnosis": self.diagnosis,
            "deterministic": self.deterministic,
            "verdict": self.verdict(),
            "candidates": [r.to_dict() for r in self.results],
            "fit": None if self.fit is None else self.fit.to_dict(),
            "notes": list(self.notes),
            "optimizer": self.optimizer,
            "factors": None if self.factors is None else self.factors.to_dict(),
            "curvature_route": None if self.route is None else self.route.to_dict(),
        }
