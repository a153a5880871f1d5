"""A trajectory run's settings: the options shared by
:func:`crosscurv.numeric.protocol.run_protocol` and :func:`crosscurv.numeric.advice.advise`, the
settings dict a run records, and the comparison that decides whether a run folder may be resumed
with the settings asked for now.

A run records its settings (JSON-able) in its checkpoint and summary; resuming compares the saved
settings with those asked for, key by key, except the *volatile* ones (``iters``, which may grow:
the run is extended; ``checkpoint_every``; ``offload``), and refuses in one line
(:class:`SettingsChangedError`) at the first that differs, or when ``iters`` would shrink.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Callable

import torch

from crosscurv.theory.errors import SettingsChangedError

__all__ = [
    "RunOptions",
    "SettingsChangedError",
    "jsonable",
    "theta_digest",
    "run_settings",
    "first_difference",
    "check_resume_settings",
    "VOLATILE",
]

#: Settings that may change between a run and its resumption (``iters`` may grow: checked apart).
VOLATILE = ("checkpoint_every", "offload", "iters")
#: The optimizer settings of a run made before runs recorded them (plain steps).
_PLAIN_OPTIMIZER = {"optimizer": {"name": "sgd", "spec": "sgd"}, "block_lr": {}}


@dataclass
class RunOptions:
    """The options of a trajectory run, shared by ``run_protocol`` and ``advise`` (every one may
    also be passed to them as a keyword of the same name).

    Attributes:
        out_dir: run folder (``None``: in memory only); ``resume``: continue (or extend) it.
        hvp_method: ``"auto"``, ``"reverse"``, ``"forward"`` or ``"rof"``
            (:func:`crosscurv.numeric.engine.choose_engine`).
        seed: seed of the power-iteration start vector (recorded).
        settings: extra JSON-able settings, recorded and checked on resume.
        checkpoint_every: iterations between checkpoints (``None``: by elapsed time,
            :data:`crosscurv.numeric.trajectory.folder.CHECKPOINT_SECONDS`).
        progress: ``progress(k, K)`` after each iteration's record.
        on_record: ``on_record(record)`` after each record is written (an exception interrupts).
        optimizer, block_lr: the JC (and ``S``) run's optimizer and per-block step factors
            (:func:`crosscurv.numeric.optimizers.optimizer_setup`; ``None``: the paper's plain
            steps).
    """

    out_dir: str | None = None
    resume: bool = False
    hvp_method: str = "auto"
    seed: int = 0
    settings: Mapping | None = None
    checkpoint_every: int | None = None
    progress: Callable[[int, int], None] | None = None
    on_record: Callable[[dict], None] | None = None
    optimizer: str | None = None
    block_lr: str | Mapping | None = None

    @classmethod
    def of(cls, options: "RunOptions | None", keywords: Mapping, where: str) -> "RunOptions":
        """``options`` (default all defaults) with ``keywords`` applied; a ``TypeError`` naming
        ``where`` for a keyword that is no option."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
        base = options if options is not None else cls()
        return cls(**{**{n: getattr(base, n) for n in names}, **keywords})


def jsonable(obj):
    """``obj`` normalised through a JSON round trip (non-JSON values become strings)."""
    return json.loads(json.dumps(obj, default=str))


def theta_digest(params: Mapping) -> str:
    """SHA-256 of the parameters' names, shapes and bytes: ``theta0_sha256`` in a run's summary."""
    h = hashlib.sha256()
    for k, v in params.items():
        h.update(k.encode())
        h.update(str(tuple(v.shape)).encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run_settings(
    task,
    lr: float,
    iters: int,
    seed,
    hvp_method: str,
    extra: Mapping | None,
    what: Mapping,
    tail: Mapping = {},
) -> dict:
    """The settings dict of a run: ``extra`` first, then the task's identity, ``what`` the run
    compares (its pattern or candidates), the step size and budget, dtype, device, seed, HVP method,
    ``tail`` and the digest of ``theta^0`` (JSON-able; keys in this order)."""
    s = dict(jsonable(extra or {}))
    s.update(
        task=s.get("task", task.name),
        task_info=jsonable(task.info),
        blocks=dict(zip(task.block_names, task.block_sizes())),
        n_params=task.num_params(),
        **what,
        lr=lr,
        iters=iters,
        dtype=str(task.dtype).replace("torch.", ""),
        device=str(task.device),
        seed=seed,
        hvp=hvp_method,
        **tail,
        theta0_sha256=theta_digest(task.params),
    )
    return jsonable(s)


def with_threads(settings: dict) -> dict:
    """``settings`` with ``threads`` (the caller's, else the intra-op count in use)."""
    settings.setdefault("threads", torch.get_num_threads())
    return settings


def first_difference(saved: Mapping, now: Mapping) -> str | None:
    """The first setting (sorted by name) other than :data:`VOLATILE` whose saved and current values
    differ, as ``"KEY differs (checkpoint A, now B)"`` (values cut to 60 characters), else
    ``None``."""
    # runs from before the optimizer settings took plain steps (and advise's plain settings)
    saved, now = {**_PLAIN_OPTIMIZER, **saved}, {**_PLAIN_OPTIMIZER, **now}
    for key in sorted(set(saved) | set(now)):
        if key in VOLATILE or (key == "threads" and key not in saved):  # older API runs lack it
            continue
        if saved.get(key) != now.get(key):
            a, b = json.dumps(saved.get(key)), json.dumps(now.get(key))
            if len(a) > 60:
                a = a[:57] + "..."
            if len(b) > 60:
                b = b[:57] + "..."
            return f"{key} differs (checkpoint {a}, now {b})"
    return None


def check_resume_settings(saved: Mapping, now: Mapping, path: str) -> None:
    """:class:`SettingsChangedError` unless the run in ``path`` (``saved``) may continue with
    ``now``: no setting but the volatile ones differs and ``iters`` does not shrink."""
    diff = first_difference(saved, now)
    if diff is not None:
        raise SettingsChangedError(f"cannot resume {path}: setting {diff}")
    planned = saved.get("iters")
    if isinstance(planned, int) and now["iters"] < planned:
        raise SettingsChangedError(
            f"cannot resume {path} with {now['iters']} iterations: the run was "
            f"set to {planned} (a run can be extended, not shortened)"
        )
