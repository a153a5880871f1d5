"""The perturbed twins of ``crosscurv report --check``: runs from ``theta^0`` perturbed at rounding,
which measure how far a trajectory's own sensitivity to rounding lets a recomputation part from the
committed records (:func:`explain_parting`).

Where a recomputation lies beyond the fixed tolerances of
:func:`crosscurv.numeric.record_comparison.reference_tolerances` from some ``k >= 2`` on, up to
:data:`PERTURBED_TWINS` runs from ``theta^0 (1 + eps r)`` (:func:`perturbed_twin`) measure the
growth :func:`sensitivity` by which those tolerances grow per ``k``, and how far ``sharpness`` parts
(:func:`column_parting`, :func:`sharpness_slack`).
"""

from __future__ import annotations

import math

__all__ = ["PERTURBED_TWINS", "TWIN_SEED", "explain_parting", "sensitivity", "column_parting",
           "trajectory_parts_at", "sharpness_slack", "perturbed_twin"]


def explain_parting(task, rerun, recomputed: dict, reference: dict, tolerances, columns, comp, *,
                    n_records: int):
    """Whether records beyond the fixed tolerances part as the trajectory's own sensitivity to
    rounding predicts.  Runs from ``theta^0`` perturbed at rounding measure it (one at a time, up to
    :data:`PERTURBED_TWINS`, the growth the largest any shows: where a ReLU input sits within
    rounding of zero, whether a run crosses it is a coin toss per run); ``sharpness`` is compared
    within twice how far they part in it.  Returns the growth curve (``None`` when every perturbed
    run diverged), how many runs measured it, the comparison within the grown tolerances and the
    ``k`` from which the losses part."""
    from crosscurv.numeric.record_comparison import compare_records

    curve, used = None, 0
    twin_sharpness = [0.0] * n_records  # how far the twins' `sharpness` parts from the rerun
    parted = trajectory_parts_at(comp)
    wide = comp
    for i in range(PERTURBED_TWINS):
        twin = perturbed_twin(task, rerun, seed=TWIN_SEED + i)
        if twin is None:
            continue
        used += 1
        c = sensitivity(twin, recomputed)
        curve = c if curve is None else [max(a, b) for a, b in zip(curve, c)]
        if "sharpness" in columns:
            parting = column_parting(twin, recomputed, "sharpness")
            twin_sharpness = [max(s, d) for s, d in zip(twin_sharpness, parting)]
        wide = compare_records(recomputed, reference, tolerances=tolerances, columns=columns,
                               growth=curve, slack=sharpness_slack(twin_sharpness, columns, parted))
        if wide.ok:
            break
    return curve, used, wide, parted


def sensitivity(twin: dict, run: dict) -> list:
    """How much further than at its first iteration a run perturbed at rounding has parted, per
    ``k``.

    ``r_k = max(|twin - run| / |run|)`` over ``loss_jc`` and ``loss_s`` (the losses: never near
    zero); returns ``max(1, r_k / r_b)`` with ``r_b`` the first positive ``r_k`` (every factor 1
    when the two never part).  The tolerances of
    :func:`crosscurv.numeric.record_comparison.compare_records` grow with ``k`` by it.
    """
    n = len(run["k"])
    r = []
    for i in range(n):
        vals = [abs(twin[c][i] - run[c][i]) / abs(run[c][i]) for c in ("loss_jc", "loss_s")
                if math.isfinite(twin[c][i]) and math.isfinite(run[c][i]) and run[c][i] != 0]
        r.append(max(vals) if vals else math.inf)
    base = next((x for x in r if 0 < x < math.inf), None)
    if base is None:
        return [1.0] * n
    return [max(1.0, x / base) if math.isfinite(x) else 1.0 for x in r]


def column_parting(twin: dict, run: dict, column: str) -> list:
    """``|twin - run|`` in one column per ``k`` (``0`` where either value is not finite): how far a
    run perturbed at rounding has parted from the recomputation in that column."""
    return [abs(a - b) if math.isfinite(a) and math.isfinite(b) else 0.0
            for a, b in zip(twin[column][:len(run["k"])], run[column])]


def trajectory_parts_at(comparison) -> int | None:
    """The first ``k`` at which ``loss_jc`` or ``loss_s`` lies beyond the fixed tolerances in
    ``comparison`` (a :class:`crosscurv.numeric.record_comparison.RecordsComparison`): where the two
    trajectories part, or ``None``."""
    ks = [c.first_bad_k for c in comparison.columns
          if c.column in ("loss_jc", "loss_s") and c.first_bad_k is not None]
    return min(ks) if ks else None


def sharpness_slack(twin_parting, columns, parted: int | None = None) -> dict | None:
    """The ``slack`` of :func:`crosscurv.numeric.record_comparison.compare_records` for
    ``sharpness``: ``2 t_k``, ``t_k`` how far the runs perturbed at rounding part in it
    (:func:`column_parting`); ``inf`` from ``k = parted`` on (:func:`trajectory_parts_at`: the
    losses beyond the fixed tolerances).

    The power iteration's vector carries the whole trajectory: once the trajectories part (a ReLU
    kink crossed on one and not the other) the two vectors, and the column with them, follow
    different histories, whose difference is a draw that a few perturbed runs sample but do not
    bound. A wrong power iteration shows before that, from ``k = 1``. A kink crossed while the
    losses still agree is not covered (docs/reproducibility.md)."""
    if "sharpness" not in columns:
        return None
    out = [2.0 * max(0.0, b) for b in twin_parting]
    if parted is not None:
        out = [math.inf if k >= parted else x for k, x in enumerate(out, start=1)]
    return {"sharpness": out}


#: At most this many runs perturbed at rounding measure a trajectory's sensitivity
#: (:func:`perturbed_twin`).
PERTURBED_TWINS = 4
#: Seed of the first perturbed run's signs (the ``i``-th: ``TWIN_SEED + i``).
TWIN_SEED = 12345


def perturbed_twin(task, rerun, seed: int = TWIN_SEED) -> dict | None:
    """The run ``rerun`` (a :class:`crosscurv.experiments.runs.RunDescription`) recomputed from
    ``theta^0 (1 + eps r)``, ``eps`` the dtype's machine epsilon and ``r = +-1`` a sign per entry
    drawn from ``seed`` (:func:`_perturbed` by one ulp, either way): a run that differs from the
    recomputation only at rounding. Every entry moves, either way: where a ReLU input sits within
    rounding of zero at some ``k``, such runs land on both sides of it, as runs on other CPUs do
    (half an ulp moves only the entries drawn ``-1``, towards zero, and on the LoRA run under MKL's
    AVX2 path none of four such runs crossed the kink the committed run sits on the other side of,
    while two of four one-ulp runs did). Its records ``{column: values}``, or ``None`` when it
    diverged before ``k = rerun.iters``."""
    import dataclasses

    import torch

    from crosscurv.experiments import runs
    from crosscurv.numeric.records import records_columns

    n = rerun.iters
    signs = torch.Generator().manual_seed(seed)
    twin = dataclasses.replace(task, params=_perturbed(task.params, signs, ulps=1.0))
    res, _ = runs.run(rerun, None, task=twin)
    if len(res.records) < n:
        return None
    return records_columns(res.records)


def _perturbed(params, gen, ulps: float = 0.5) -> dict:
    """``theta (1 + u r)``: ``u = ulps * eps`` (``eps`` the dtype's machine epsilon), ``r = +-1`` a
    sign per entry drawn from ``gen``. With the default half an ulp (the unit roundoff) ``1 + u``
    rounds to ``1``: only the entries drawn ``-1`` move, towards zero; ``ulps = 1`` moves every
    entry, either way."""
    import torch

    out = {}
    for name, p in params.items():
        draw = torch.randint(0, 2, tuple(p.shape), generator=gen)
        sign = draw.to(device=p.device, dtype=p.dtype) * 2 - 1
        out[name] = p * (1 + torch.finfo(p.dtype).eps * ulps * sign)
    return out
