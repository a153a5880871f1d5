"""``crosscurv`` command line: one sub-command per module in ``crosscurv.experiments.cli.commands``.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``;
modules are imported lazily, so ``crosscurv derive`` never imports torch. Bad input prints one line
``crosscurv: error: ...``; an internal error one line ``crosscurv: internal error: ...``
(``CROSSCURV_DEBUG=1`` shows tracebacks).

Exit codes, the same in every command (:data:`EXIT_CODES`):

- 0: success (the check passed, the verdict is positive, the run completed);
- 1: the check failed / the verdict is negative (``derive``, ``scaling``,
  ``validate-step``, ``validate-records``, ``report --check``);
- 2: bad input (one line ``crosscurv: error: ...``);
- 3: neither a pass nor a failure: a run diverged (``run``), a sweep has a run that diverged
  or failed (``sweep``), an order has no point in the asymptotic window (``scaling``);
- 70: internal error (one line ``crosscurv: internal error: ...``);
- 130: interrupted (Ctrl-C; ``--resume`` continues a run or sweep).

``OMP_WAIT_POLICY`` is set to ``PASSIVE`` (unless the user set it) before torch is imported:
spinning OpenMP threads make a shared machine look hung. Threads:
:mod:`crosscurv.experiments.cli.threads`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from crosscurv.theory.errors import InputError

__all__ = ["main", "COMMANDS", "EXIT_CODES", "EXIT_INTERNAL_ERROR"]

#: a bug in crosscurv itself (sysexits.h EX_SOFTWARE); never 1, which is a negative verdict
EXIT_INTERNAL_ERROR = 70

#: exit status -> meaning, the same for every command (``crosscurv --help`` prints it)
EXIT_CODES = {
    0: "success: the check passed, the verdict is positive, the run completed",
    1: "the check failed / the verdict is negative (derive, scaling, validate-step, "
       "validate-records, report --check)",
    2: "bad input: one line 'crosscurv: error: ...'",
    3: "a run diverged (run); a sweep has a run that diverged or failed (sweep); an order has no "
       "point in the asymptotic window, none is outside its tolerance (scaling)",
    EXIT_INTERNAL_ERROR: "internal error, a bug in crosscurv: one line 'crosscurv: internal "
                         "error: ...'",
    130: "interrupted",
}

#: sub-command name -> module under ``crosscurv.experiments.cli.commands``
COMMANDS = {
    "derive": "derive",
    "run": "run",
    "scaling": "scaling",
    "table": "table",
    "report": "report",
    "validate-step": "validate_step",
    "validate-records": "validate_records",
    "golden": "golden",
    "sweep": "sweep",
    "motivation": "motivation",
    "studies": "studies",
    "advise": "advise",
}

#: one-line summaries shown by ``crosscurv --help`` without importing modules
SUMMARIES = {
    "derive": "derive and verify the paper's expansions symbolically (SymPy)",
    "run": "run the controlled JC vs pattern-S protocol on a task",
    "scaling": "error-scaling study: observed orders of the remainders",
    "table": "render Table 1 from run directories",
    "report": "everything: derivations, scaling, the three studies, Table 1, figures",
    "validate-step": "tell which block scheme a user's step function performs",
    "validate-records": "compare a user's per-iteration records with the reference",
    "golden": "write framework-independent conformance cases",
    "sweep": "a grid of runs (tasks x presets x lrs x seeds x patterns) on Ray, aggregated",
    "motivation": "Figure 1: sequential vs simultaneous practical implementations, what they "
                  "compute",
    "studies": "Table 1 over seeds, the regime map and the thread comparison, from sweep folders",
    "advise": "which block scheme to use at budget K, predicted from one JC run",
}



class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2; the CLI adds "crosscurv: error: "
        words = self.prog.split()
        raise InputError(message if len(words) == 1 else f"{words[-1]}: {message}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    epilog = "exit codes (every command):\n" + "\n".join(f"  {code:>3}  {text}" for code,
                                                         text in EXIT_CODES.items())
    parser = _Parser(prog="crosscurv", description="Cross-curvature verification suite.",
                     epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, modname in COMMANDS.items():
        if name != only:  # summaries only: no import
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
            continue
        mod = importlib.import_module(f"crosscurv.experiments.cli.commands.{modname}")
        p = sub.add_parser(name, help=SUMMARIES[name], description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when torch is first imported
    from crosscurv.experiments.cli import threads
    # 1 intra-op thread unless the user chose (crosscurv.experiments.cli.threads)
    threads.choose_default()
    debug = bool(os.environ.get("CROSSCURV_DEBUG"))
    chosen = next((a for a in argv if a in COMMANDS), None)
    try:
        parser = build_parser(only=chosen)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return int(args._run(args) or 0)
    except InputError as exc:
        if debug:
            raise
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"crosscurv: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crosscurv: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co: stop quietly
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    # a bug in crosscurv itself: say so, in one line, with its own exit status
    except Exception as exc:
        if debug:
            raise
        text = str(exc).strip().splitlines()
        msg = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
        print(f"crosscurv: internal error: {msg} (CROSSCURV_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
