"""``crosscurv validate-records THEIRS.csv``: compare a user's records with the reference.

The reference is a run folder (``--reference RUN_DIR``, or ``golden:<case>/<label>``) or is computed
on the fly (``--task/--pattern/--lr/--iters``); ``THEIRS.json`` holds one-step results checked
against a golden case. Values agree when ``|theirs - ref| <= atol + rtol |ref|`` with the reference
dtype's :data:`crosscurv.numeric.record_comparison.TOLERANCES` unless ``--rtol/--atol``. Exit codes:
0 agree, 1 a disagreement (first iteration, column and likely diagnosis), 2 bad input.
"""

from __future__ import annotations

import json
import math
import os

from crosscurv.numeric.records import RecordsError

HELP = (
    "Compare your per-iteration records (CSV with k, loss_jc, loss_s, gap, recursive, cumulative; "
    "jc_only, bound_bk, sharpness, gap_err when present) with a reference run directory or golden "
    "case (--reference DIR or golden:CASE/LABEL) or a reference computed on the fly "
    "(--task/--pattern/--lr/--iters), per column and iteration with tolerances from the measured "
    "rounding of each column; names the first disagreement and a likely diagnosis (the formula an "
    "estimate departs from, off-by-one in k, sign flip, swapped columns, precision). THEIRS.json: "
    "one-step results (c_ij, C_S, eta^2/eta^3 estimates) against a golden case folder."
)


def add_arguments(p) -> None:
    p.add_argument("theirs", metavar="THEIRS.csv",
                   help="your records CSV (or THEIRS.json: one-step results)")
    p.add_argument("--reference", metavar="RUN_DIR", default=None,
                   help="reference run directory with records.csv and summary.json, or "
                        "golden:CASE/LABEL (a golden case folder or golden:CASE for THEIRS.json)")
    p.add_argument("--task", default=None, help="compute the reference on the fly: built-in task "
                                                "or module:factory")
    p.add_argument("--pattern", default=None,
                   help="pattern of the on-the-fly reference (default: the task's)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate of the on-the-fly reference")
    p.add_argument("--iters", type=int, default=None,
                   help="iterations of the on-the-fly reference (default: the largest k in "
                        "THEIRS.csv)")
    p.add_argument("--preset", choices=("smoke", "default", "edge", "paper"), default=None,
                   help="built-in task preset of the on-the-fly reference")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="dtype of the on-the-fly reference (default: float32 for built-ins, the "
                        "factory's otherwise)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the on-the-fly reference (default 0)")
    p.add_argument("--optimizer", default=None, metavar="SPEC",
                   help="optimizer of the on-the-fly reference: sgd (default), momentum:BETA or "
                        "adam[:B1,B2,EPS]")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step-size factors of the on-the-fly reference")
    p.add_argument("--save-reference", metavar="DIR", default=None,
                   help="keep the on-the-fly reference run in DIR")
    p.add_argument("--rtol", type=float, default=None,
                   help="relative tolerance (default: by the reference's dtype)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (default: by "
                                                            "dtype, times the loss scale)")
    p.add_argument("--columns", default=None,
                   help="comma-separated columns to compare (default: all but k)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


#: Largest float64 task whose on-the-fly reference also gets ``terms.csv`` (dense Hessians).
TERMS_MAX_PARAMS = 64


def _reference_on_the_fly(args, their_k: list[int]) -> tuple[dict, str | None, str, dict | None]:
    """The reference records, dtype, a description and, for a plain float64 run of at most
    :data:`TERMS_MAX_PARAMS` parameters, the terms of the formula-level diagnoses."""
    import torch

    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.records import records_columns
    from crosscurv.theory.patterns import as_pattern

    dtype = {"float32": torch.float32, "float64": torch.float64}.get(args.dtype)
    task, settings = load_task(args.task, args.preset, dtype=dtype, seed=args.seed)
    spec = args.pattern or settings.get("pattern") or task.default_pattern
    pattern = as_pattern(spec, task.n_blocks, task.block_names)
    lr = args.lr if args.lr is not None else settings.get("lr")
    if lr is None:
        raise RecordsError(f"--lr is needed: task {args.task!r} sets no default learning rate")
    iters = args.iters if args.iters is not None else max(their_k)
    if iters < 1:
        raise RecordsError(f"--iters must be >= 1, got {iters}")
    res = run_protocol(task, pattern, float(lr), int(iters), out_dir=args.save_reference,
                       seed=args.seed, settings={"task": args.task, "preset": args.preset},
                       optimizer=args.optimizer, block_lr=args.block_lr)
    if not res.records:
        raise RecordsError(f"the reference run produced no records ({res.message})")
    dt = str(task.dtype).replace("torch.", "")
    opt = res.summary["settings"]["optimizer"]["spec"]
    if res.summary["settings"]["block_lr"]:
        opt += " block-lr " + ",".join(f"{b}={f!r}" for b, f in res.summary["settings"][
            "block_lr"].items())
    where = (f"{args.task} pattern {spec} lr {lr:g} K "
             f"{iters}{'' if opt == 'sgd' else ' optimizer ' + opt} ({dt}, computed now)")
    terms = None
    small = task.num_params() <= TERMS_MAX_PARAMS and task.dtype == torch.float64
    if opt == "sgd" and small and len(res.records) == iters:
        from crosscurv.experiments.conformance.golden_terms import TERM_COLUMNS, formula_terms
        from crosscurv.numeric.estimates import init_power_vector

        rows = formula_terms(task, pattern, float(lr), int(iters),
                             init_power_vector(task.params, args.seed))
        terms = {c: [r[c] for r in rows] for c in ("k",) + TERM_COLUMNS}
        if args.save_reference:
            from crosscurv.experiments.conformance.golden_check import TERMS_FILE
            from crosscurv.numeric.records import RecordWriter

            path = os.path.join(args.save_reference, TERMS_FILE)
            with RecordWriter(path, fields=("k",) + TERM_COLUMNS) as w:
                w.write_rows(rows)
    return records_columns(res.records), dt, where, terms


def run(args) -> int:
    from crosscurv.experiments.conformance.golden_check import as_columns, read_reference
    from crosscurv.numeric.record_comparison import (ALL_COLUMNS, OPTIONAL_COLUMNS, column_scale,
                                                     compare_records, compared_columns,
                                                     reference_tolerances)

    if (args.reference is None) == (args.task is None):
        raise RecordsError("give exactly one of --reference RUN_DIR or --task TASK (with --lr, "
                           "--iters ...)")
    if args.reference is not None:
        stray = [f for f in ("pattern", "lr", "iters", "preset", "dtype", "save_reference",
                             "optimizer", "block_lr")
                 if getattr(args, f) is not None]
        if stray:
            raise RecordsError("--" + stray[0].replace("_", "-")
                               + " only applies to an on-the-fly reference (--task)")
    for name in ("rtol", "atol"):
        v = getattr(args, name)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise RecordsError(f"--{name} must be a finite number >= 0, got {v}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise RecordsError(f"--lr must be a finite number > 0, got {args.lr}")
    columns = None
    if args.columns:
        columns = [c.strip() for c in args.columns.split(",") if c.strip()]
        bad = [c for c in columns if c not in ALL_COLUMNS]
        if bad:
            raise RecordsError(f"unknown column(s) {', '.join(bad)} (columns: "
                               f"{', '.join(ALL_COLUMNS)})")

    if args.theirs.endswith(".json"):
        return _one_step(args)
    theirs = as_columns(args.theirs, columns)
    if args.reference is not None:
        ref = read_reference(args.reference)
        ref, dtype, where, terms = ref.columns, ref.dtype, ref.where, ref.terms
    else:
        ref, dtype, where, terms = _reference_on_the_fly(args, theirs["k"])
    columns = compared_columns(theirs, ref, columns)
    tol = reference_tolerances(ref, dtype, columns, rtol=args.rtol, atol=args.atol)
    comp = compare_records(theirs, ref, tolerances=tol, columns=columns, terms=terms)
    left_out = [c for c in OPTIONAL_COLUMNS if c not in columns]
    if left_out and not args.columns:
        comp.notes.append(f"column(s) {', '.join(left_out)} not compared: not in both records")
    if args.json:
        from crosscurv.numeric.records import json_safe

        out = comp.to_dict()
        out.update(theirs=args.theirs, reference=where, dtype=dtype or "float64 (assumed)")
        print(json.dumps(json_safe(out), indent=2))
    else:
        print(f"theirs: {args.theirs}")
        print(f"reference: {where}; dtype {dtype or 'unknown (float64 tolerances)'}")
        if args.rtol is not None and args.atol is not None:
            print(f"tolerance: |theirs - ref| <= {args.atol:.3g} + {args.rtol:g} |ref|")
        else:
            print(f"tolerance: |theirs - ref| <= atol + rtol |ref| per column "
                  f"(crosscurv.numeric.record_comparison.TOLERANCES: measured rounding x safety "
                  f"factor); atol = atol_rel x loss scale {column_scale(ref, 'loss_jc'):.4g}"
                  + (f" (sharpness: x its scale {column_scale(ref, 'sharpness'):.4g})"
                     if "sharpness" in columns else "")
                  + ("" if args.rtol is None else f"; --rtol {args.rtol:g} for every column")
                  + ("" if args.atol is None else f"; --atol {args.atol:g} for every column"))
        print(comp.text())
    return comp.exit_code


def _one_step(args) -> int:
    """``THEIRS.json`` against a golden case's ``one_step.json``."""
    from crosscurv.experiments.conformance.golden_check import check_one_step

    if args.reference is None:
        raise RecordsError("one-step results (THEIRS.json) are checked against --reference "
                           "CASE_DIR or golden:CASE")
    if args.atol is not None or args.columns:
        raise RecordsError("--atol and --columns apply to records; one-step results take --rtol "
                           "only")
    comp = check_one_step(args.theirs, args.reference, rtol=args.rtol)
    if args.json:
        from crosscurv.numeric.records import json_safe

        out = dict(comp.to_dict(), theirs=args.theirs, reference=comp.where)
        print(json.dumps(json_safe(out), indent=2))
    else:
        print(f"theirs: {args.theirs}")
        print(f"reference: {comp.where}; |theirs - expected| <= rtol x the largest expected value "
              "of its kind (crosscurv.numeric.one_step_comparison.RTOL)")
        print(comp.text())
    return comp.exit_code
