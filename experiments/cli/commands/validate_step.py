"""``crosscurv validate-step SPEC``: which block scheme does a user's step perform?

``SPEC`` is ``module:factory`` or ``path/to/file.py:factory`` (as ``crosscurv run --task``); the
factory returns ``(task, step[, pattern])``, a dict or an object with those names, or a dict of
NumPy callables ``{"params", "loss", "grad", "step"}``. ``step(params, lr)`` maps a dict of float64
tensors keyed like ``task.params`` to new ones; the method is
:func:`crosscurv.numeric.validation.identify_step`. Exit codes: 0 the step performs the declared
pattern (or some candidate), 1 it does not, 2 bad input.
"""

from __future__ import annotations

import json
import math

HELP = (
    "Tell which block scheme a user's step function performs: run it from seeded states at step "
    "sizes eta0*2^-k and compare with the exact JC step, full GS in every block order (N <= 4) and "
    "the declared pattern. A match means agreement to round-off at every eta; otherwise the "
    "nearest scheme and the observed order of the difference are reported. SPEC is module:factory "
    "or path/to/file.py:factory returning (task, step[, pattern]), an object with .task and .step, "
    "or NumPy callables {params, loss, grad, step}."
)


def add_arguments(p) -> None:
    p.add_argument("spec", metavar="SPEC", help="module:factory or path/to/file.py:factory")
    p.add_argument("--pattern", default=None,
                   help="declared pattern (overrides the factory's): jc, gs, gs:ORDER, chain, "
                        "i<-j,...")
    p.add_argument("--seeds", default="0,1,2",
                   help="comma-separated seeds of the test states (default 0,1,2)")
    p.add_argument("--perturb", type=float, default=0.5,
                   help="state perturbation relative to each tensor's RMS (default 0.5)")
    p.add_argument("--eta0", type=float, default=None,
                   help="largest step size (default 0.1 / |lambda_max(H)| by power iteration)")
    p.add_argument("--n-etas", type=int, default=5,
                   help="number of step sizes eta0*2^-k (default 5, min 3)")
    p.add_argument("--rtol", type=float, default=1e-9,
                   help="match tolerance relative to the step size (default 1e-9)")
    p.add_argument("--device", default=None,
                   help="device offered to a factory that declares `device`")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step factors as in `crosscurv run`: block NAME of every "
                        "candidate steps with lr*FACTOR (default: inferred from the step's "
                        "first-order term when they differ between blocks)")
    p.add_argument("--optimizer", default=None, metavar="momentum:BETA|adam[:B1,B2,EPS]",
                   help="the step keeps an optimizer state passed in: it is called as step(params, "
                        "lr, state) with a seeded state ({'step': k, 'momentum_buffer' or "
                        "'exp_avg', 'exp_avg_sq': {param: tensor}}) and compared with the "
                        "optimizer-aware schemes (as `crosscurv run --optimizer`)")
    p.add_argument("--no-fit", action="store_true",
                   help="skip the fit of the step's second-order term")
    p.add_argument("--verbose", action="store_true",
                   help="print the error-vs-eta table of every candidate")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _seeds(text: str) -> list[int]:
    from crosscurv.numeric.validation import ValidationInputError

    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValidationInputError(
            f"--seeds must be comma-separated integers, got {text!r}") from None
    if not seeds:
        raise ValidationInputError("--seeds names no seed")
    return seeds


def load_step_factory(spec: str, device=None):
    """Resolve ``spec`` and call the factory (one-line errors from
    :mod:`crosscurv.experiments.tasks.loading`)."""
    import torch

    from crosscurv.experiments.tasks import loading
    factory = loading.resolve_factory(spec)
    offered = {"dtype": torch.float64}
    if device is not None:
        from crosscurv.numeric.device import resolve_device

        offered["device"] = resolve_device(device)
    return loading.call_factory(factory, spec, offered)


def run(args) -> int:
    from crosscurv.numeric.validation import ValidationInputError, as_user_step, identify_step

    if ":" not in args.spec:
        raise ValidationInputError(
            f"validate-step takes a step factory, module:factory or path/to/file.py:factory "
            f"returning (task, step[, pattern]), not a task name ({args.spec!r})"
        )
    seeds = _seeds(args.seeds)
    if args.eta0 is not None and not (math.isfinite(args.eta0) and args.eta0 > 0):
        raise ValidationInputError(f"--eta0 must be a finite number > 0, got {args.eta0}")
    if args.n_etas < 3:
        raise ValidationInputError(f"--n-etas must be >= 3, got {args.n_etas}")
    if not (math.isfinite(args.rtol) and args.rtol > 0):
        raise ValidationInputError(f"--rtol must be a finite number > 0, got {args.rtol}")
    if not (math.isfinite(args.perturb) and args.perturb >= 0):
        raise ValidationInputError(f"--perturb must be a finite number >= 0, got {args.perturb}")
    obj = load_step_factory(args.spec, args.device)
    user = as_user_step(obj, name=args.spec, pattern=args.pattern)
    report = identify_step(user, seeds=seeds, perturb=args.perturb, eta0=args.eta0,
                           n_etas=args.n_etas, rtol=args.rtol, fit=not args.no_fit,
                           block_lr=args.block_lr, optimizer=args.optimizer)
    if args.json:
        from crosscurv.numeric.records import json_safe

        print(json.dumps(json_safe(report.to_dict()), indent=2))
    else:
        print(report.text(verbose=args.verbose))
    return 0 if report.ok else 1
