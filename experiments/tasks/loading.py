"""Resolve the ``TASK`` argument of ``crosscurv run`` to a :class:`crosscurv.numeric.Task`.

``TASK`` is a built-in task name (:mod:`crosscurv.experiments.tasks`), ``module:factory`` (the
current directory searched first) or ``path/to/file.py:factory`` (its folder first on ``sys.path``
while it loads and runs). A factory is called with the keyword arguments it declares among
``device``, ``dtype``, ``seed``, ``preset``, ``data_path``, ``model_path`` (settings left ``None``
are not passed to a parameter with a default) and returns a Task or ``(task, settings)``. Every
failure is a one-line :class:`crosscurv.numeric.TaskError`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any

import torch

from crosscurv.numeric.task import Task, TaskError

__all__ = ["is_builtin", "load_task", "resolve_factory", "FACTORY_KWARGS"]

#: Keyword arguments a user factory may declare.
FACTORY_KWARGS = ("device", "dtype", "seed", "preset", "data_path", "model_path")


def is_builtin(spec: str) -> bool:
    return ":" not in spec


def _split(spec: str) -> tuple[str, str]:
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise TaskError(f"bad task {spec!r}: use a built-in name, module:factory or "
                        "path/to/file.py:factory")
    return where, attr


@contextlib.contextmanager
def _first_on_path(folder: str | None):
    """``folder`` first on ``sys.path`` for the duration of the block (``None``: no change)."""
    if folder is None or (sys.path and sys.path[0] == folder):
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def _is_file(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or "/" in where


def search_folder(spec: str) -> str | None:
    """The folder a user task ``spec`` imports its neighbours from: a file's own folder for
    ``path/to/file.py:factory``, the current directory for ``module:factory``, ``None`` for a
    built-in name."""
    if is_builtin(spec):
        return None
    where = spec.rpartition(":")[0]
    return os.path.dirname(os.path.abspath(where)) if _is_file(where) else os.getcwd()


def _import_file(path: str):
    """Import a Python file; its folder is first on ``sys.path`` while it loads, so it can import
    its neighbours."""
    if not os.path.isfile(path):
        raise TaskError(f"task file {path!r} does not exist")
    name = "crosscurv_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    try:
        with _first_on_path(os.path.dirname(os.path.abspath(path))):
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError("not a Python source file")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as exc:
        raise TaskError(
            f"cannot import {path!r}: {type(exc).__name__}: {_first_line(exc)}") from None
    return module


def _import_module(name: str):
    try:
        with _first_on_path(None if os.getcwd() in sys.path else os.getcwd()):
            return importlib.import_module(name)
    except Exception as exc:
        raise TaskError(
            f"cannot import module {name!r}: {type(exc).__name__}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def resolve_factory(spec: str):
    """The callable named by ``module:factory`` or ``path/to/file.py:factory``.

    Raises:
        TaskError: one line, when the spec is malformed, the module cannot be
            imported, or the attribute is missing or not callable.
    """
    where, attr = _split(spec)
    module = _import_file(where) if _is_file(where) else _import_module(where)
    if not hasattr(module, attr):
        raise TaskError(f"{where!r} has no attribute {attr!r}")
    factory = getattr(module, attr)
    if not callable(factory):
        raise TaskError(f"{spec}: {attr!r} is not callable (a {type(factory).__name__})")
    return factory


def call_factory(factory, spec: str, offered: dict):
    """Call ``factory`` with the keyword arguments of ``offered`` it declares (one-line errors).

    A ``None`` in ``offered`` (a setting the user left open) is passed only to a parameter declared
    without a default; otherwise the factory's own default stands. The folder of ``spec``
    (:func:`search_folder`) is first on ``sys.path`` while the factory runs."""
    try:
        sig = inspect.signature(factory)
        params = sig.parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            kwargs = {k: v for k, v in offered.items() if v is not None}
        else:
            kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            named = {p.name: p for p in params if p.kind in kinds}
            kwargs = {k: v for k, v in offered.items() if k in named
                      and (v is not None or named[k].default is inspect.Parameter.empty)}
    except (TypeError, ValueError):  # builtins without a signature
        kwargs = {}
    try:
        with _first_on_path(search_folder(spec)):
            return factory(**kwargs)
    except Exception as exc:
        raise TaskError(
            f"task factory {spec} raised {type(exc).__name__}: {_first_line(exc)}") from None


def load_task(
    spec: str,
    preset: str | None = None,
    *,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    seed: int = 0,
    data_path: str | None = None,
    model_path: str | None = None,
) -> tuple[Task, dict]:
    """Build the task named by ``spec`` and check its loss once.

    Args:
        spec: built-in name, ``module:factory`` or ``path/to/file.py:factory``.
        preset: built-in preset (``"default"`` when ``None``); passed to a
            user factory that declares ``preset``.
        device, dtype: wanted placement.  ``None`` means the default: for
            built-ins CUDA when available and float32; for user tasks,
            whatever the factory produced.  A user task is moved with
            :meth:`crosscurv.numeric.Task.to` when an explicit value differs from it.
        seed, data_path, model_path: passed on (see module docstring).

    Returns:
        ``(task, settings)``: ``settings`` holds ``task`` (the spec), the
        preset's or factory's settings (``lr``, ``iters``, ``pattern`` when
        they set them) and ``factory`` for user tasks.

    Raises:
        TaskError, crosscurv.numeric.TaskError, crosscurv.experiments.tasks.UnknownTaskError,
        crosscurv.experiments.tasks.errors.DataError: one line each.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise TaskError("empty task name")
    spec = spec.strip()
    if is_builtin(spec):
        from crosscurv.experiments.tasks import TASKS, build_task

        if spec not in TASKS:
            raise TaskError(
                f"unknown task {spec!r} (built-in tasks: {', '.join(TASKS)}; "
                "or module:factory, path/to/file.py:factory)"
            )
        from crosscurv.numeric.device import resolve_device

        task, settings = build_task(
            spec,
            preset or "default",
            device=device if device is not None else resolve_device("auto"),
            dtype=dtype if dtype is not None else torch.float32,
            seed=seed,
            data_path=data_path,
            model_path=model_path,
        )
        settings = dict(settings)
        settings["task"] = spec
    else:
        factory = resolve_factory(spec)
        offered = {
            "device": device,
            "dtype": dtype,
            "seed": seed,
            "preset": preset,
            "data_path": data_path,
            "model_path": model_path,
        }
        result: Any = call_factory(factory, spec, offered)
        extra: dict = {}
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            result, extra = result
        if not isinstance(result, Task):
            raise TaskError(
                f"task factory {spec} returned {type(result).__name__}, expected a "
                f"crosscurv.numeric.Task (or a (Task, settings dict) pair)"
            )
        task = result
        if (device is not None and task.device != device) or (dtype is not None and task.dtype
                                                              != dtype):
            task = task.to(device=device, dtype=dtype)
        settings = {**extra, "task": spec, "factory": spec, "preset": preset}
    with _first_on_path(search_folder(spec)):
        task.check_loss()
    return task, settings
