"""``crosscurv validate-step SPEC``: which block scheme does a user's step perform?

``SPEC`` is ``module:factory`` or ``path/to/file.py:factory`` (resolved like
``crosscurv run``'s user tasks, :mod:`crosscurv.experiments.tasks.loading`).  The factory is
called with the keyword arguments it declares among ``dtype`` (always
``torch.float64``) and ``device`` (``--device``), and returns one of

* ``(task, step)`` or ``(task, step, pattern)``,
* a dict with keys ``task``, ``step`` and optionally ``pattern``,
* an object with attributes ``.task``, ``.step`` and optionally ``.pattern``,
* a dict of NumPy callables ``{"params", "loss", "grad", "step"}`` (optionally ``"blocks"``,
  ``"pattern"``): a step written outside torch, checked through differences of its gradient
  (:func:`crosscurv.numeric.validation.numpy_user_step`),

where ``task`` is a float64 :class:`crosscurv.numeric.Task`, ``step(params, lr) ->
new params`` maps a dict of tensors keyed like ``task.params`` and a float
to a dict with the same names, shapes and dtype, and ``pattern`` is the
declared scheme (``jc``, ``gs``, ``gs:B,A``, ``2<-1``...; ``--pattern``
overrides it).  See :func:`crosscurv.numeric.validation.identify_step` for the method.

Exit codes: 0 the step performs the declared pattern (or, with none
declared, some candidate) to round-off; 1 it does not, or it is not a
function of its input; 2 bad input (one line: the factory cannot be imported
or raises, the step returns other names, shapes or dtypes or non-finite
values, ...).
"""

from __future__ import annotations

import json
import math

HELP = (
    "Tell which block scheme a user's step function performs: run it from seeded states at step "
    "sizes eta0*2^-k and compare with the exact JC step, full GS in every block order (N <= 4) and "
    "the declared pattern. A match means agreement to round-off at every eta; otherwise the nearest "
    "scheme and the observed order of the difference are reported. SPEC is module:factory or "
    "path/to/file.py:factory returning (task, step[, pattern]), an object with .task and .step, or "
    "NumPy callables {params, loss, grad, step}."
)


def add_arguments(p) -> None:
    p.add_argument("spec", metavar="SPEC", help="module:factory or path/to/file.py:factory")
    p.add_argument("--pattern", default=None,
                   help="declared pattern (overrides the factory's): jc, gs, gs:ORDER, chain, i<-j,...")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds of the test states (default 0,1,2)")
    p.add_argument("--perturb", type=float, default=0.5,
                   help="state perturbation relative to each tensor's RMS (default 0.5)")
    p.add_argument("--eta0", type=float, default=None,
                   help="largest step size (default 0.1 / |lambda_max(H)| by power iteration)")
    p.add_argument("--n-etas", type=int, default=5, help="number of step sizes eta0*2^-k (default 5, min 3)")
    p.add_argument("--rtol", type=float, default=1e-9,
                   help="match tolerance relative to the step size (default 1e-9)")
    p.add_argument("--device", default=None, help="device offered to a factory that declares `device`")
    p.add_argument("--block-lr", default=None, metavar="NAME=FACTOR,...",
                   help="per-block step factors as in `crosscurv run`: block NAME of every candidate steps with "
                        "lr*FACTOR (default: inferred from the step's first-order term when they differ between blocks)")
    p.add_argument("--optimizer", default=None, metavar="momentum:BETA|adam[:B1,B2,EPS]",
                   help="the step keeps an optimizer state passed in: it is called as step(params, lr, state) "
                        "with a seeded state ({'step': k, 'momentum_buffer' or 'exp_avg', 'exp_avg_sq': {param: "
                        "tensor}}) and compared with the optimizer-aware schemes (as `crosscurv run --optimizer`)")
    p.add_argument("--no-fit", action="store_true", help="skip the fit of the step's second-order term")
    p.add_argument("--verbose", action="store_true", help="print the error-vs-eta table of every candidate")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _seeds(text: str) -> list[int]:
    from crosscurv.numeric.validation import ValidationInputError

    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValidationInputError(f"--seeds must be comma-separated integers, got {text!r}") from None
    if not seeds:
        raise ValidationInputError("--seeds names no seed")
    return seeds


def load_step_factory(spec: str, device=None):
    """Resolve ``spec`` and call the factory (one-line errors from :mod:`crosscurv.experiments.tasks.loading`)."""
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
            f"validate-step takes a step factory, module:factory or path/to/file.py:factory returning "
            f"(task, step[, pattern]), not a task name ({args.spec!r})"
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
    report = identify_step(user, seeds=seeds, perturb=args.perturb, eta0=args.eta0, n_etas=args.n_etas,
                           rtol=args.rtol, fit=not args.no_fit, block_lr=args.block_lr,
                           optimizer=args.optimizer)
    if args.json:
        from crosscurv.numeric.records import json_safe

        print(json.dumps(json_safe(report.to_dict()), indent=2))
    else:
        print(report.text(verbose=args.verbose))
    return 0 if report.ok else 1
