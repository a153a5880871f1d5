"""Derive and verify the optimizer generalizations for one block model and one pattern.

:func:`derive_optimizers` runs :mod:`crosscurv.theory.optimizers.one_step`,
:mod:`crosscurv.theory.optimizers.recursion` and :mod:`crosscurv.theory.optimizers.cumulative` for
per-block step sizes (``sgd``), a fixed block-diagonal preconditioner, heavy
ball, the generic smooth map (one step) and Adam (one step, one-dimensional
blocks, :data:`ADAM_BLOCKS` blocks), and collects one boolean per result;
:func:`render_optimizer_markdown` / :func:`render_optimizer_summary` print them
for ``crosscurv derive`` next to the paper's identities.

Importing this module never imports torch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import sympy

from ..patterns import DelayPattern, parse_pattern
from .cumulative import check_optimizer_cumulative
from .one_step import check_adam_one_step, check_optimizer_one_step
from .recursion import check_optimizer_recursions

__all__ = ["OPTIMIZER_TEXT", "ADAM_BLOCKS", "OptimizerDerivation", "derive_optimizers",
           "render_optimizer_markdown", "render_optimizer_summary"]

#: Adam's one-step check runs on this many one-dimensional blocks (plain SymPy, slower than the
#: ring)
ADAM_BLOCKS = 2
#: horizons K = 1..CUMULATIVE_K of the cumulative checks (tests/theory goes to 4)
CUMULATIVE_K = 3

#: what each check states (LaTeX); F = diag(f_i) step-size factors, A = F P
OPTIMIZER_TEXT = {
    "one_step_generic": r"generic $\phi$: $L_S - L_{JC} = \eta^2\, g^\top F J_\phi M_S F \phi + "
                        r"O(\eta^3)$ "
                        r"($J_\phi$ block-diagonal, not symmetric)",
    "one_step_sgd": r"per-block step sizes: $\eta^2 \sum_{(i,j)\in S} f_i f_j\, g_i^\top H_{ij} "
                    r"g_j$",
    "one_step_preconditioner": r"preconditioner $P$: $\eta^2\, g^\top F P M_S F P g$",
    "one_step_momentum": r"heavy ball, buffer $m$: $\eta^2\, g^\top F M_S F (g + \beta m)$",
    "one_step_adam": r"Adam (bias-corrected, moments $m, v$): $\eta^2 \sum_{(i,j)\in S} f_i "
                     r"f_j\, (J_i g_i)^\top H_{ij} \phi_j$, "
                     r"$J_i = \partial\phi_i/\partial g_i$ diagonal",
    "recursion_sgd": r"per-block step sizes: Lemma 3 / Theorem 2 with $\eta A H_{JC}$ and "
                     r"forcing $\eta^2 A M_S A g_S$, $A = F$",
    "recursion_preconditioner": r"preconditioner: the same with $A = F P$",
    "recursion_momentum": r"heavy ball: $\Delta m^{k+1} = \beta\Delta m^k + H_{JC}\Delta\theta^k "
                          r"- \eta M_S F \phi_S^k$, "
                          r"$\Delta\theta^{k+1} = \Delta\theta^k - \eta F \Delta m^{k+1}$, "
                          r"$\phi_S^k = \beta m_S^k + g_S^k$",
    "cumulative_sgd": r"per-block step sizes: $z_{k+1} = (I - \eta A H) z_k + \eta^2 A M_S A "
                      r"g_S^k$, "
                      r"$[\eta^3](\Delta\theta^K - z_K) = -K A (M_S A)^2 g$",
    "cumulative_preconditioner": r"preconditioner: the same with $A = F P$",
    "cumulative_momentum": r"heavy ball: $w_{k+1} = \beta w_k + \eta F H z_k - \eta^2 F M_S F "
                           r"\phi_S^k$, $z_{k+1} = z_k - w_{k+1}$; "
                           r"$[\eta^3](\Delta\theta^K - z_K) = -\sum_j s_{K-1-j}(\beta) F "
                           r"(M_S F)^2 \phi_j$",
}


@dataclass
class OptimizerDerivation:
    """What :func:`derive_optimizers` found."""

    n_blocks: int
    dims: int
    pattern: DelayPattern
    checks: dict
    expressions: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())

    def to_dict(self) -> dict:
        return {
            "n_blocks": self.n_blocks,
            "dims": self.dims,
            "adam_blocks": ADAM_BLOCKS,
            "ok": self.ok,
            "checks": dict(self.checks),
            "expressions": {k: str(v) for k, v in self.expressions.items()},
            "failures": list(self.failures),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }


def derive_optimizers(n_blocks: int = 3, dims: int = 1, pattern: DelayPattern
                      | str = "gs") -> OptimizerDerivation:
    """Run every optimizer check for ``N`` blocks of dimension ``dims`` and ``pattern``."""
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, n_blocks)
    checks, expr, failures, timings = {}, {}, [], {}
    t_all = time.perf_counter()
    for kind in ("generic", "sgd", "preconditioner", "momentum"):
        t0 = time.perf_counter()
        c = check_optimizer_one_step(kind, n_blocks, dims, pattern)
        checks[f"one_step_{kind}"] = c.holds
        expr[f"C_S_{kind}"] = c.gap.coeff(2).as_expr() if hasattr(c.gap.coeff(2),
                                                                  "as_expr") else c.gap.coeff(2)
        if not c.holds:
            failures.append(f"one_step_{kind}: [eta^2](L_S - L_JC) does not equal the closed form")
        timings[f"one_step_{kind}"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    adam_pattern = pattern if n_blocks == ADAM_BLOCKS else parse_pattern("gs", ADAM_BLOCKS)
    a = check_adam_one_step(ADAM_BLOCKS, adam_pattern)
    checks["one_step_adam"] = a.holds
    expr["C_S_adam"] = a.C_S
    if not a.holds:
        failures.append("one_step_adam: [eta^2](L_S - L_JC) does not equal the Adam closed form")
    timings["one_step_adam"] = time.perf_counter() - t0
    for kind in ("sgd", "preconditioner", "momentum"):
        t0 = time.perf_counter()
        r = check_optimizer_recursions(kind, n_blocks, dims, pattern)
        checks[f"recursion_{kind}"] = r.holds
        if not r.holds:
            failures.append(f"recursion_{kind}: forbidden remainder monomials {r.offending}")
        timings[f"recursion_{kind}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        cu = check_optimizer_cumulative(kind, n_blocks, dims, pattern, K_max=CUMULATIVE_K)
        checks[f"cumulative_{kind}"] = cu.holds and cu.growth_holds
        if not (cu.holds and cu.growth_holds):
            failures.append(f"cumulative_{kind}: remainder below eta^3 or eta^3 coefficient off "
                            "the closed form")
        timings[f"cumulative_{kind}"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    return OptimizerDerivation(n_blocks, dims, pattern, checks, expr, failures, timings)


def render_optimizer_markdown(r: OptimizerDerivation) -> str:
    """The optimizer section of ``theory.md`` (Markdown with LaTeX)."""
    out = ["## Beyond the paper: block-separable optimizers", ""]
    w = out.append
    w("Block $i$ moves by $-\\eta f_i\\, \\phi_i(g_i, s_i)$ (state $s_i$: momentum buffer, "
      "Adam moments), "
      "$F = \\mathrm{diag}(f_i)$; both runs start from the same state; scheme $S$ feeds its "
      "fresh gradient to "
      "$\\phi$ and to the state update. Heavy ball is `torch.optim.SGD(momentum=beta)` "
      "(dampening 0, no Nesterov), "
      "Adam is `torch.optim.Adam` (bias-corrected). Symbols: $f_i$, $P$ entries, $\\beta$, "
      "buffer $m$, generic "
      "$p = \\phi(g)$, $J$, $K$ (see `theory/optimizers/`). "
      f"Same block model and pattern as above; Adam on {ADAM_BLOCKS} one-dimensional blocks; "
      "cumulative checks "
      f"for $K = 1..{CUMULATIVE_K}$ on the quadratic model.")
    w("")
    w("| check | statement | result |")
    w("|---|---|---|")
    for k, v in r.checks.items():
        w(f"| `{k}` | {OPTIMIZER_TEXT[k]} | {'holds' if v else '**FAILS**'} |")
    w("")
    w("Adam's recursion and cumulative estimate are not derived: its state $(m, v)$ enters $\\phi$ "
      "through $\\sqrt{v}$, so the linearized recursion needs $\\partial\\phi/\\partial m$ and "
      "$\\partial\\phi/\\partial v$ along both runs and the Taylor model of $\\phi$ in $v$ is not "
      "polynomial.")
    w("")
    for kind in ("sgd", "momentum"):
        w(f"$$[\\eta^2](L_S - L_{{JC}})\\ \\text{{({kind})}} = "
          f"{sympy.latex(sympy.sympify(r.expressions[f'C_S_{kind}']))}$$")
        w("")
    for f in r.failures:
        w(f"- FAILED {f}")
    if r.failures:
        w("")
    return "\n".join(out)


def render_optimizer_summary(r: OptimizerDerivation) -> str:
    """Plain-text lines for the terminal."""
    lines = [f"block-separable optimizers (exact; Adam on {ADAM_BLOCKS} blocks):"]
    for k, v in r.checks.items():
        lines.append(f"  [{'ok' if v else 'FAIL'}] {k}")
    for f in r.failures:
        lines.append(f"FAILED {f}")
    return "\n".join(lines)
