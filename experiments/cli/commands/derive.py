"""``crosscurv derive``: derive and verify the paper's expansions symbolically (SymPy).

Runs :func:`crosscurv.theory.derivation.derive`, prints a summary (``--json``: one object) and
writes ``DIR/theory.md``. Exit codes: 0 every check holds, 1 an identity fails, 2 bad input. Never
imports torch.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

HELP = (
    "Derive the paper's one-step and multi-step expansions for a generic block model with SymPy "
    "and verify Lemma 1, Theorem 1, Corollary 1, the GS update-order argument, Lemma 3, Theorem 2 "
    "and Theorem 3 (quadratic) exactly, plus the eta^3 coefficient of L_S - L_JC. Writes "
    "DIR/theory.md."
)


def add_arguments(p) -> None:
    p.add_argument("--blocks", type=int, default=3, metavar="N",
                   help="number of blocks N >= 2 (default 3; N x D at most 8)")
    p.add_argument("--dims", type=int, default=1, metavar="D",
                   help="dimension of each block: 1 or 2 (default 1)")
    p.add_argument("--pattern", default="gs", metavar="P",
                   help="delay pattern: jc, gs, gs:ORDER, chain, chain:ORDER or pairs i<-j,... "
                        "(1-based; default gs)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the summary")
    p.add_argument("--out", default="reports", metavar="DIR",
                   help="folder for theory.md (default reports)")
    p.add_argument("--no-optimizers", action="store_true",
                   help="skip the block-separable optimizer checks (per-block step sizes, "
                        "preconditioner, heavy ball, Adam)")


def run(args) -> int:
    from crosscurv.theory.derivation import derive
    from crosscurv.theory.report import render_summary, write_markdown

    progress = None
    if sys.stderr.isatty():  # one line per finished stage, so a long derivation shows where it is
        def progress(stage: str, seconds: float) -> None:
            print(f"derive: {stage} done in {seconds:.1f} s", file=sys.stderr, flush=True)

    result = derive(args.blocks, args.dims, args.pattern, progress=progress)
    optimizers = None
    if not getattr(args, "no_optimizers", False):
        from crosscurv.theory.optimizers.derivation import (derive_optimizers,
                                                            render_optimizer_summary)

        optimizers = derive_optimizers(args.blocks, args.dims, args.pattern)
    command = ("crosscurv derive --blocks {} --dims {} --pattern {}"
               .format(args.blocks, args.dims, shlex.quote(args.pattern)))
    if optimizers is None:
        command += " --no-optimizers"
    path = write_markdown(result, Path(args.out) / "theory.md", command, optimizers)
    if args.json:
        obj = result.to_dict()
        if optimizers is not None:
            obj["optimizers"] = optimizers.to_dict()
        obj["report"] = str(path)
        print(json.dumps(obj, indent=2))
        print(f"wrote {path}", file=sys.stderr)
    else:
        print(render_summary(result))
        if optimizers is not None:
            print(render_optimizer_summary(optimizers))
        print(f"wrote {path}")
    ok = result.ok and (optimizers is None or optimizers.ok)
    return 0 if ok else 1
