"""What trying costs: seconds per exact scheme step, to price advise against plain training of its
candidates.

The user's alternative to advising is to train each candidate and look: ``K`` exact steps of each
pattern (:func:`crosscurv.numeric.steps.scheme_step`, its loss at each ``k``), nothing else.
:func:`plain_seconds` measures that step (CPU seconds of the process, the median of a few steps from
``theta^0`` after one warm-up step) so that advise can state its own cost against it;
:func:`trying_note` is the sentence.
"""

from __future__ import annotations

import statistics
import time
from typing import Sequence

__all__ = ["plain_losses", "plain_seconds", "trying_note"]


def plain_losses(task, pattern, lr: float, iters: int) -> list[float]:
    """``[L(theta_S^k) for k = 0..iters]`` by exact scheme steps from ``task.params`` (plain
    training of ``S``; a non-finite loss ends the list)."""
    import math

    from crosscurv.theory.patterns import as_pattern

    from .hvp import grad
    from .steps import scheme_step

    pat = as_pattern(pattern, task.n_blocks, task.block_names)
    theta, out = dict(task.params), []
    for k in range(iters + 1):
        value, g = grad(task.loss, theta)
        out.append(float(value))
        if not math.isfinite(out[-1]):
            break
        if k < iters:
            theta = scheme_step(task, theta, pat, lr, grad_at_params=g)
    return out


def plain_seconds(task, patterns: Sequence, lr: float, steps: int = 3) -> dict:
    """``{pattern spelling: CPU seconds of one plain training step}`` (gradient, loss and scheme
    step).

    Args:
        patterns: spellings or :class:`crosscurv.theory.patterns.DelayPattern` (JC included if
        given).
        steps: timed steps per pattern after one warm-up (the median is returned).
    """
    from crosscurv.theory.patterns import as_pattern

    from .hvp import grad
    from .steps import scheme_step

    out = {}
    for spec in patterns:
        pat = as_pattern(spec, task.n_blocks, task.block_names)
        name = spec if isinstance(spec, str) else pat.name
        if name in out:
            continue
        theta, times = dict(task.params), []
        for r in range(steps + 1):
            t = time.process_time()
            _, g = grad(task.loss, theta)
            theta = scheme_step(task, theta, pat, lr, grad_at_params=g)
            if r:
                times.append(time.process_time() - t)
        out[name] = statistics.median(times)
    return out


def trying_note(
    task, candidates: Sequence[str], lr: float, iters: int, advise_seconds: float
) -> str:
    """A sentence for advise's output where plain training of ``candidates`` for ``iters`` steps
    would have cost less than ``advise_seconds`` (else ``""``); on two blocks it says so and what
    advise adds."""
    steps = plain_seconds(task, candidates, lr)
    plain = sum(steps.values()) * iters
    if plain >= advise_seconds:
        return ""
    note = (
        f"Training the {len(candidates)} candidates plainly for K = {iters} takes about "
        f"{plain:.2f} s "
        f"(measured steps), less than this advice ({advise_seconds:.2f} s): trying them is cheaper."
    )
    if task.n_blocks == 2:
        note += (
            " With two blocks the whole space is jc, gs and gs:2,1; what advise adds is why one "
            "wins (the cross-curvature terms eta^2 c_12, eta^2 c_21 of Theorem 1, propagated to K) "
            "and an error estimate per prediction; for more blocks, `--search` ranks every order "
            "or stage arrangement."
        )
    return note
