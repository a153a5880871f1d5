"""Diff a regenerated run's records against a committed one, column by column.

Used to show that a change of code leaves the records of the committed runs
unchanged up to round-off: regenerate a run with the current code at the
committed run's settings, then::

    python benchmarks/check_records_unchanged.py NEW_RUN_DIR_OR_CSV --reference REV:reports/runs/mlp/records.csv
    python benchmarks/check_records_unchanged.py NEW.csv --reference OLD.csv [--columns k,loss_jc,...] [--rtol 1e-4]

``--reference`` is a CSV path or ``REV:PATH`` read with ``git show`` (from this
checkout).  Both files are read with :func:`crosscurv.numeric.records.read_records` (a
file with the eight legacy columns is read too).  For each column of
``--columns`` (default: the eight legacy columns of
:data:`crosscurv.numeric.records.CORE_FIELDS`) it prints the largest absolute and
relative difference (relative to ``max(|reference|, tiny)``), how many
iterations are equal bit for bit, the first iteration that is not, and the
first iteration whose relative difference exceeds ``--rtol`` (where the two
runs *part*).

The ``gap`` column changed meaning in detail when the measured gap became the
segment integral of :mod:`crosscurv.numeric.gap` (no cancellation): a file written
before holds ``loss_s - loss_jc`` of two float32 losses, whose own round-off
is of the order of the float32 spacing at ``|L|``.  The script therefore also
prints ``max |gap_new - gap_old| / (eps32 |loss_jc|)``: values of order one
say the two gaps agree to the resolution of the old one.  And it checks the new
run against itself: the iterations whose ``gap`` differs from its own
``loss_s - loss_jc`` by more than ``gap_err`` plus the subtraction's round-off
(``4 eps32 |loss|``), i.e. where the claimed error bound of the gap does not hold.

``--last-gap`` (with a run folder) also evaluates, from the run's last
checkpoint (the state of its last iteration ``K``), ``L(theta_S^K) - L(theta_JC^K)``
in float64 by subtraction and by 64-point Gauss-Legendre, next to the 5-point
segment rule in float64 and the record's ``gap`` and ``gap_err``.

Reports, never asserts (exit code 0; 2 on unreadable input).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from crosscurv.numeric.records import CORE_FIELDS, RECORDS_FILE, read_records  # noqa: E402

EPS32 = 2.0 ** -23


def _read(spec: str) -> list[dict]:
    """Records from a run folder, a CSV path, or ``REV:PATH`` in git."""
    if os.path.isdir(spec):
        spec = os.path.join(spec, RECORDS_FILE)
    if os.path.exists(spec):
        return read_records(spec)
    if ":" in spec:
        text = subprocess.run(["git", "-C", ROOT, "show", spec], check=True, capture_output=True, text=True).stdout
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, RECORDS_FILE)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return read_records(path)
    raise FileNotFoundError(spec)


def compare(new: list[dict], old: list[dict], columns=CORE_FIELDS, rtol: float = 1e-4) -> dict:
    """Per column: ``max_abs``, ``max_rel``, ``equal`` (bitwise), ``first_unequal``, ``first_parted`` (k or None)."""
    by_k_new = {int(r["k"]): r for r in new}
    ks = [int(r["k"]) for r in old if int(r["k"]) in by_k_new]
    out = {"iterations": len(ks), "only_old": len(old) - len(ks), "only_new": len(new) - len(ks), "columns": {}}
    for c in columns:
        max_abs = max_rel = 0.0
        equal, first_unequal, first_parted = 0, None, None
        for r in old:
            k = int(r["k"])
            if k not in by_k_new:
                continue
            a, b = float(by_k_new[k][c]), float(r[c])
            if a == b or (math.isnan(a) and math.isnan(b)):
                equal += 1
                continue
            d = abs(a - b)
            rel = d / max(abs(b), 1e-300)
            max_abs, max_rel = max(max_abs, d), max(max_rel, rel)
            if first_unequal is None:
                first_unequal = k
            if first_parted is None and rel > rtol:
                first_parted = k
        out["columns"][c] = {"max_abs": max_abs, "max_rel": max_rel, "equal": equal,
                             "first_unequal": first_unequal, "first_parted": first_parted}
    if "gap" in columns:
        worst, at = 0.0, None
        for r in old:
            k = int(r["k"])
            if k in by_k_new:
                units = abs(float(by_k_new[k]["gap"]) - float(r["gap"])) / (EPS32 * abs(float(r["loss_jc"])))
                if units > worst:
                    worst, at = units, k
        out["gap_in_float32_spacings"] = {"max": worst, "at": at}
    out["gap_consistency"] = gap_consistency(new)
    return out


def gap_consistency(records: list[dict]) -> dict | None:
    """Iterations of one run whose ``gap`` differs from ``loss_s - loss_jc`` by more than
    ``gap_err + 4 eps32 max(|loss_jc|, |loss_s|)`` (the claimed error plus the subtraction's own
    round-off); ``None`` for a file without ``gap_err``."""
    rows = [r for r in records if not math.isnan(float(r.get("gap_err", math.nan)))]
    if not rows:
        return None
    beyond = []
    for r in rows:
        diff = abs(float(r["gap"]) - (float(r["loss_s"]) - float(r["loss_jc"])))
        tol = float(r["gap_err"]) + 4 * EPS32 * max(abs(float(r["loss_jc"])), abs(float(r["loss_s"])))
        if diff > tol:
            beyond.append((int(r["k"]), diff / tol))
    worst = max(beyond, key=lambda x: x[1]) if beyond else (None, 0.0)
    return {"iterations": len(rows), "beyond": len(beyond), "first": beyond[0][0] if beyond else None,
            "worst_k": worst[0], "worst_ratio": worst[1]}


def last_gap(run_dir: str) -> dict:
    """The gap at the run's last iteration recomputed in float64 from ``checkpoint.pt`` (module docstring)."""
    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.gap import loss_gap, segment_gap
    from crosscurv.numeric.hvp import grad
    from crosscurv.numeric.records import read_summary

    settings = read_summary(os.path.join(run_dir, "summary.json"))["settings"]
    ck = torch.load(os.path.join(run_dir, "checkpoint.pt"), map_location="cpu", weights_only=True)
    task, _ = load_task(settings["task"], settings.get("preset"), dtype=torch.float64, device=torch.device("cpu"),
                        seed=int(settings.get("seed", 0)))
    a = {k: v.to(torch.float64) for k, v in ck["vectors"]["theta_s"].items()}
    b = {k: v.to(torch.float64) for k, v in ck["vectors"]["theta_j"].items()}
    with torch.no_grad():
        sub = float(task.loss(a)) - float(task.loss(b))
    seg, err = segment_gap(task.loss, a, b, grad(task.loss, a)[1], grad(task.loss, b)[1])
    rec = [r for r in read_records(os.path.join(run_dir, RECORDS_FILE)) if int(r["k"]) == int(ck["k"]) + 1]
    return {"k": int(ck["k"]) + 1, "subtraction64": sub, "gauss_legendre64": loss_gap(task, a, b, 64),
            "segment64": seg, "segment64_err": err,
            "record_gap": float(rec[0]["gap"]) if rec else None, "record_gap_err": float(rec[0]["gap_err"]) if rec else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", help="regenerated run folder or records CSV")
    ap.add_argument("--reference", required=True, help="committed records: CSV path or REV:PATH")
    ap.add_argument("--columns", default=",".join(CORE_FIELDS))
    ap.add_argument("--rtol", type=float, default=1e-4, help="relative difference at which two runs have parted")
    ap.add_argument("--last-gap", action="store_true", help="recompute the last iteration's gap in float64 (run folder)")
    args = ap.parse_args(argv)
    try:
        new, old = _read(args.new), _read(args.reference)
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        print(f"check_records_unchanged: error: {exc}", file=sys.stderr)
        return 2
    res = compare(new, old, [c.strip() for c in args.columns.split(",") if c.strip()], args.rtol)
    print(f"{args.new} against {args.reference}: {res['iterations']} common iterations"
          f" ({res['only_old']} only in the reference, {res['only_new']} only in the new run)")
    print("| column | max abs diff | max rel diff | bitwise equal | first unequal k | "
          f"first k with rel diff > {args.rtol:g} |")
    print("|---|---|---|---|---|---|")
    for c, r in res["columns"].items():
        print(f"| {c} | {r['max_abs']:.3g} | {r['max_rel']:.3g} | {r['equal']}/{res['iterations']} | "
              f"{r['first_unequal'] or '-'} | {r['first_parted'] or '-'} |")
    if "gap_in_float32_spacings" in res:
        g = res["gap_in_float32_spacings"]
        print(f"gap: max |gap_new - gap_old| = {g['max']:.2f} float32 spacings at |loss_jc| (k = {g['at']})")
    c = res.get("gap_consistency")
    if c:
        print(f"gap of the new run against its own loss_s - loss_jc: {c['beyond']} of {c['iterations']} iterations "
              f"differ by more than gap_err + 4 eps32 |loss| (first k = {c['first']}; worst k = {c['worst_k']}, "
              f"{c['worst_ratio']:.1f} times that)")
    if args.last_gap:
        g = last_gap(args.new)
        print(f"gap at k = {g['k']} in float64: subtraction {g['subtraction64']:.9g}, 64-point Gauss-Legendre "
              f"{g['gauss_legendre64']:.9g}, 5-point segment rule {g['segment64']:.9g} (claimed error "
              f"{g['segment64_err']:.2g}); the record: gap {g['record_gap']:.9g}, gap_err {g['record_gap_err']:.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
