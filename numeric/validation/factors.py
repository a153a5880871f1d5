"""The per-block step factors of a step, read from its first-order term (Lemma 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .. import tree
from ..hvp import grad
from ..steps import block_keys
from ..task import Task

__all__ = ["StepFactors", "infer_step_factors", "inferred_factors", "uniform_note"]


@dataclass
class StepFactors:
    """Per-block step factors ``f_i`` of a step: block ``i`` moves by ``-eta f_i g_i`` to first
    order.

    Per block, ``c_i = (theta_i - U_i(theta, eta)) / eta`` Richardson-extrapolated over ``eta`` and
    ``2 eta`` (``= f_i g_i + O(eta^2)``), ``f_i = sum_s <c_i, g_i> / sum_s ||g_i||^2`` over the
    states, read as a fraction ``p/q``, ``q <= 12``, within ``1e-3``. (FedAvg over ``C`` clients is
    the JC step with factors ``personal = C, shared = 1``.) Attributes: ``factors``, ``raw`` (before
    rounding), ``residual`` (``||c_i - f_i g_i|| / ||c_i||``, max over states), ``source``.
    """

    factors: list
    raw: list
    residual: list
    source: str = "inferred"

    @property
    def plain(self) -> bool:
        return all(f == 1.0 for f in self.factors)

    def text(self, names: Sequence[str]) -> str:
        return ", ".join(f"{n}={f:g}" for n, f in zip(names, self.factors))

    def to_dict(self) -> dict:
        return {
            "factors": self.factors,
            "raw": self.raw,
            "residual": self.residual,
            "source": self.source,
        }


def _nice(f: float, rel: float = 1e-3, max_den: int = 12) -> float | None:
    from fractions import Fraction

    r = Fraction(f).limit_denominator(max_den)
    return float(r) if r > 0 and abs(f - float(r)) <= rel * abs(f) else None


def infer_step_factors(
    task: Task, states: Sequence[Mapping], etas: Sequence[float], user_outs
) -> StepFactors:
    """Fit the per-block step factors of the step's first-order term (see :class:`StepFactors`)."""
    keys = block_keys(task)
    h = etas[-1]
    num = [0.0] * task.n_blocks
    den = [0.0] * task.n_blocks
    per_state = []
    for si, st in enumerate(states):
        g = grad(task.loss, st)[1]
        c1 = tree.scale(tree.sub(st, user_outs[si][-1]), 1.0 / h)
        c2 = tree.scale(tree.sub(st, user_outs[si][-2]), 1.0 / etas[-2])
        c = tree.sub(tree.scale(c1, 2.0), c2) if abs(etas[-2] - 2.0 * h) <= 1e-12 * h else c1
        per_state.append((g, c))
        for i, ks in enumerate(keys):
            num[i] += sum(float((c[k] * g[k]).sum()) for k in ks)
            den[i] += sum(float((g[k] * g[k]).sum()) for k in ks)
    raw = [num[i] / den[i] if den[i] > 0 else 1.0 for i in range(task.n_blocks)]
    resid = [0.0] * task.n_blocks
    for g, c in per_state:
        for i, ks in enumerate(keys):
            cn = math.sqrt(sum(float((c[k] ** 2).sum()) for k in ks))
            rn = math.sqrt(sum(float(((c[k] - raw[i] * g[k]) ** 2).sum()) for k in ks))
            resid[i] = max(resid[i], rn / cn if cn > 0 else 0.0)
    facs = []
    for f in raw:
        nf = _nice(f) if f > 0 else None
        facs.append(nf if nf is not None else f)
    return StepFactors(facs, raw, resid, "inferred")


def inferred_factors(task: Task, states, etas, user_outs) -> tuple[StepFactors | None, list]:
    """Inferred factors when they differ between blocks (else ``None``), and notes."""
    if task.n_blocks < 2:
        sf = infer_step_factors(task, states, etas, user_outs)
        return None, uniform_note(sf)
    sf = infer_step_factors(task, states, etas, user_outs)
    clean = max(sf.residual) <= 1e-3
    fs = sf.factors
    differ = any(abs(f - fs[0]) > 1e-3 * abs(fs[0]) for f in fs)
    if clean and differ:
        return sf, []
    if not clean:
        return None, []
    return None, uniform_note(sf)


def uniform_note(sf: StepFactors) -> list:
    if max(sf.residual) > 1e-3:
        return []
    f = sf.factors[0]
    if abs(f - 1.0) <= 1e-3:
        return []
    return [
        f"the step moves every block {f:.6g} times as far as lr says (its first-order term is "
        f"-{f:.6g} eta g): a learning-rate scaling, not a scheme at this lr"
    ]
