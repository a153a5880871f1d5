"""One protocol run: what it is (:class:`RunDescription`) and the one way to perform it
(:func:`run`).

A :class:`RunDescription` holds every setting of a ``crosscurv run`` that decides its records, each
checked once when it is made (:data:`CHECKS`; a bad value raises :class:`RunDescriptionError`). It
comes from the command's arguments, a ``summary.json`` (:meth:`RunDescription.from_summary`) or a
caller, and goes back to arguments with :meth:`RunDescription.to_args`. :func:`run` loads the task,
fills what the description leaves open, sets the thread count and calls
:func:`crosscurv.numeric.protocol.run_protocol`; ``run``, ``report``, the sweep workers, ``report
--check`` and the optimizer studies all go through it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from ..theory.errors import InputError, RunDescriptionError

__all__ = ["RunDescription", "RunDescriptionError", "check_setting", "DEFAULT_OUT",
           "DEFAULT_THREADS", "Progress", "load", "run", "run_folder_name", "slug", "auto_threads"]

#: Intra-op threads of a run when nothing else decides (the command line's default,
#: :mod:`crosscurv.experiments.cli.threads`; the sweeps' default).
from ..numeric.threads import DEFAULT_THREADS  # noqa: E402

#: ``out`` of :func:`run` meaning "the default run folder ``runs/<task>-<pattern>[-<optimizer>]``".
DEFAULT_OUT = object()

DTYPES = ("float32", "float64")
HVP = ("auto", "forward", "reverse")
OFFLOAD = ("auto", "on", "off")


def _count(what: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunDescriptionError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _threads(value) -> int | str | None:
    from .thread_count import AUTO

    if value is None or value == AUTO:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunDescriptionError(f"threads must be an integer >= 1 or {AUTO}, got {value!r}")
    return value


def _text(what: str, value, choices=None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RunDescriptionError(f"{what} must be a non-empty string, got {value!r}")
    if choices is not None and value not in choices:
        raise RunDescriptionError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _lr(value):
    from ..numeric.protocol_checks import check_lr

    if value is None:
        return None
    if isinstance(value, (bool, str)):
        raise RunDescriptionError(f"learning rate must be a finite number > 0, got {value!r}")
    return check_lr(value)


def _iters(value):
    from ..numeric.protocol_checks import check_iters

    return None if value is None else check_iters(value)


def _seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunDescriptionError(f"seed must be an integer, got {value!r}")
    return value


def _preset(value):
    from .tasks import PRESETS

    return _text("preset", value, PRESETS)


def _optimizer(value) -> str:
    from ..numeric.optimizers import parse_optimizer

    _text("optimizer", value)
    parse_optimizer(value)
    return value


def _block_lr(value):
    if value is not None and not isinstance(value, str):
        raise RunDescriptionError(f"block_lr must be text NAME=FACTOR,..., got {value!r}")
    return value


#: the one check of each setting: ``setting -> check(value) -> value`` (raises a one-line
#: InputError)
CHECKS = {
    "task": lambda v: _text("task", v),
    "preset": _preset,
    "pattern": lambda v: _text("pattern", v),
    "lr": _lr,
    "iters": _iters,
    "seed": _seed,
    "dtype": lambda v: _text("dtype", v, DTYPES),
    "device": lambda v: _text("device", v),
    "data": lambda v: _text("data", v),
    "model": lambda v: _text("model", v),
    "threads": _threads,
    "hvp": lambda v: _text("hvp", v, HVP),
    "hvp_chunk": lambda v: _count("HVP chunk size", v),
    "offload": lambda v: _text("offload", v, OFFLOAD),
    "optimizer": _optimizer,
    "block_lr": _block_lr,
    "checkpoint_every": lambda v: _count("checkpoint interval", v),
}


def check_setting(name: str, value):
    """``value`` of the setting ``name`` (a :class:`RunDescription` field) checked (the learning
    rate as a float); the one-line error of :class:`RunDescription` otherwise."""
    return CHECKS[name](value)


@dataclass(frozen=True)
class RunDescription:
    """Every setting of one ``crosscurv run`` that decides its records.

    Attributes (the ``crosscurv run`` flag in brackets; ``None``: the task's or preset's own value):
        task: built-in name (``mlp``, ``fl``, ``lora``), ``module:factory`` or
        ``path/to/file.py:factory`` [TASK]. preset: ``smoke``, ``default`` or ``paper``
        [``--preset``]. pattern: delay pattern in :func:`crosscurv.theory.patterns.parse_pattern`
        syntax [``--pattern``]. lr: constant learning rate ``eta > 0`` [``--lr``]. iters: iterations
        ``K >= 1`` [``--iters``]. seed: initialisation, data subset and power-iteration seed
        [``--seed``]. dtype: ``float32`` or ``float64`` [``--dtype``]. device: ``auto``, ``cpu``,
        ``cuda`` or ``cuda:N`` [``--device``]. data, model: local data folder and model weights of a
        built-in task [``--data``, ``--model``]. threads: intra-op threads (``None``: the calling
        process's count; ``"auto"``: the count that computes
            the task's gradient fastest, measured when the run starts,
            :mod:`crosscurv.experiments.thread_count`) [``--threads``].
        hvp: Hessian-vector products, ``auto``, ``forward`` or ``reverse`` [``--hvp``]. hvp_chunk:
        at most this many forward-over-reverse products per batch [``--hvp-chunk``]. offload:
        ``auto``, ``on`` or ``off`` [``--offload``]. optimizer: ``sgd``, ``momentum:BETA`` or
        ``adam[:B1,B2,EPS]`` [``--optimizer``]. block_lr: ``NAME=FACTOR,...`` per-block step sizes
        [``--block-lr``]. checkpoint_every: records between checkpoints [``--checkpoint-every``].

    Raises:
        RunDescriptionError, crosscurv.numeric.protocol.ProtocolError,
        crosscurv.numeric.optimizers.OptimizerError: a setting out of its range (one line).
    """

    task: str
    preset: str | None = None
    pattern: str | None = None
    lr: float | None = None
    iters: int | None = None
    seed: int = 0
    dtype: str | None = None
    device: str | None = None
    data: str | None = None
    model: str | None = None
    threads: int | str | None = None
    hvp: str = "auto"
    hvp_chunk: int | None = None
    offload: str = "auto"
    optimizer: str = "sgd"
    block_lr: str | None = None
    checkpoint_every: int | None = None

    def __post_init__(self):
        if self.task is None:
            raise RunDescriptionError("a run needs a task")
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, check_setting(f.name, getattr(self, f.name)))

    # -- to the command line ------------------------------------------------------------------
    def to_args(self) -> list[str]:
        """``crosscurv run`` arguments (without ``run``, ``--out``, ``--resume``) that give this
        description."""
        out = [self.task]
        for f in dataclasses.fields(self):
            if f.name == "task":
                continue
            value = getattr(self, f.name)
            if value is None or value == f.default:
                continue
            flag = "--" + f.name.replace("_", "-")
            out += [flag, repr(value) if isinstance(value, float) else str(value)]
        return out

    # -- from a run folder ---------------------------------------------------------------------
    @classmethod
    def from_summary(cls, summary: str | os.PathLike | Mapping) -> "RunDescription":
        """The description of a finished (or interrupted) run: its ``summary.json`` (a path, a run
        folder or the parsed object). Settings the summary does not record take their defaults
        (plain ``sgd``).

        Raises:
            RunDescriptionError: a summary without a settings object or without task, learning rate,
            pattern, dtype or seed; a setting out of its range (named with the file).
        """
        where = "summary"
        if not isinstance(summary, Mapping):
            from ..numeric.records import SUMMARY_FILE, read_summary

            path = os.fspath(summary)
            if os.path.isdir(path):
                path = os.path.join(path, SUMMARY_FILE)
            where = f"summary {path}"
            summary = read_summary(path)
        settings = summary.get("settings") if isinstance(summary, Mapping) else None
        if not isinstance(settings, Mapping):
            raise RunDescriptionError(
                f"{where} has no settings object: not a crosscurv run summary")
        missing = [k for k in ("task", "lr", "dtype", "seed") if k not in settings]
        if "pattern_spec" not in settings and "pattern" not in settings:
            missing.append("pattern")
        if missing:
            raise RunDescriptionError(f"{where}: settings lack {', '.join(missing)}")
        pattern = settings.get("pattern_spec")
        if pattern is None:
            recorded = settings["pattern"]
            pattern = (recorded if isinstance(recorded, str)
                       else ",".join(f"{i}<-{j}" for i, j in (recorded or {}).get("pairs", []))
                       or "jc")
        optimizer = settings.get("optimizer") or "sgd"
        if isinstance(optimizer, Mapping):
            optimizer = optimizer.get("spec", "sgd")
        block_lr = settings.get("block_lr") or None
        if isinstance(block_lr, Mapping):
            block_lr = ",".join(f"{b}={float(f)!r}" for b, f in block_lr.items())
        offload = settings.get("offload")
        lr = settings["lr"]
        try:
            return cls(
                task=settings["task"], preset=settings.get("preset"), pattern=str(pattern),
                lr=float(lr) if isinstance(lr, int) and not isinstance(lr, bool) else lr,
                iters=settings.get("iters"), seed=settings["seed"], dtype=settings["dtype"],
                device=settings.get("device"), data=settings.get("data_path"), model=settings.get(
                "model_path"),
                threads=settings.get("threads"), hvp=settings.get("hvp") or "auto",
                hvp_chunk=settings.get("hvp_chunk_size"),
                offload="auto" if offload is None else ("on" if offload else "off"),
                optimizer=optimizer, block_lr=block_lr, checkpoint_every=settings.get(
                "checkpoint_every"),
            )
        except InputError as exc:
            raise RunDescriptionError(f"{where}: {exc}") from None

    def replace(self, **changes) -> "RunDescription":
        """A copy with ``changes`` (checked like any description)."""
        return dataclasses.replace(self, **changes)


# -- performing a run ----------------------------------------------------------------------------
def slug(text: str) -> str:
    """``text`` as one folder-name component (runs of other characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


def run_folder_name(task, pattern, setup) -> str:
    """The default run folder ``runs/<task>-<pattern>[-<optimizer>]`` (``crosscurv run`` without
    ``--out``)."""
    return f"runs/{slug(task.name)}-{slug(pattern.name)}" + ("" if setup.plain else "-" + slug(
        setup.describe()))


class Progress:
    """``progress(k, K)`` of a run: a tqdm bar on a terminal, otherwise a line every ~10% of ``K``
    on
    ``file`` (default standard error).  Made without ``total`` and ``label``, it takes them from
    :func:`run` once the task is loaded (:meth:`start`)."""

    def __init__(self, total: int | None = None, label: str | None = None, file=None):
        self.file = file if file is not None else sys.stderr
        self.total = self.label = self.bar = self.start_k = None
        if total is not None:
            self.start(total, label or "")

    def start(self, total: int, label: str) -> None:
        """Display ``K = total`` records of the run ``label`` (once; later calls change nothing)."""
        if self.total is not None:
            return
        self.total, self.label = int(total), label
        self.t0 = time.perf_counter()
        self.step = max(1, self.total // 10)
        if getattr(self.file, "isatty", lambda: False)():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=self.total, desc=label, unit="it", file=self.file)
            except Exception:  # tqdm missing or broken: plain lines
                self.bar = None

    def __call__(self, k: int, total: int) -> None:
        if self.total is None:
            self.start(total, "run")
        # first record of this session (k - 1 records came before, e.g. on resume)
        if self.start_k is None:
            self.start_k = k - 1
        if self.bar is not None:
            if total != self.bar.total:  # a run whose count of steps the caller extends
                self.bar.total = total
            self.bar.update(k - self.bar.n)
            return
        if k % self.step == 0 or k == total:
            el = time.perf_counter() - self.t0
            rate = (k - self.start_k) / el if el > 0 else float("nan")
            print(f"crosscurv: {self.label}: k={k}/{total} ({100 * k // total}%), {rate:.2f} it/s",
                  file=self.file, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def load(description: RunDescription):
    """``(task, settings, lr, iters)``: the task of ``description`` built, the settings its summary
    records (the preset's or factory's, with ``preset``), and the learning rate and ``K`` (the
    description's, else the task's).

    Raises:
        crosscurv.theory.errors.InputError: the task cannot be built, or sets no learning rate or
        ``K`` that the description leaves open.
    """
    from ..numeric.device import resolve_device, resolve_dtype
    from ..numeric.protocol import ProtocolError
    from .tasks.loading import is_builtin, load_task

    d = description
    device = resolve_device(d.device) if d.device is not None else None
    dtype = resolve_dtype(d.dtype) if d.dtype is not None else None
    task, settings = load_task(d.task, d.preset, device=device, dtype=dtype, seed=d.seed,
                               data_path=d.data, model_path=d.model)
    if d.preset is None and is_builtin(d.task):
        settings["preset"] = settings.get("preset", "default")
    lr = d.lr if d.lr is not None else settings.get("lr")
    iters = d.iters if d.iters is not None else settings.get("iters")
    if lr is None:
        raise ProtocolError(f"task {d.task} sets no learning rate: pass --lr")
    if iters is None:
        raise ProtocolError(f"task {d.task} sets no number of iterations: pass --iters")
    return task, settings, lr, iters


def _saved_settings(out: str, names=("summary.json",)) -> dict:
    """The settings recorded in the run folder ``out``: those of the first file of ``names`` there
    that holds them (``{}`` where none does)."""
    for name in names:
        try:
            with open(os.path.join(out, name), encoding="utf-8") as fh:
                saved = json.load(fh).get("settings") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(saved, dict):
            return saved
    return {}


def _saved_threads_source(out: str, threads: int, source: str | None) -> str | None:
    """On resume: the reason the run was started with (same thread count), so that resuming compares
    equal settings; a run started before the reason was recorded records none."""
    saved = _saved_settings(out)
    if "threads" in saved and saved.get("threads") == threads:
        return saved.get("threads_source")
    return source


def auto_threads(task, out, resume: bool) -> tuple[int, dict]:
    """``--threads auto``: ``(count, {"count": seconds per gradient})`` measured on the task
    (:func:`crosscurv.experiments.thread_count.fastest_threads`), or, resuming the run folder
    ``out`` (of ``crosscurv run`` or ``crosscurv advise``), the count and seconds it recorded when
    it started with ``auto``."""
    from ..numeric.advice import ADVICE_FILE
    from .thread_count import fastest_threads

    # a crosscurv run keeps its settings in summary.json, a crosscurv advise run in advice.json
    saved = _saved_settings(out, ("summary.json",
                                  ADVICE_FILE)) if resume and out is not None else {}
    if isinstance(saved.get("threads_auto_seconds"), dict) and isinstance(saved.get("threads"),
                                                                          int):
        return saved["threads"], dict(saved["threads_auto_seconds"])
    n, seconds = fastest_threads(task.loss, task.params)
    return n, {str(k): v for k, v in seconds.items()}


def run(description: RunDescription, out=DEFAULT_OUT, *, resume: bool = False,
        progress: Callable[[int, int], None] | None = None, task=None, threads_source: str
        | None = None):
    """Perform the run ``description`` describes; returns ``(ProtocolResult, run folder)``.

    Args:
        description: the run. out: run folder (records, summary, checkpoint); :data:`DEFAULT_OUT`:
            ``runs/<task>-<pattern>`` (:func:`run_folder_name`); ``None``: records kept in memory
            only.
        resume: continue (or, with a larger ``iters``, extend) the run in ``out`` from its
            checkpoint. progress: ``progress(k, K)`` after each record; its ``start(K, label)``,
            where it has one (a :class:`Progress`), is called once the task is loaded.
        task: the task already built (``report --check`` rebuilds it from the recorded sizes);
            ``None``: built from the description (:func:`load`).
        threads_source: why the run computes with the current thread count, recorded as
            ``settings["threads_source"]`` (:mod:`crosscurv.experiments.cli.threads`); a description
            that sets ``threads`` records ``"--threads"``.  A resumed run keeps the reason it was
            started with.

    The thread count of the description holds for the run and is restored afterwards.

    Raises:
        crosscurv.theory.errors.InputError: bad input (a changed setting on resume:
        :class:`crosscurv.numeric.protocol.SettingsChangedError`; a folder that cannot be resumed,
        answered before torch is imported where ``out`` is given:
        :func:`crosscurv.numeric.run_folder.check_resumable`).
    """
    if resume and out is not None and out is not DEFAULT_OUT:
        from ..numeric.run_folder import check_resumable

        check_resumable(out)
    import torch

    from ..numeric.optimizers import optimizer_setup
    from ..numeric.protocol import run_protocol
    from ..theory.patterns import parse_pattern, spelling

    from .thread_count import AUTO, AUTO_SOURCE

    d = description
    before = torch.get_num_threads()
    if d.threads is not None and d.threads != AUTO:
        torch.set_num_threads(d.threads)
        threads_source = "--threads"
    try:
        if task is None:
            task, settings, lr, iters = load(d)
        else:
            settings, lr, iters = {"task": d.task}, d.lr, d.iters
        spec = d.pattern or settings.get("pattern") or task.default_pattern
        pattern = parse_pattern(str(spec), task.n_blocks, task.block_names)
        setup = optimizer_setup(task, d.optimizer, d.block_lr)
        if out is DEFAULT_OUT:
            out = run_folder_name(task, pattern, setup)
        auto_seconds = None
        if d.threads == AUTO:
            n, auto_seconds = auto_threads(task, out, resume)
            torch.set_num_threads(n)
            threads_source = AUTO_SOURCE
        if hasattr(progress, "start"):
            progress.start(int(iters), f"{task.name} {spelling(pattern, task.block_names)}")
        settings.update(
            lr=lr, iters=iters, pattern_spec=str(spec), seed=d.seed,
            dtype=str(task.dtype).replace("torch.", ""), device=str(task.device),
            data_path=d.data, model_path=d.model,
            # float32 reductions depend on it: a run resumed with another thread count is refused
            threads=torch.get_num_threads(),
        )
        if auto_seconds is not None:  # what --threads auto measured (seconds per gradient by count)
            settings["threads_auto_seconds"] = auto_seconds
        if resume and out is not None:
            threads_source = _saved_threads_source(out, settings["threads"], threads_source)
        if threads_source is not None:
            settings["threads_source"] = threads_source
        result = run_protocol(
            task, pattern, lr, iters, out_dir=out, resume=resume, hvp_method=d.hvp, seed=d.seed,
            settings=settings, checkpoint_every=d.checkpoint_every, chunk_size=d.hvp_chunk,
            progress=progress,
            offload={"auto": None, "on": True, "off": False}[d.offload], optimizer=setup.spec,
            block_lr=setup.named, threads=torch.get_num_threads(),
        )
    finally:
        torch.set_num_threads(before)
    return result, out
