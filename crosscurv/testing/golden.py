"""The golden checks of :mod:`crosscurv.testing`: an implementation's records and one-step results
against the golden cases shipped with crosscurv, with or without torch.

Each check compares through the one comparison of ``crosscurv validate-records``
(:func:`crosscurv.experiments.conformance.golden_check.check_records` and ``check_one_step``), so a
failure shows its verdict: the first disagreement, the table of columns and, on a plain case, the
formula-level diagnosis (e.g. "reproduced by an implementation in which the estimates leave out the
quadratic term").

* ``golden_records``: per-iteration records ``k = 1..K`` of every golden case (``quadratic``,
  ``quartic``, ``tiny_mlp``, ``lora_bilinear`` x JC, GS, partial); the paper's columns ``k, loss_jc,
  loss_s, gap, recursive, cumulative`` are required, crosscurv's other columns compared where
  given. From the implementation's ``records`` (plain data, **no torch**), else from its
  ``protocol`` run on crosscurv's tasks (torch).
* ``golden_one_step``: the one-step quantities at ``theta^0`` (``c_ij``, ``C_S``, the ``eta^2`` and
  ``eta^3`` estimates, one-step losses and parameters; any subset) against the case's
  ``one_step.json``. From the implementation's ``one_step`` (plain data, **no torch**), else from
  its ``step`` and ``cross_curvature`` on crosscurv's tasks (torch: ``loss_jc_1``, ``loss_s_1``,
  ``gap_1``, and with ``cross_curvature`` also ``C_S`` and ``eta2_estimate``).

The torch-free functions take the case as plain data, ``case.json`` read as a dict
(:func:`golden_case`: ``params``, ``data``, ``blocks``, ``patterns.<label>.pairs`` 1-based, ``lr``,
``iters``; the golden README defines them). Instead of a function an implementation may give a
folder: ``<folder>/<case>/<label>/records.csv`` and ``<folder>/<case>/one_step.json``. A case for
which the function returns ``None`` (or the folder has no file) is not covered: the check warns and
compares the others; covering none fails.
"""

from __future__ import annotations

import json
import os
import warnings

__all__ = ["GOLDEN_CASES", "GOLDEN_LABELS", "golden_dir", "set_golden_dir", "golden_case",
           "check_golden_records", "check_golden_one_step"]

#: The golden cases of the paper's protocol (plain block-gradient steps) and their patterns.
GOLDEN_CASES = ("quadratic", "quartic", "tiny_mlp", "lora_bilinear")
GOLDEN_LABELS = ("jc", "gs", "partial")

_GOLDEN = {"dir": None}


def set_golden_dir(path: str | None) -> None:
    """Use the golden folder ``path`` (from ``crosscurv golden --out``; ``None``: the shipped
    one)."""
    _GOLDEN["dir"] = os.fspath(path) if path is not None else None


def golden_dir() -> str:
    """The golden folder the checks read: the one set by :func:`set_golden_dir` (the plugin's
    ``--crosscurv-golden DIR``), else the cases shipped with crosscurv
    (:data:`crosscurv.experiments.conformance.golden_data.GOLDEN_DIR`)."""
    if _GOLDEN["dir"] is not None:
        return _GOLDEN["dir"]
    from crosscurv.experiments.conformance.golden_data import GOLDEN_DIR

    return GOLDEN_DIR


def golden_case(name: str) -> dict:
    """The golden case ``name`` as plain data: its ``case.json`` read as a dict."""
    with open(os.path.join(golden_dir(), name, "case.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _fail(head: str, failures: list) -> None:
    __tracebackhide__ = True
    if failures:
        raise AssertionError(head + "\n\n" + "\n\n".join(failures))


def _provided(impl, what: str, case: dict, *rest):
    """What ``impl.<what>`` gives for ``case`` (and label): a function's result, or the file of a
    folder (``records.csv`` / ``one_step.json``); ``None`` when not covered."""
    source = getattr(impl, what)
    if callable(source):
        return source(case, *rest)
    path = os.path.join(os.fspath(source), case["name"], *rest)
    path = os.path.join(path, "records.csv" if what == "records" else "one_step.json")
    return path if os.path.exists(path) else None


def _uncovered(impl, what: str, missing: list, n: int) -> None:
    __tracebackhide__ = True
    if len(missing) == n:
        raise AssertionError(
            f"{impl.name}.{what} covers none of the {n} golden cases "
            f"({', '.join(missing[:3])}...): it returned None or the folder has no file"
        )
    if missing:
        warnings.warn(
            f"{impl.name}.{what} does not cover {len(missing)} of {n} golden cases: "
            + ", ".join(missing),
            stacklevel=2,
        )


def _protocol_records(impl, name: str, label: str, cache: dict):
    """``impl.protocol`` on crosscurv's task of the case (torch)."""
    from crosscurv.experiments.conformance.golden import load_case
    from crosscurv.theory.patterns import as_pattern

    if name not in cache:
        cache[name] = load_case(os.path.join(golden_dir(), name))
    case, task = cache[name]
    pattern = as_pattern(case.patterns[label], task.n_blocks, task.block_names)
    return impl.protocol(task, pattern, case.lr, case.iters)


def check_golden_records(impl) -> None:
    """Their records on every golden case agree with crosscurv's (``validate-records``)."""
    __tracebackhide__ = True
    from crosscurv.experiments.conformance.golden_check import assert_records_match
    from crosscurv.theory.errors import InputError

    what = "records" if impl.records is not None else "protocol"
    failures, missing, tasks, n = [], [], {}, 0
    for name in GOLDEN_CASES:
        case = golden_case(name)
        for label in GOLDEN_LABELS:
            n += 1
            if what == "records":
                theirs = _provided(impl, "records", case, label)
            else:
                theirs = _protocol_records(impl, name, label, tasks)
            if theirs is None:
                missing.append(f"{name}/{label}")
                continue
            reference = os.path.join(golden_dir(), name, label)
            head = (
                f"golden {name}/{label} (S = {case['patterns'][label]['spec']}, "
                f"lr = {case['lr']:g}, K = {case['iters']}, reference {reference}):"
            )
            try:
                assert_records_match(theirs, reference)
            except (AssertionError, InputError) as exc:
                failures.append(f"{head}\n{exc}")
    _uncovered(impl, what, missing, n)
    _fail(
        f"{impl.name}.{what} disagrees with crosscurv's records on {len(failures)} of "
        f"{n - len(missing)} golden cases:",
        failures,
    )


def _torch_one_step(impl, name: str) -> dict:
    """One-step results of ``impl.step`` (and ``impl.cross_curvature``) on the case's task."""
    from crosscurv.experiments.conformance.golden import load_case
    from crosscurv.numeric.validation import check_step_output
    from crosscurv.theory.patterns import as_pattern, jacobi

    case, task = load_case(os.path.join(golden_dir(), name))

    def loss_after(pattern):
        params = {n: v.detach().clone() for n, v in task.params.items()}
        out = impl.step(task, params, pattern, case.lr)
        out = check_step_output(out, task.params, case.lr, where=f"{impl.name}.step")
        return float(task.loss(out))

    loss_jc = loss_after(jacobi(task.n_blocks))
    patterns = {}
    for label in GOLDEN_LABELS:
        S = as_pattern(case.patterns[label], task.n_blocks, task.block_names)
        loss_s = loss_after(S)
        patterns[label] = {"loss_s_1": loss_s, "gap_1": loss_s - loss_jc}
        if impl.cross_curvature is not None:
            C = float(impl.cross_curvature(task, task.params, S))
            patterns[label].update(C_S=C, eta2_estimate=case.lr**2 * C)
    return {"loss_jc_1": loss_jc, "patterns": patterns}


def check_golden_one_step(impl) -> None:
    """Their one-step quantities on every golden case agree with its ``one_step.json``."""
    __tracebackhide__ = True
    from crosscurv.experiments.conformance.golden_check import assert_one_step_match
    from crosscurv.theory.errors import InputError

    what = "one_step" if impl.one_step is not None else "step"
    failures, missing = [], []
    for name in GOLDEN_CASES:
        if what == "one_step":
            theirs = _provided(impl, "one_step", golden_case(name))
        else:
            theirs = _torch_one_step(impl, name)
        if theirs is None:
            missing.append(name)
            continue
        head = f"golden {name} ({os.path.join(golden_dir(), name, 'one_step.json')}):"
        try:
            assert_one_step_match(theirs, os.path.join(golden_dir(), name))
        except (AssertionError, InputError) as exc:
            failures.append(f"{head}\n{exc}")
    _uncovered(impl, what, missing, len(GOLDEN_CASES))
    _fail(
        f"{impl.name}.{what}: one-step quantities disagree with the golden cases on "
        f"{len(failures)} of {len(GOLDEN_CASES) - len(missing)}:",
        failures,
    )
