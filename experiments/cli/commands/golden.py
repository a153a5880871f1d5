"""``crosscurv golden``: write framework-independent conformance cases.

Copies the cases shipped with the package (:mod:`crosscurv.experiments.conformance.golden_data`, no
torch), or computes them with ``--recompute`` (:mod:`crosscurv.experiments.conformance.golden`).
Exit codes: 0 written, 2 bad input.
"""

from __future__ import annotations

import json

HELP = (
    "Write small self-describing float64 conformance cases (quadratic, quartic polynomial, tiny "
    "MLP, bilinear LoRA-like model; JC, GS and a partial pattern each) with their inputs, expected "
    "one-step quantities and expected per-iteration records, in plain JSON/CSV with a README, so "
    "that an implementation in another framework can be checked without torch (the copy shipped "
    "with the package; --recompute computes them)."
)


def add_arguments(p) -> None:
    p.add_argument(
        "--out", required=True, metavar="DIR", help="output folder (must not exist or be empty)"
    )
    p.add_argument(
        "--cases",
        default=None,
        metavar="NAMES",
        help="comma-separated subset of quadratic,quartic,tiny_mlp,lora_bilinear,quartic_momentum,"
             "quadratic_block_lr (default: all)",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite the files of an existing golden folder"
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help="compute the cases with torch instead of copying the ones shipped with the package",
    )
    p.add_argument("--json", action="store_true", help="print the list of files written as JSON")


def run(args) -> int:
    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    if args.recompute:
        from crosscurv.experiments.conformance.golden import write_golden

        files = write_golden(args.out, cases, force=args.force)
    else:
        from crosscurv.experiments.conformance.golden_data import copy_golden

        files = copy_golden(args.out, cases, force=args.force)
    if args.json:
        print(json.dumps({"out": args.out, "files": files}, indent=2))
    else:
        n_cases = len({f.split("/")[0] for f in files if "/" in f})
        print(
            f"wrote {len(files)} files for {n_cases} cases into {args.out} (see "
            f"{args.out}/README.md)"
        )
    return 0
