"""``crosscurv`` command line: one sub-command per module in ``experiments.commands``.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``.  Modules are imported lazily, so ``crosscurv derive``
never imports torch.

Error contract: bad input (flags, patterns, tasks, files) prints one line
``crosscurv: error: ...`` on stderr and exits with code 2, never a traceback.
Set ``CROSSCURV_DEBUG=1`` to see tracebacks.

Threads: unless the user sets ``OMP_WAIT_POLICY``, the command line sets it to
``PASSIVE`` before torch is first imported.  OpenMP threads that spin while
they wait make a shared machine look hung: the ``fl`` smoke task with two
threads on two busy cores ran at 0.02 it/s with the default policy and
finished in 42 s with passive waiting (README, Performance).  And it computes
with one intra-op thread unless the user says otherwise (``--threads``,
``OMP_NUM_THREADS``): :mod:`experiments.threads`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from theory.errors import InputError

__all__ = ["CLIError", "main", "COMMANDS"]

#: sub-command name -> module under ``experiments.commands``
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
    "motivation": "Figure 1: sequential vs simultaneous practical implementations, what they compute",
    "studies": "Table 1 over seeds, the regime map and the thread comparison, from sweep folders",
}



class CLIError(InputError):
    """Bad user input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2; the CLI adds "crosscurv: error: "
        words = self.prog.split()
        raise CLIError(message if len(words) == 1 else f"{words[-1]}: {message}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="crosscurv", description="Cross-curvature verification suite.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, modname in COMMANDS.items():
        if name != only:  # summaries only: no import
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
            continue
        mod = importlib.import_module(f"experiments.commands.{modname}")
        p = sub.add_parser(name, help=SUMMARIES[name], description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when torch is first imported
    from experiments import threads

    threads.choose_default()  # 1 intra-op thread unless the user chose (experiments.threads)
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
    except Exception as exc:  # a bug in crosscurv itself: say so, briefly
        if debug:
            raise
        print(f"crosscurv: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("crosscurv: rerun with CROSSCURV_DEBUG=1 for the traceback", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
