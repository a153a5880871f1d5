"""The protocol's ``summary.json``: settings, status, the Section 5.1 metrics over the records, the
constants ``G``, ``L``, the engine and the timing (:func:`protocol_summary`)."""

from __future__ import annotations

from .metrics import run_metrics
from .records import ESTIMATES, records_columns

__all__ = ["CONSTANTS_NOTE", "METRICS_NOTE", "DIVERGED_METRICS_NOTE", "crosscurv_version",
           "protocol_summary"]

CONSTANTS_NOTE = (
    "G and L are a-posteriori estimates, not certified constants: G is the running maximum of the "
    "gradient norms evaluated on both trajectories, L the running maximum of |p^T H_JC^k p| of a "
    "warm-started power iteration (one HVP per iteration); both can only underestimate the "
    "constants of Assumption 1, so bound_bk estimates Theorem 3's bound rather than guaranteeing "
    "it."
)
#: ``metrics_note`` of a summary's Section 5.1 metrics.
METRICS_NOTE = (
    "paper Section 5.1; w(x) = JC if x > 0, GS (the scheme S) if x < 0, tie if x == 0; a measured "
    "gap of exactly 0 is in neither n_JC nor n_GS; Correct_K needs equal winners (a zero "
    "estimate only agrees with a zero gap); an iteration with |gap| <= gap_err (the measured gap's "
    "error bound) is undecided: in neither n_JC nor n_GS and left out of Correct_K's denominator"
)
#: ``metrics_note`` of a diverged run, whose ``metrics`` are empty and ``bound_bk_coverage`` null.
DIVERGED_METRICS_NOTE = (
    "none over a diverged run: its last records run into the divergence (losses and estimates "
    "growing without bound); last_finite_state is where it stood, and crosscurv table recomputes "
    "the metrics of the records before the divergence, flagged as such"
)


def crosscurv_version() -> str:
    try:
        from importlib.metadata import version

        return version("crosscurv")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def protocol_summary(ctx, run, status: str, message: str, diverged_at) -> dict:
    """The summary of the run ``run`` (:class:`crosscurv.numeric.trajectory.Run`) of the protocol's
    body ``ctx`` (:class:`crosscurv.numeric.protocol.RunContext`) at ``status``."""
    metrics, coverage, note = {}, None, METRICS_NOTE
    records = run.records
    if status == "diverged":  # the records before a divergence run into it: no metrics over them
        note = DIVERGED_METRICS_NOTE
    elif records:
        metrics, coverage = run_metrics(records_columns(records), ESTIMATES)
    out = {
        "crosscurv_version": crosscurv_version(),
        "status": status,
        "message": message,
        "diverged_at": diverged_at,
        "records": len(records),
        "settings": ctx.settings,
        "metrics": metrics,
        "metrics_note": note,
        "bound_bk_coverage": coverage,
        "constants": {"G": ctx.est.G, "L": ctx.est.L, "note": CONSTANTS_NOTE},
        "hvp": {
            "requested": ctx.requested,
            "used": ctx.engine.method,
            "engine": ctx.engine.describe(),
            "engine_name": ctx.engine.name,
            "masked_product_form": ctx.plan.form,
            "offloaded": bool(getattr(ctx.store, "offloaded", False)),
        },
        "timing": run.timing(),
    }
    if status == "diverged":
        out["last_finite_state"] = _last_finite_state(records)
    return out


def _last_finite_state(records) -> dict | None:
    """``{"k", "loss_jc", "loss_s", "gap", "gap_err"}`` of the last record before a divergence
    (``None``: none after ``theta^0``)."""
    if not records:
        return None
    r = records[-1]
    return {key: r.get(key) for key in ("k", "loss_jc", "loss_s", "gap", "gap_err")}
