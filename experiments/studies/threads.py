"""How far two runs of the same study with different thread counts agree before they part.

Float32 reductions depend on the intra-op thread count, so runs with 1 and 2 threads differ in the
last digits, and past the edge of stability the differences grow. :func:`compare_runs` gives, over
the common records, the first ``k`` where any column differs (bit for bit) and where the observed
winner differs, the winner counts of each, and per estimate ``Correct`` and ``MAE`` with ``|MAE_b -
MAE_a| / MAE_a``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from crosscurv.experiments.reports.table import ESTIMATE_ROWS

__all__ = ["compare_runs", "match_runs", "render_comparison"]

#: record columns compared bit for bit
COMPARED = ("loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk",
            "sharpness", "gap_err")


def _first_difference(a: np.ndarray, b: np.ndarray, k: np.ndarray) -> int | None:
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    bad = np.flatnonzero(~same)
    return int(k[bad[0]]) if bad.size else None


def compare_runs(a, b, estimates: Sequence[str] = ESTIMATE_ROWS) -> dict:
    """Compare two :class:`~crosscurv.experiments.studies.collect.StudyRun` over their common
    records.

    Returns:
        ``{"K", "first_record_diff", "first_column", "first_winner_diff", "counts_a", "counts_b",
        "estimates": {est: {"correct_a", "correct_b", "mae_a", "mae_b", "mae_rel_diff"}}}``;
        ``first_*`` are iterations ``k`` (``None``: none differs), ``counts_*`` are ``(n_JC, n_GS,
        undecided)``.
    """
    from crosscurv.numeric.metrics import evaluate, undecided, winner

    K = min(a.K, b.K)
    ca, cb = a.columns(K), b.columns(K)
    k = np.asarray(ca["k"])
    firsts = {}
    for col in COMPARED:
        if col in ca and col in cb:
            firsts[col] = _first_difference(np.asarray(ca[col], float), np.asarray(cb[col], float),
                                            k)
    ks = [v for v in firsts.values() if v is not None]
    first = min(ks) if ks else None
    # in record order
    first_col = next((c for c in COMPARED if firsts.get(c) == first), None) if ks else None

    def winners(cols):
        errs = cols.get("gap_err", np.zeros_like(cols["gap"]))
        return ["undecided" if undecided(g, e) else winner(g) for g, e in zip(cols["gap"], errs)]

    wa, wb = winners(ca), winners(cb)
    wdiff = next((int(k[i]) for i, (x, y) in enumerate(zip(wa, wb)) if x != y), None)

    def counts(w):
        return (w.count("JC"), w.count("GS"), w.count("undecided"))

    out = {"K": K, "first_record_diff": first, "first_column": first_col,
           "first_winner_diff": wdiff, "counts_a": counts(wa), "counts_b": counts(wb),
           "estimates": {}}
    for est in estimates:
        if est not in ca or est not in cb:
            continue
        ma = evaluate(ca["gap"], ca[est], ca.get("gap_err"))
        mb = evaluate(cb["gap"], cb[est], cb.get("gap_err"))
        rel = abs(mb.mae - ma.mae) / abs(ma.mae) if ma.mae else (0.0 if mb.mae == ma.mae
                                                                 else math.inf)
        out["estimates"][est] = {"correct_a": ma.correct, "correct_b": mb.correct, "mae_a": ma.mae,
                                 "mae_b": mb.mae, "mae_rel_diff": rel,
                                 "hits_a": (ma.jc_hits, ma.s_hits), "hits_b": (mb.jc_hits,
                                                                               mb.s_hits)}
    return out


#: settings that may differ between a study's run and its repeat without changing what is computed
_NOT_COMPARED = {"iters", "threads", "threads_source", "checkpoint_every", "offload"}


def setting_differences(a, b) -> list[str]:
    """The recorded settings (``summary.json``) in which two runs differ, beyond the thread count
    and ``K``; ``offload`` as ``offload on/off`` (parking the carried vectors in files: other
    memory, the same values by design)."""
    sa, sb = a.settings, b.settings
    keys = sorted(k for k in set(sa) | set(sb) if k not in _NOT_COMPARED and sa.get(k) != sb.get(k))
    if sa.get("offload") != sb.get("offload"):
        on = lambda s: "on" if s.get("offload") else "off"  # noqa: E731
        keys.append(f"offload {on(sa)}/{on(sb)}")
    return keys


def _key(r) -> tuple:
    return (r.task, r.preset, r.lr, r.seed, r.pattern, r.dtype)


def match_runs(reference: Sequence, others: Sequence) -> list[tuple]:
    """Pairs ``(reference run, other run)`` of equal settings (task, preset, eta, seed, pattern,
    dtype), in the order of ``others``; ``K`` may differ (they are compared over their common
    records). A pair with the same thread count is a control: the same computation repeated, which
    must agree bit for bit."""
    by_key = {}
    for r in reference:
        by_key.setdefault(_key(r), r)
    pairs = []
    for o in others:
        ref = by_key.get(_key(o))
        if ref is not None and Path(ref.run.path).resolve() != Path(o.run.path).resolve():
            pairs.append((ref, o))
    return pairs


def render_comparison(pairs: Sequence[tuple], estimates: Sequence[str] = ESTIMATE_ROWS,
                      fmt: str = "github") -> str:
    """One row per pair: threads, common K, first differing record and winner, counts, per-estimate
    MAE change."""
    from tabulate import tabulate

    body = []
    for a, b in pairs:
        c = compare_runs(a, b, estimates)
        first = "none" if c[
            "first_record_diff"] is None else f"k = {c['first_record_diff']} ({c['first_column']})"
        wfirst = "none" if c["first_winner_diff"] is None else f"k = {c['first_winner_diff']}"
        same = "identical" if c["counts_a"] == c["counts_b"] else (
            "%d/%d/%d vs %d/%d/%d" % (c["counts_a"] + c["counts_b"]))
        row = [a.task, f"seed {a.seed}", f"{a.threads if a.threads else '?'} vs "
                                         f"{b.threads if b.threads else '?'}",
               str(c["K"]), ", ".join(setting_differences(a, b)) or "none recorded", first, wfirst,
               same]
        for est in estimates:
            e = c["estimates"].get(est)
            row.append("-" if e is None else
                       f"{e['correct_a']:.1f}% vs {e['correct_b']:.1f}%, MAE "
                       f"{e['mae_rel_diff'] * 100:.2g}%")
        body.append(row)
    head = ["task", "run", "threads", "common K", "other settings that differ",
            "first differing record", "first differing observed winner",
            "n_JC/n_GS/undecided"] + [f"{e}: Correct, MAE change" for e in estimates]
    return tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True)
