"""``crosscurv golden``: write framework-independent conformance cases.

Writes four small float64 cases (quadratic, quartic polynomial, tiny MLP,
bilinear LoRA-like model), each with JC, full GS and a partial pattern, as
plain JSON and CSV with a README that explains the format
(:mod:`crosscurv.experiments.conformance.golden`).  Exit codes: 0 written, 2 bad input (unknown
case, output folder not empty without ``--force``).
"""

from __future__ import annotations

import json

HELP = (
    "Write small self-describing float64 conformance cases (quadratic, quartic polynomial, tiny MLP, "
    "bilinear LoRA-like model; JC, GS and a partial pattern each) with their inputs, expected one-step "
    "quantities and expected per-iteration records, in plain JSON/CSV with a README, so that an "
    "implementation in another framework can be checked without torch."
)


def add_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (must not exist or be empty)")
    p.add_argument("--cases", default=None, metavar="NAMES",
                   help="comma-separated subset of quadratic,quartic,tiny_mlp,lora_bilinear (default: all)")
    p.add_argument("--force", action="store_true", help="overwrite the files of an existing golden folder")
    p.add_argument("--json", action="store_true", help="print the list of files written as JSON")


def run(args) -> int:
    from crosscurv.experiments.conformance.golden import write_golden

    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    files = write_golden(args.out, cases, force=args.force)
    if args.json:
        print(json.dumps({"out": args.out, "files": files}, indent=2))
    else:
        n_cases = len({f.split("/")[0] for f in files if "/" in f})
        print(f"wrote {len(files)} files for {n_cases} cases into {args.out} (see {args.out}/README.md)")
    return 0
