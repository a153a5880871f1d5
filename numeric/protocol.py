"""The controlled protocol (paper, Section 5.1, "Controlled trajectories").

JC and pattern-``S`` trajectories start from the same ``theta^0`` (the task's
parameters) and take exact full-batch steps (:func:`crosscurv.numeric.steps.scheme_step`)
with a constant learning rate ``eta``, no momentum (the paper's setting; with
``optimizer`` / ``block_lr`` both runs use a block-separable optimizer from zero
state and the estimates are its generalizations, see :func:`run_protocol`).
Iteration ``k = 0..K`` is one body (:func:`_iteration`) over the per-point interface of
:mod:`crosscurv.numeric.point` (value, gradient, ``H v``, ``M_S v``):

* at ``theta_JC^k``: the loss, ``g_JC^k``, ``M_S(theta_JC^k) g_JC^k`` and the
  products ``H_JC^k [p_k, z_k, y_k, Delta^k]`` (power-iteration vector,
  cumulative state, JC-only state, trajectory difference);
* at ``theta_S^k``: the loss, ``g_S^k`` and ``u^k = M_S(theta_S^k) g_S^k``;

the converged extreme eigenpairs of ``H_JC^k`` (:func:`crosscurv.numeric.estimates.track_extremes`, warm-started
from the carried ``vmax``, ``vmin``); it writes the record of iteration ``k >= 1`` (:mod:`crosscurv.numeric.records`;
the estimates of :mod:`crosscurv.numeric.estimates`, their error estimates and certified winners of
:mod:`crosscurv.numeric.error_estimates`, measured from ``g_S^k - g_JC^k - H_JC^k Delta^k`` and the two steps'
remainders, no extra product), then steps both trajectories (the
scheme step reuses ``g_S^k`` for the blocks with an empty fresh set).  At
``k = K`` the products that only serve ``k + 1`` are skipped.  The HVP
``H_JC^k z_k`` serves both the quadratic term of the cumulative estimate at
``k`` and the propagation of ``z`` to ``k + 1``, so a run costs ``O(K)`` HVPs.

Engines (chosen once per run, recorded in the summary under ``"hvp"``):

* ``"graph"`` (:class:`crosscurv.numeric.point.PointCurvature`): the gradient is built
  once with ``create_graph=True`` and every product at that point is one
  backward pass through the retained graph; one graph is alive at a time;
* ``"batched"`` (:class:`crosscurv.numeric.point.BatchedPoint`): the gradient by one
  backward pass, the products at a point in one batched call of
  :func:`crosscurv.numeric.hvp.hvp_batch` (``chunk_size`` caps the batch).

``hvp_method`` ``"reverse"`` asks for the graph engine, ``"forward"`` /
``"rof"`` for the batched one with that method, and ``"auto"`` (default) has
the meaning it has everywhere (:func:`crosscurv.numeric.hvp.resolve_method`): double
backward when one product works at ``theta^0`` (the graph engine), else
forward-over-reverse (batched).  ``M_S v`` follows a
:class:`crosscurv.numeric.curvature.MaskedProductPlan` (one product per fresh block or
per fresh set, whichever needs fewer; recorded).

The carried vectors (``theta_JC``, ``theta_S``, ``z``, ``y``, the pending
recursive term ``w``, the power vector ``p``, the extreme eigenvectors ``vmax``, ``vmin``, ``M_S g_JC``,
and within an iteration ``g_JC^k`` and ``g_JC^k + H_JC^k Delta^k`` for the error estimates) always live in one
store (:mod:`crosscurv.numeric.offload`): resident, or parked off the compute device
between uses when the estimated footprint does not fit comfortably in the
available memory (:func:`crosscurv.numeric.offload.should_offload`) or when asked.

Run directory (``out_dir``): ``records.csv`` (one row per iteration, flushed
as it is written), ``summary.json`` (settings, status, metrics, timings) and
``checkpoint.pt``.  A checkpoint holds exactly what the next iteration needs
(the carried vectors, with an optimizer both runs' states and the estimates'
state differences, ``q``, the ``||u^j||`` history, ``G``, ``L``) and the
run's settings; it is written atomically at ``k = 0``, then on a cadence
(``checkpoint_every`` records, or by default when :data:`CHECKPOINT_SECONDS`
have passed and the last save cost less than 5% of the time since), and always
before the last iteration (so that the run can be *extended*), after which it
is marked done.  ``resume=True`` checks that the settings match
(:class:`ResumeError` names the first one that differs), truncates
``records.csv`` to the checkpoint's ``k`` and recomputes from there; ``iters``
may grow (the run is extended: its records are those of an uninterrupted run
to the new ``K``) but not shrink.  On the CPU the resumed records are bit for
bit those of an uninterrupted run.  Without ``resume`` an ``out_dir`` that
already holds a run is refused (partial output is never overwritten).

Divergence: a non-finite loss at iteration ``k`` stops the run with status
``"diverged"`` (every record ``1..k-1`` stays on disk); the CLI exits with
code 3.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Callable

import torch

from crosscurv.theory.errors import InputError
from crosscurv.theory.patterns import DelayPattern, jacobi, parse_pattern

from . import tree
from .curvature import MaskedProductPlan, masked_product_plan
from .gap import SegmentGap, plain_suffices, reconcile
from . import error_estimates as errs
from .estimates import (EstimateState, Extremes, init_power_vector, quadratic_from_linear,
                        recursive_estimate, track_extremes)
from .hvp import HVP_METHODS, resolve_method
from .metrics import run_metrics
from .offload import make_store, should_offload
from .optimizer_estimates import (TangentStep, factor_tree, forcing_norm, optimizer_bound, scaled_direction,
                                  state_difference)
from .optimizers import OptimizerSetup, OptimizerState, optimizer_scheme_step, optimizer_setup
from .point import BatchedPoint, PointCurvature
from .records import (
    CHECKPOINT_FILE,
    ESTIMATES,
    LEGACY_FIELDS,
    PREVIOUS_FIELDS,
    RECORDS_FILE,
    SUMMARY_FILE,
    RecordsError,
    RecordWriter,
    atomic_torch_save,
    count_rows,
    make_record,
    read_records,
    records_columns,
    truncate_records,
    write_summary,
)
from .steps import check_pattern, scheme_step
from .task import TaskError

__all__ = [
    "ProtocolError",
    "ResumeError",
    "SettingsChangedError",
    "ProtocolResult",
    "Engine",
    "choose_engine",
    "DIVERGED_EXIT_CODE",
    "CHECKPOINT_SECONDS",
    "run_protocol",
    "check_lr",
    "check_iters",
    "jsonable",
    "theta_digest",
    "crosscurv_version",
]

#: Exit code of ``crosscurv run`` for a diverged run.
DIVERGED_EXIT_CODE = 3
#: Default checkpoint cadence: at most one checkpoint per this many seconds (and one before the last iteration).
CHECKPOINT_SECONDS = 60.0
#: A checkpoint is also deferred while the time since the last one is under this many times what it cost.
_CHECKPOINT_COST_FACTOR = 20.0
#: Checkpoint format (1: the vectors inside "estimates"; read for resuming, not for extending).
_FORMAT = 2

#: Settings that may change between a run and its resumption (``iters`` may grow: checked apart).
_VOLATILE = ("checkpoint_every", "offload", "iters")
#: The carried vectors, in the order a checkpoint lists them.
_CARRIED = ("theta_j", "theta_s", "z", "y", "w", "p", "vmax", "vmin")
#: The optimizer settings of a run made before runs recorded them (plain steps).
_PLAIN_OPTIMIZER = {"optimizer": {"name": "sgd", "spec": "sgd"}, "block_lr": {}}
#: Carried optimizer-state groups (``GROUP.BUFFER``): the JC and S runs' states, the cumulative and JC-only
#: estimates' state differences; the JC and S states may lack a buffer (``None``: torch's initial state).
_STATE_GROUPS = ("sj", "ss", "zs", "ys")

CONSTANTS_NOTE = (
    "G and L are a-posteriori estimates, not certified constants: G is the running maximum of the "
    "gradient norms evaluated on both trajectories, L the running maximum of |p^T H_JC^k p| of a "
    "warm-started power iteration (one HVP per iteration); both can only underestimate the "
    "constants of Assumption 1, so bound_bk estimates Theorem 3's bound rather than guaranteeing it."
)


class ProtocolError(InputError):
    """Bad protocol input: learning rate, iterations, HVP method, or an output folder in use."""


class ResumeError(ProtocolError):
    """Nothing to resume, an unreadable run folder, or a checkpoint written with different settings."""


class SettingsChangedError(ResumeError):
    """The run folder holds a run with other settings (or more iterations than asked for)."""


@dataclass
class ProtocolResult:
    """Outcome of :func:`run_protocol`.

    Attributes:
        status: ``"complete"``, ``"diverged"`` or ``"interrupted"``.
        records: every record ``k = 1..`` (dicts, :data:`crosscurv.numeric.records.FIELDS`).
        summary: the summary dict (also written to ``summary.json``).
        message: one line describing the status.
        diverged_at: the iteration whose loss was not finite, else ``None``.
        out_dir: the run directory, or ``None`` for an in-memory run.
    """

    status: str
    records: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    message: str = ""
    diverged_at: int | None = None
    out_dir: str | None = None

    @property
    def exit_code(self) -> int:
        return DIVERGED_EXIT_CODE if self.status == "diverged" else 0


def crosscurv_version() -> str:
    try:
        from importlib.metadata import version

        return version("crosscurv")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


# -- input checks ----------------------------------------------------------------
def check_lr(lr) -> float:
    """``lr`` as a float; a :class:`ProtocolError` unless it is a finite number > 0."""
    try:
        val = float(lr)
    except (TypeError, ValueError):
        raise ProtocolError(f"learning rate must be a number, got {lr!r}") from None
    if not math.isfinite(val) or val <= 0:
        raise ProtocolError(f"learning rate must be a finite number > 0, got {val}")
    return val


def check_iters(iters) -> int:
    """``iters`` itself; a :class:`ProtocolError` unless it is an integer >= 1."""
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ProtocolError(f"iterations must be an integer >= 1, got {iters!r}")
    return iters


def _as_pattern(task, pattern) -> DelayPattern:
    """``pattern`` as a :class:`DelayPattern` over the task's blocks (a string is its command-line spelling)."""
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, task.n_blocks, task.block_names)
    check_pattern(task, pattern)
    return pattern


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


# -- the engine ------------------------------------------------------------------------
@dataclass(frozen=True)
class Engine:
    """How the products at a point are taken (module docstring), chosen once per run.

    Attributes:
        name: ``"graph"`` or ``"batched"``.
        method: the concrete HVP method (``"reverse"`` for the graph engine).
        chunk_size: at most this many products per batch (batched engine).
    """

    name: str
    method: str
    chunk_size: int | None = None

    def point(self, loss, params: Mapping):
        """The :class:`crosscurv.numeric.point.Point` at ``params``."""
        if self.name == "graph":
            return PointCurvature(loss, params)
        return BatchedPoint(loss, params, self.method, self.chunk_size)

    def describe(self) -> str:
        if self.name == "graph":
            return "one retained double-backward graph per point"
        return "batched products (crosscurv.numeric.hvp.hvp_batch)"


def choose_engine(task, hvp_method: str = "auto", chunk_size: int | None = None) -> Engine:
    """The engine for ``hvp_method`` (``"auto"``: :func:`crosscurv.numeric.hvp.resolve_method` at ``theta^0``)."""
    if hvp_method not in HVP_METHODS:
        raise ProtocolError(f"unknown HVP method {hvp_method!r} (use {', '.join(HVP_METHODS)})")
    method = resolve_method(task.loss, task.params, hvp_method) if hvp_method == "auto" else hvp_method
    if method == "reverse" and (hvp_method == "auto" or chunk_size is None):
        try:  # the graph engine needs one double-backward product on a retained graph
            if hvp_method == "auto":
                point = PointCurvature(task.loss, task.params)
                point.hvp(point.grad)
            return Engine("graph", "reverse")
        except Exception:  # no double derivative through a retained graph
            method = "forward"
    return Engine("batched", method, chunk_size)


# -- settings ----------------------------------------------------------------------------
def _run_settings(task, pattern, lr, iters, seed, hvp_method, chunk_size, every, extra, setup) -> dict:
    s = dict(jsonable(extra or {}))
    s.update(setup.settings())
    s.update(
        task=task.name if "task" not in s else s["task"],
        task_info=jsonable(task.info),
        blocks=dict(zip(task.block_names, task.block_sizes())),
        n_params=task.num_params(),
        pattern=pattern.to_dict(),
        lr=lr,
        iters=iters,
        dtype=str(task.dtype).replace("torch.", ""),
        device=str(task.device),
        seed=seed,
        hvp=hvp_method,
        hvp_chunk_size=chunk_size,
        checkpoint_every=every,
        theta0_sha256=theta_digest(task.params),
    )
    return jsonable(s)


def _first_difference(saved: Mapping, now: Mapping) -> str | None:
    saved = {**_PLAIN_OPTIMIZER, **saved}  # runs from before the optimizer settings took plain steps
    for key in sorted(set(saved) | set(now)):
        if key in _VOLATILE:
            continue
        if saved.get(key) != now.get(key):
            a, b = json.dumps(saved.get(key)), json.dumps(now.get(key))
            if len(a) > 60:
                a = a[:57] + "..."
            if len(b) > 60:
                b = b[:57] + "..."
            return f"{key} (checkpoint {a}, now {b})"
    return None


# -- the run directory -------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


class _RunDir:
    def __init__(self, path: str):
        self.path = str(path)
        self.records = os.path.join(self.path, RECORDS_FILE)
        self.summary = os.path.join(self.path, SUMMARY_FILE)
        self.checkpoint = os.path.join(self.path, CHECKPOINT_FILE)

    def check_fresh(self) -> None:
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ProtocolError(f"output path {self.path} exists and is not a directory")
        if os.path.exists(self.checkpoint) or (os.path.exists(self.records) and self._rows_or_foreign()):
            raise ProtocolError(
                f"{self.path} already holds a run (records.csv or checkpoint.pt); "
                "use --resume to continue it or choose another --out"
            )
        if os.path.exists(self.records):  # a header-only file from a run killed before k = 0: nothing to lose
            os.remove(self.records)

    def _rows_or_foreign(self) -> bool:
        """``records.csv`` holds at least one record, or is not a crosscurv records file."""
        try:
            return count_rows(self.records) > 0
        except (RecordsError, UnicodeDecodeError, ValueError):
            return True

    def create(self) -> None:
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:
            raise ProtocolError(f"cannot create output directory {self.path}: {exc.strerror}") from None

    def load_checkpoint(self, task) -> dict:
        """The checkpoint, checked to be a crosscurv checkpoint of this task's shapes (else one-line ResumeError)."""
        if not os.path.isdir(self.path):
            raise ResumeError(f"nothing to resume: {self.path} does not exist")
        if not os.path.exists(self.checkpoint):
            raise ResumeError(f"nothing to resume: {self.path} has no {CHECKPOINT_FILE}")
        self._check_summary()
        bad = f"{self.checkpoint} is not a readable crosscurv checkpoint"
        try:
            ck = torch.load(self.checkpoint, map_location=task.device, weights_only=True)
        except Exception as exc:  # truncated, undecodable, or pickled foreign objects
            raise ResumeError(f"{bad} ({type(exc).__name__}: {_one_line(exc)})") from None
        if not isinstance(ck, dict) or ck.get("format") not in (1, _FORMAT):
            raise ResumeError(f"{bad} (unknown format)")
        try:
            ck = _normalise_checkpoint(ck)
            _check_vectors(ck["vectors"], task)
            ck["estimates"] = EstimateState.from_state_dict(ck["estimates"])
            for key in ("k", "start", "done", "settings"):
                ck[key]  # noqa: B018 (presence)
            if not isinstance(ck["settings"], dict):
                raise TypeError("settings")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResumeError(f"{bad} (missing or malformed entry {_one_line(exc)})") from None
        return ck

    def _check_summary(self) -> None:
        if not os.path.exists(self.summary):
            return
        try:
            with open(self.summary, "r", encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ResumeError(f"{self.summary} is not a readable crosscurv summary ({type(exc).__name__})") from None
        if not isinstance(data, dict) or "settings" not in data:
            raise ResumeError(f"{self.summary} is not a crosscurv summary")

    def records_upto(self, k: int) -> list:
        """Keep rows ``1..k`` of ``records.csv`` (a missing file is created) and return them."""
        try:
            if os.path.exists(self.records) and os.path.getsize(self.records) > 0:
                with open(self.records, "r", encoding="utf-8") as fh:
                    header = fh.readline().strip()
                if header in (",".join(LEGACY_FIELDS), ",".join(PREVIOUS_FIELDS)):
                    raise ResumeError(f"{self.records} was written by an older crosscurv (no converged extremes and "
                                      "error estimates); it cannot be continued: rerun it")
            if k == 0 and not os.path.exists(self.records):
                RecordWriter(self.records).close()
            truncate_records(self.records, k)
            return read_records(self.records)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ResumeError(f"{self.records} is not a readable crosscurv records file ({type(exc).__name__})") from None


def _normalise_checkpoint(ck: dict) -> dict:
    """A format-1 checkpoint (vectors inside ``estimates``) in the current layout."""
    if ck["format"] == _FORMAT:
        return ck
    est = dict(ck["estimates"])
    ck = dict(ck)
    ck["vectors"] = {"theta_j": ck["theta_jc"], "theta_s": ck["theta_s"], "z": est.pop("z"), "y": est.pop("y"),
                     "w": est.pop("w"), "p": est.pop("p")}
    ck["estimates"] = est
    return ck


def _check_vectors(vectors: Mapping, task, names=_CARRIED) -> None:
    for name in names:
        v = vectors[name]
        if v is None and (name in ("w", "vmax", "vmin") or name.startswith(("sj.", "ss."))):
            continue
        if not isinstance(v, dict) or set(v) != set(task.params):
            raise ValueError(f"vector {name} is not keyed like the task's parameters")
        for k, t in v.items():
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(task.params[k].shape):
                raise ValueError(f"vector {name}[{k}] is not shaped like the parameter")


# -- the optimizer of a run -------------------------------------------------------------
class _Optimizer:
    """A run's block-separable optimizer (not plain ``sgd``): its setup and what every iteration reuses.

    Its carried vectors live in the run's store under ``GROUP.BUFFER``
    (:data:`_STATE_GROUPS`); the JC and ``S`` runs' states take ``k`` steps
    before iteration ``k``, so their step count is ``k`` and is not stored.
    """

    def __init__(self, task, setup: OptimizerSetup):
        self.setup, self.spec = setup, setup.spec
        self.factors = list(setup.factors)
        self.f = factor_tree(task, self.factors)
        self.carried = tuple(f"{g}.{b}" for g in _STATE_GROUPS for b in setup.buffers)

    def start(self, store, like: Mapping) -> None:
        """Torch's initial states (no buffers) and zero state differences."""
        for b in self.setup.buffers:
            store.park(f"sj.{b}", None)
            store.park(f"ss.{b}", None)
            store.park(f"zs.{b}", tree.zeros_like(like))
            store.park(f"ys.{b}", tree.zeros_like(like))

    def state(self, store, group: str, k: int) -> OptimizerState:
        """The JC (``"sj"``) or ``S`` (``"ss"``) run's state at iteration ``k``."""
        bufs = {b: store.fetch(f"{group}.{b}") for b in self.setup.buffers}
        return OptimizerState(k, {b: v for b, v in bufs.items() if v is not None})

    def park_state(self, store, group: str, state: OptimizerState) -> None:
        for b in self.setup.buffers:
            store.park(f"{group}.{b}", state.buffers.get(b))

    def group(self, store, group: str) -> dict:
        """``{buffer: tree}`` of a difference group (``"zs"``, ``"ys"``, ``"ds"``)."""
        return {b: store.fetch(f"{group}.{b}") for b in self.setup.buffers}

    def park_group(self, store, group: str, values: Mapping | None) -> None:
        for b in self.setup.buffers:
            store.park(f"{group}.{b}", None if values is None else values[b])

    def tangent(self, store, lr: float) -> TangentStep:
        """The tangent step of this iteration (Adam's coefficients parked under ``tan.*`` at ``theta_JC``)."""
        coef = {n: store.fetch(f"tan.{n}") for n in ("a_m", "a_v", "g")} if self.spec.name == "adam" else None
        return TangentStep(self.spec, lr, self.f, coefficients=coef)

    def park_tangent(self, store, step: TangentStep | None) -> None:
        if self.spec.name == "adam":
            for n in ("a_m", "a_v", "g"):
                store.park(f"tan.{n}", None if step is None else step.coefficients[n])

    def bound(self, est: EstimateState, lr: float) -> float:
        return optimizer_bound(self.spec, est.unorms, lr, self.setup.f_max, est.G, est.L)


# -- the run context --------------------------------------------------------------------
@dataclass
class RunContext:
    """Everything one run's iterations share (instead of long parameter lists).

    ``store`` holds the carried vectors between iterations (:mod:`crosscurv.numeric.offload`);
    ``est`` the scalar state of the estimates (:class:`crosscurv.numeric.estimates.EstimateState`);
    ``opt`` the optimizer of a run that is not plain ``sgd`` (``None``: the paper's steps).
    """

    task: object
    pattern: DelayPattern
    lr: float
    iters: int
    engine: Engine
    plan: MaskedProductPlan
    store: object
    est: EstimateState
    settings: dict
    run: _RunDir | None = None
    writer: RecordWriter | None = None
    every: int | None = None
    records: list = field(default_factory=list)
    progress: Callable[[int, int], None] | None = None
    on_record: Callable[[dict], None] | None = None
    prior_elapsed: float = 0.0
    computed: int = 0
    t0: float = field(default_factory=time.perf_counter)
    last_save: float = field(default_factory=time.perf_counter)
    save_cost: float = 0.0
    opt: _Optimizer | None = None

    @property
    def jacobi(self) -> DelayPattern:
        return jacobi(self.task.n_blocks)

    @property
    def carried(self) -> tuple:
        """Names of the vectors a checkpoint holds."""
        return _CARRIED + (self.opt.carried if self.opt is not None else ())

    def clock(self) -> float:
        return self.prior_elapsed + time.perf_counter() - self.t0

    # -- checkpoints ----------------------------------------------------------------
    def checkpoint(self, k: int, start: int, done: bool = False) -> None:
        """Atomic checkpoint: ``k`` records are final, the next iteration to run is ``start``."""
        t = time.perf_counter()
        atomic_torch_save(
            {
                "format": _FORMAT,
                "k": k,
                "start": start,
                "done": done,
                "settings": self.settings,
                "vectors": {name: self.store.fetch(name) for name in self.carried},
                "estimates": self.est.state_dict(),
                "elapsed_s": self.clock(),
            },
            self.run.checkpoint,
        )
        self.last_save = time.perf_counter()
        self.save_cost = self.last_save - t

    def after_step(self, k: int) -> None:
        """After iteration ``k`` stepped both trajectories: checkpoint when due (always before the last one)."""
        if self.run is None:
            return
        if self.every is not None:
            due = k % self.every == 0
        else:
            since = time.perf_counter() - self.last_save
            due = since >= CHECKPOINT_SECONDS and since >= _CHECKPOINT_COST_FACTOR * self.save_cost
        if due or k + 1 == self.iters:
            self.checkpoint(k, k + 1)

    def mark_done(self) -> None:
        """The run reached ``iters``: its last checkpoint (state before iteration ``iters``) is marked done."""
        if self.run is None:
            return
        ck = torch.load(self.run.checkpoint, map_location=self.task.device, weights_only=True)
        ck["done"] = True
        ck["settings"] = self.settings
        ck["elapsed_s"] = self.clock()
        atomic_torch_save(ck, self.run.checkpoint)

    # -- records ----------------------------------------------------------------------
    def emit(self, k: int, loss_jc: float, loss_s: float, estimates: dict) -> None:
        """Complete the record of iteration ``k`` (``bound_bk`` with the current ``G``, ``L``) and hand it on:
        memory, ``records.csv`` (flushed), the ``on_record`` hook, the progress callback."""
        bound = self.est.bound(self.lr) if self.opt is None else self.opt.bound(self.est, self.lr)
        rec = make_record(k, loss_jc=loss_jc, loss_s=loss_s, bound_bk=bound, **estimates)
        self.records.append(rec)
        self.computed += 1
        if self.writer is not None:
            self.writer.write(rec)
        if self.on_record is not None:
            self.on_record(rec)
        if self.progress is not None:
            self.progress(k, self.iters)

    def timing(self, resumed_from) -> dict:
        el = time.perf_counter() - self.t0
        return {
            "resumed_from": resumed_from,
            "iterations_this_session": self.computed,
            "elapsed_s_this_session": el,
            "iterations_per_s": self.computed / el if el > 0 and self.computed else None,
            "elapsed_s_total": self.clock(),
        }


class _Diverged(Exception):
    def __init__(self, k: int, message: str):
        super().__init__(message)
        self.k = k


# -- one iteration -----------------------------------------------------------------------
def _iteration(ctx: RunContext, k: int) -> None:
    """Iteration ``k``: the record of ``k`` (``k >= 1``) and, unless ``k = K``, the state of ``k + 1``.

    The record's ``gap`` is the segment integral of :class:`crosscurv.numeric.gap.SegmentGap` (three gradients
    inside the segment ``theta_JC^k -> theta_S^k``, taken at ``theta_S^k`` while ``at_s`` is held, its
    ends ``g_JC^k`` and ``g_S^k``), with its error bound ``gap_err``, checked against ``loss_s -
    loss_jc`` by :func:`crosscurv.numeric.gap.reconcile`; where that difference alone is within ``2^-10`` of
    itself the segment is skipped (:func:`crosscurv.numeric.gap.plain_suffices`);
    ``sharpness`` is the power iteration's ``p_k^T H_JC^k p_k``.

    Order (each vector fetched from ``ctx.store`` when used and parked when updated, so that with
    offloading only the vector in use sits beside the graph): at ``theta_JC^k`` the loss, ``g_JC^k``
    (held by the point until it is released), the recursive term and the JC step, then the products
    ``H_JC^k [p, z, y, Delta]``, each consumed before the next (``g.z`` and ``g.y`` from the vector
    fetched for its product, ``M_S g_JC^k`` formed where ``y`` takes it); then at ``theta_S^k`` the
    loss, ``g_S^k``, the record, ``u^k = M_S g_S^k`` and the scheme step.  The carried vectors are
    updated in place (the same elementwise expressions, so the same bits).
    Updates (Lemma 3, Theorems 2-3): ``z <- (z - eta H z) + eta^2 u``, ``y <- (y - eta H y) + eta^2 M_S g_JC``,
    ``w <- (Delta - eta H Delta) + eta^2 u``, ``q <- Delta . H Delta / 2``.

    With an optimizer (``ctx.opt``; :mod:`crosscurv.numeric.optimizer_estimates`) the same body runs with its
    generalizations: the steps move by ``-eta F phi`` and update each run's state, ``M_S g`` becomes the
    forcing ``M_S F phi`` (``phi`` at the run's own state), and ``z``, ``y``, ``w`` take the *tangent
    step* with their state differences: ``y`` at ``theta_JC^k``; ``z`` and ``w`` (whose forcing is only
    known at ``theta_S^k``) keep ``H z`` and ``H Delta`` (and Adam's coefficients, formed while
    ``g_JC^k`` is at hand) until then.
    """
    S, est, lr, loss = ctx.store, ctx.est, ctx.lr, ctx.task.loss
    opt = ctx.opt
    lr2 = lr * lr
    last = k == ctx.iters
    record: dict = {}
    # -- theta_JC^k ------------------------------------------------------------------------
    theta_j = S.fetch("theta_j")
    # the measured gap L(theta_S) - L(theta_JC) without cancellation (crosscurv.numeric.gap): its end node with
    # g_JC^k here, the rest at theta_S^k once both losses say whether the segment is needed (theta_JC^k
    # is kept for it); Delta^k also serves H_JC^k Delta^k
    delta = tree.sub(S.fetch("theta_s"), theta_j)
    S.park("delta", delta)
    if k >= 1:
        segment = SegmentGap(delta)
        S.park("theta_jk", theta_j)
    at_j = ctx.engine.point(loss, theta_j)
    loss_jc = float(at_j.value)
    if not math.isfinite(loss_jc):
        if k == 0:
            raise TaskError(f"loss at the initial parameters is not finite ({loss_jc})")
        with torch.no_grad():
            loss_s = float(loss(S.fetch("theta_s")))
        bad = ", ".join(f"{n} = {v}" for n, v in (("loss_jc", loss_jc), ("loss_s", loss_s)) if not math.isfinite(v))
        raise _Diverged(k, f"diverged at k={k}: {bad}")
    gj = at_j.grad
    est.observe_gradients(gj)
    meas = {"G": float(tree.norm(gj))}  # what the error estimates measure at k (crosscurv.numeric.error_estimates)
    if k >= 1:
        segment.add(0.0, gj, delta)
        record["recursive"] = float(recursive_estimate(gj, S.fetch("w"), est.q))
    del delta
    if not last and opt is None:
        # the JC step theta - eta g: the expression crosscurv.numeric.steps.scheme_step uses for an empty pattern
        new_j = {n: theta_j[n] - lr * gj[n] for n in theta_j}
        meas["round_j"] = _step_residual(new_j, theta_j, gj, lr, None, 0.0)
        S.park("theta_j", new_j)
        del new_j
    elif not last:
        sj = opt.state(S, "sj", k)
        opt.park_group(S, "ds", state_difference(opt.spec, opt.state(S, "ss", k), sj, theta_j))
        S.park("m_jc", at_j.masked(ctx.plan, scaled_direction(opt.spec, sj, gj, opt.f)))
        opt.park_tangent(S, TangentStep(opt.spec, lr, opt.f, sj, gj))
        new, sj, _ = optimizer_scheme_step(ctx.task, theta_j, ctx.jacobi, lr, opt.spec, sj, opt.factors,
                                           grad_at_params=gj)
        S.park("theta_j", new)
        opt.park_state(S, "sj", sj)
        del new, sj
    del gj
    named = [("p", lambda: S.fetch("p")), ("z", lambda: S.fetch("z")), ("y", lambda: S.fetch("y"))]
    if not last:
        named.append(("delta", lambda: S.fetch("delta")))
    for name, v, Hv in _products(at_j, k, named):
        if name == "p":
            S.park("p", est.observe_power(v, Hv))
            record["sharpness"] = est.rayleigh
        elif name == "z":
            meas["Z"] = float(tree.norm(v))
            if k >= 1:
                record["cumulative"] = float(quadratic_from_linear(tree.dot(at_j.grad, v), v, Hv))
            if not last and opt is None:  # propagate(v, Hv, None, lr), formed in v (bit for bit)
                S.park("z", _sub_scaled_into(v, Hv, lr))
            elif not last:
                S.park("hz", Hv)
        elif name == "y":
            meas["Y"] = float(tree.norm(v))
            if k >= 1:
                record["jc_only"] = float(quadratic_from_linear(tree.dot(at_j.grad, v), v, Hv))
            if not last and opt is None:  # propagate(v, Hv, M_S g_JC, lr), formed in v (bit for bit)
                _sub_scaled_into(v, Hv, lr)
                Hv = None  # gone before M_S g_JC is formed
                _add_scaled_into(v, at_j.masked(ctx.plan, at_j.grad), lr2)
                S.park("y", v)
            elif not last:
                m_jc = S.fetch("m_jc")
                y, ys = opt.tangent(S, lr).apply(v, opt.group(S, "ys"), {n: Hv[n] - lr * m_jc[n] for n in Hv})
                S.park("y", y)
                opt.park_group(S, "ys", ys)
                S.park("m_jc", None)
                del y, ys, m_jc
        else:  # delta
            est.q = 0.5 * tree.dot(v, Hv)
            if opt is None:
                g0 = at_j.grad
                S.park("gpred", {n: g0[n] + Hv[n] for n in g0})  # g_JC^k + H_JC^k Delta^k
                meas["norm_hd"] = float(tree.norm(Hv))
                del g0
                # w = propagate(v, Hv, None, lr), formed in Hv (v is the parked Delta^k, still needed)
                S.park("w", _scaled_difference_into(v, Hv, lr))
            else:
                S.park("hdelta", Hv)
        del v, Hv
    _extremes(ctx, k, at_j, theta_j, record, meas)
    at_j.release()
    del at_j, theta_j
    # -- theta_S^k -------------------------------------------------------------------------
    theta_s = S.fetch("theta_s")
    at_s = ctx.engine.point(loss, theta_s)
    loss_s = float(at_s.value)
    if not math.isfinite(loss_s):
        raise _Diverged(k, f"diverged at k={k}: loss_s = {loss_s}")
    gs = at_s.grad
    est.observe_gradients(gs)
    delta = None
    if k >= 1:
        if plain_suffices(loss_s, loss_jc, segment.dtype):
            measured = (math.nan, math.nan)  # far apart: the plain difference alone (crosscurv.numeric.gap.reconcile)
        else:
            delta = S.fetch("delta")
            segment.interior(loss, S.fetch("theta_jk"), delta)
            segment.add(1.0, gs, delta)
            measured = segment.result()
        S.park("theta_jk", None)
        record["gap"], record["gap_err"] = reconcile(*measured, loss_s, loss_jc, segment.dtype)
        _error_columns(ctx, record, meas)
        ctx.emit(k, loss_jc, loss_s, record)
    if last:
        S.park("delta", None)
        at_s.release()
        return
    if opt is not None:
        del delta
        _optimizer_s_phase(ctx, k, at_s, theta_s, gs)
        return
    if delta is None:
        delta = S.fetch("delta")
    S.park("delta", None)
    gp = S.fetch("gpred")
    S.park("gpred", None)
    eps = torch.finfo(gs[next(iter(gs))].dtype).eps
    noise = 8.0 * eps * (float(tree.norm(gs)) + meas["G"] + meas["norm_hd"])
    D = float(tree.norm(delta))
    E = est.errors
    wnorm = _norm_of(gs, lambda n: gs[n] - gp[n])  # ||w^k||, eq. grad_diff_expansion
    E.rho = max(E.rho, errs.rho_sample(wnorm, noise, D))
    del gp
    u = at_s.masked(ctx.plan, gs)
    at_s.release()
    del at_s
    est.unorms.append(float(tree.norm(u)))
    w = _add_scaled_into(S.fetch("w"), u, lr2, keep=True)
    S.park("w", w)
    A = float(tree.norm(w))
    d = _norm_of(w, lambda n: w[n] - delta[n])
    P = _norm_of(w, lambda n: w[n] + delta[n])
    del w, delta
    S.park("z", _add_scaled_into(S.fetch("z"), u, lr2, keep=True))
    new_s = scheme_step(ctx.task, theta_s, ctx.pattern, lr, grad_at_params=gs)
    e = _step_residual(new_s, theta_s, gs, lr, u, lr2) + meas["round_j"]
    S.park("theta_s", new_s)
    del u, new_s
    _carry_errors(ctx, meas, D, e, A, d, P, wnorm)


def _step_residual(new: Mapping, old: Mapping, g: Mapping, lr: float, u: Mapping | None, lr2: float) -> float:
    """``||new - old + eta g - eta^2 u||`` in float64 (``u = None``: no ``eta^2`` term): the scheme's remainder
    ``eta^3 eps^k`` of Lemma 1 for the ``S`` step (with the step's round-off), the JC step's round-off without ``u``."""
    def r(n):
        x = new[n].to(torch.float64) - old[n].to(torch.float64) + lr * g[n].to(torch.float64)
        return x if u is None else x - lr2 * u[n].to(torch.float64)
    return _norm_of(new, r)


# -- in-place vector algebra -------------------------------------------------------------
# Each helper forms the same elementwise expression, tensor by tensor, as the dict comprehension it
# replaces (the same kernels on the same operands: the same bits) into a buffer that is no longer
# needed, so that no second parameter-sized vector is alive while it runs.  An entry whose buffers
# share memory (autograd may hand back its ``grad_outputs`` unchanged) is formed out of place.

def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _sub_scaled_into(s: dict, Hs: dict, lr: float) -> dict:
    """``s - lr * Hs`` (:func:`crosscurv.numeric.estimates.propagate` without forcing), formed in ``s``
    (``Hs`` is overwritten by ``lr * Hs``); returns ``s``."""
    for n in s:
        if _shares(s[n], Hs[n]):
            s[n] = s[n] - lr * Hs[n]
        else:
            s[n].sub_(Hs[n].mul_(lr))
    return s


def _scaled_difference_into(s: Mapping, Hs: dict, lr: float) -> dict:
    """``s - lr * Hs`` formed in ``Hs`` (``s`` unchanged); returns ``Hs``."""
    for n in Hs:
        if _shares(s[n], Hs[n]):
            Hs[n] = s[n] - lr * Hs[n]
        else:
            torch.sub(s[n], Hs[n].mul_(lr), out=Hs[n])
    return Hs


def _add_scaled_into(x: dict, f: dict, c: float, keep: bool = False) -> dict:
    """``x + c * f`` formed in ``x`` (``f`` overwritten by ``c * f`` unless ``keep``); returns ``x``."""
    for n in x:
        if keep or _shares(x[n], f[n]):
            t = c * f[n]
        else:
            t = f[n].mul_(c)
        if _shares(x[n], t):
            x[n] = x[n] + t
        else:
            x[n].add_(t)
    return x


def _norm_of(keys, entry) -> float:
    """``float(tree.norm(x))`` for the vector ``x = {n: entry(n) for n in keys}``, each entry formed when
    it is summed (the same products and the same order of summation as :func:`crosscurv.numeric.tree.dot`)."""
    total = None
    for n in keys:
        x = entry(n)
        s = (x * x).sum()
        total = s if total is None else total + s
        del x
    return float(torch.sqrt(total))


def _extremes(ctx: RunContext, k: int, at_j, theta_j: Mapping, record: dict, meas: dict) -> None:
    """The converged extreme eigenpairs of ``H_JC^k`` (:func:`crosscurv.numeric.estimates.track_extremes`, warm-started from
    the carried ``vmax``, ``vmin``) into the record and ``meas`` (``lam = ||H||``, ``c = ||I - eta H||``)."""
    S, est = ctx.store, ctx.est
    # fetched only if the solve reads them (between solves it returns them unchanged: nothing to park)
    vmax, vmin = (_Parked(S, "vmax"), _Parked(S, "vmin")) if S.holds("vmax") else (None, None)
    prev = None if vmax is None else Extremes(est.lam_max, est.lam_min, vmax, vmin, 0, 0.0, False)
    try:
        ext = track_extremes(at_j.hvp, theta_j, prev, k, seed=int(ctx.settings.get("seed") or 0))
    except (ValueError, RuntimeError, ArithmeticError):  # non-finite products (a diverging run): no extremes
        ext = Extremes(math.nan, math.nan, vmax, vmin, 0, math.nan, False)
    est.lam_max, est.lam_min = ext.lam_max, ext.lam_min
    if ext.v_max is not vmax:
        S.park("vmax", ext.v_max)
    if ext.v_min is not vmin:
        S.park("vmin", ext.v_min)
    record["lambda_max"], record["lambda_min"], record["sharpness_hvps"] = ext.lam_max, ext.lam_min, ext.hvps
    # between converged iterations the power iteration's p^T H_JC^k p (a lower bound of lambda_max(H_JC^k),
    # taken anyway) keeps the regime test and ||H|| current
    top = ext.lam_max if not math.isfinite(est.rayleigh) else max(ext.lam_max, est.rayleigh)
    low = ext.lam_min if not math.isfinite(est.rayleigh) else min(ext.lam_min, est.rayleigh)
    meas["top"] = top
    meas["lam"] = max(abs(top), abs(low))
    meas["c"] = max(abs(1.0 - ctx.lr * top), abs(1.0 - ctx.lr * low))


class _Parked(Mapping):
    """A vector parked in a store under ``name``, read-only, fetched on its first use."""

    def __init__(self, store, name: str):
        self._store, self._name, self._v = store, name, None

    def _vector(self) -> dict:
        if self._v is None:
            self._v = self._store.fetch(self._name)
        return self._v

    def __getitem__(self, key):
        return self._vector()[key]

    def __iter__(self):
        return iter(self._vector())

    def __len__(self) -> int:
        return len(self._vector())


def _error_columns(ctx: RunContext, record: dict, meas: dict) -> None:
    """The error estimates and certified winners of the record of ``k`` (:mod:`crosscurv.numeric.error_estimates`; NaN errors
    and no certificate with an optimizer)."""
    est, lr = ctx.est, ctx.lr
    if ctx.opt is not None:
        for name in ESTIMATES:
            record[f"{name}_err"], record[f"{name}_cert"] = math.nan, 0.0
        return
    E = est.errors
    err = {
        "recursive": errs.recursive_error(lr, E.rho, E.sigma, meas["G"], E.G, E.lam, meas["lam"], E.A, E.d, E.P),
        "cumulative": errs.cumulative_error(meas["G"], meas["lam"], meas["Z"], E.R, E.rho),
        "jc_only": errs.jc_only_error(meas["G"], meas["lam"], meas["Y"], E.E, E.rho),
    }
    regime = errs.in_regime(lr, meas["top"])
    for name in ESTIMATES:
        record[f"{name}_err"] = err[name]
        record[f"{name}_cert"] = errs.certify(record[name], err[name], regime)


def _carry_errors(ctx: RunContext, meas: dict, D: float, e: float, A: float, d: float, P: float,
                  wnorm: float) -> None:
    """Advance the error estimates' state from ``k`` to ``k + 1`` (:class:`crosscurv.numeric.error_estimates.ErrorState`);
    ``sigma_k`` from the measured ``||w^k||`` (:func:`crosscurv.numeric.error_estimates.measured_step_remainder`)."""
    E, lr = ctx.est.errors, ctx.lr
    lam, c, G = meas["lam"], meas["c"], meas["G"]
    sigma = errs.measured_step_remainder(lr, wnorm, e)
    X = meas["Y"] + E.E
    E.E = (c * E.E + lr * lr * errs.forcing_difference(E.rho, lam, G, X, len(ctx.pattern))
           + errs.step_remainder(lr, E.rho, X, e))
    E.R = errs.propagate_remainder(E.R, c, sigma)
    E.sigma, E.G, E.lam, E.A, E.d, E.P = sigma, G, lam, A, d, P


def _optimizer_s_phase(ctx: RunContext, k: int, at_s, theta_s: Mapping, gs: Mapping) -> None:
    """The end of iteration ``k`` with an optimizer, at ``theta_S^k``: the forcing ``M_S F phi_S``, the tangent
    steps of ``w`` (from the measured ``Delta^k``, state difference and ``H_JC^k Delta^k``) and ``z``, and the
    scheme step with the ``S`` run's state."""
    S, opt, lr = ctx.store, ctx.opt, ctx.lr
    ss = opt.state(S, "ss", k)
    force = at_s.masked(ctx.plan, scaled_direction(opt.spec, ss, gs, opt.f))
    at_s.release()
    ctx.est.unorms.append(forcing_norm(opt.spec, opt.f, force))
    step = opt.tangent(S, lr)
    hd = S.fetch("hdelta")
    w, _ = step.apply(S.fetch("delta"), opt.group(S, "ds"), {n: hd[n] - lr * force[n] for n in hd})
    S.park("w", w)
    S.park("delta", None)
    S.park("hdelta", None)
    opt.park_group(S, "ds", None)
    del w, hd
    hz = S.fetch("hz")
    z, zs = step.apply(S.fetch("z"), opt.group(S, "zs"), {n: hz[n] - lr * force[n] for n in hz})
    S.park("z", z)
    opt.park_group(S, "zs", zs)
    S.park("hz", None)
    opt.park_tangent(S, None)
    del z, zs, hz, force, step
    new, ss, _ = optimizer_scheme_step(ctx.task, theta_s, ctx.pattern, lr, opt.spec, ss, opt.factors,
                                       grad_at_params=gs)
    S.park("theta_s", new)
    opt.park_state(S, "ss", ss)


def _products(point, k: int, named):
    """``(name, v, H v)`` for ``named = [(name, get), ...]`` in order, each ``v = get()`` fetched once.

    At ``k = 0`` only the power vector's product is taken: ``z``, ``y`` and ``Delta`` are exactly zero
    there, and so are their products.
    """
    fetched: dict = {}

    def once(name, get):
        def fetch():
            fetched[name] = get()
            return fetched[name]
        return fetch

    taken = named if k >= 1 else named[:1]
    for name, Hv in point.products([(n, once(n, g)) for n, g in taken]):
        yield name, fetched.pop(name), Hv
    for name, get in named[len(taken):]:
        v = get()
        yield name, v, tree.zeros_like(v)


# -- summary -------------------------------------------------------------------------
def _summary(ctx: RunContext, status, message, diverged_at, resumed_from, requested) -> dict:
    metrics, coverage = {}, None
    records = ctx.records
    if records:
        metrics, coverage = run_metrics(records_columns(records), ESTIMATES)
    return {
        "crosscurv_version": crosscurv_version(),
        "status": status,
        "message": message,
        "diverged_at": diverged_at,
        "records": len(records),
        "settings": ctx.settings,
        "metrics": metrics,
        "metrics_note": (
            "paper Section 5.1; w(x) = JC if x > 0, GS (the scheme S) if x < 0, tie if x == 0; a measured "
            "gap of exactly 0 is in neither n_JC nor n_GS; Correct_K needs equal winners (a zero "
            "estimate only agrees with a zero gap); an iteration with |gap| <= gap_err (the measured gap's "
            "error bound) is undecided: in neither n_JC nor n_GS and left out of Correct_K's denominator"
        ),
        "bound_bk_coverage": coverage,
        "constants": {"G": ctx.est.G, "L": ctx.est.L, "note": CONSTANTS_NOTE},
        "hvp": {
            "requested": requested,
            "used": ctx.engine.method,
            "engine": ctx.engine.describe(),
            "engine_name": ctx.engine.name,
            "masked_product_form": ctx.plan.form,
            "offloaded": bool(getattr(ctx.store, "offloaded", False)),
        },
        "timing": ctx.timing(resumed_from),
    }


# -- the protocol ------------------------------------------------------------------------
def run_protocol(
    task,
    pattern: DelayPattern | str,
    lr: float,
    iters: int,
    *,
    out_dir: str | None = None,
    resume: bool = False,
    hvp_method: str = "auto",
    seed: int = 0,
    settings: Mapping | None = None,
    checkpoint_every: int | None = None,
    chunk_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
    offload: bool | None = None,
    optimizer: str | None = None,
    block_lr: str | Mapping | None = None,
) -> ProtocolResult:
    """Run JC and pattern ``S`` side by side for ``iters`` iterations (module docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task`; ``task.params`` is ``theta^0``.
        pattern: acyclic delay pattern over ``task.n_blocks`` blocks, or its
            command-line spelling (``"gs"``, ``"gs:3,2,1"``, ``"2<-1,3<-2"``...).
        lr: constant learning rate ``eta > 0``.
        iters: number of iterations ``K >= 1`` (on resume it may exceed the
            run's: the run is extended).
        out_dir: run directory (``None``: records kept in memory only).
        resume: continue (or extend) the run in ``out_dir`` from its checkpoint.
        hvp_method: ``"auto"``, ``"reverse"``, ``"forward"`` or ``"rof"`` (module docstring).
        seed: seed of the power-iteration start vector (recorded).
        settings: extra JSON-able settings recorded in the summary and checked
            on resume (task spec, preset, sizes...).
        checkpoint_every: records between checkpoints (default: by elapsed
            time, :data:`CHECKPOINT_SECONDS`).
        chunk_size: at most this many HVPs per batch (batched engine).
        progress: ``progress(k, K)`` after each record.
        on_record: ``on_record(record)`` after each record is written (before
            any checkpoint); an exception there interrupts the run.
        offload: park the carried vectors off the compute device between
            their uses (:mod:`crosscurv.numeric.offload`; records are unchanged).
            ``None``: when the estimated footprint exceeds half the available
            memory (:func:`crosscurv.numeric.offload.should_offload`).
        optimizer: ``"sgd"`` (default: the paper's plain steps), ``"momentum:BETA"``
            or ``"adam[:B1,B2,EPS]"`` (:func:`crosscurv.numeric.optimizers.parse_optimizer`;
            ``torch.optim`` conventions, both runs from zero state).
        block_lr: ``"NAME=FACTOR,..."`` or ``{name: factor}``: block ``NAME`` steps
            with ``lr * FACTOR`` (unnamed blocks 1).  Plain ``sgd`` with no factor
            other than 1 runs exactly the paper's protocol (bit for bit the same
            records); anything else the generalized estimates
            (:mod:`crosscurv.numeric.optimizer_estimates`) in the same columns, with
            ``bound_bk`` the majorant of :func:`crosscurv.numeric.optimizer_estimates.optimizer_bound`
            (NaN for Adam).  Recorded in the settings (``optimizer``, ``block_lr``).

    Returns:
        A :class:`ProtocolResult` (``status`` ``"complete"`` or ``"diverged"``).

    Raises:
        ProtocolError, ResumeError, TaskError, PatternError: bad input (one line).
        KeyboardInterrupt and any exception from ``on_record`` propagate after
        ``summary.json`` is written with status ``"interrupted"``.
    """
    lr = check_lr(lr)
    iters = check_iters(iters)
    pattern = _as_pattern(task, pattern)
    if hvp_method not in HVP_METHODS:
        raise ProtocolError(f"unknown HVP method {hvp_method!r} (use {', '.join(HVP_METHODS)})")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ProtocolError(f"HVP chunk size must be an integer >= 1, got {chunk_size!r}")
    if offload is not None and not isinstance(offload, bool):
        raise ProtocolError(f"offload must be True, False or None, got {offload!r}")
    if checkpoint_every is not None and (isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int)
                                         or checkpoint_every < 1):
        raise ProtocolError(f"checkpoint interval must be an integer >= 1, got {checkpoint_every!r}")
    if resume and out_dir is None:
        raise ResumeError("resume needs an output directory")
    setup = optimizer_setup(task, optimizer, block_lr)
    elem = torch.empty((), dtype=task.dtype).element_size()
    use_offload = should_offload(task.num_params(), elem, task.device) if offload is None else offload
    run_settings = _run_settings(task, pattern, lr, iters, seed, hvp_method, chunk_size, checkpoint_every, settings,
                                 setup)
    run_settings["offload"] = use_offload

    opt = None if setup.plain else _Optimizer(task, setup)
    run = _RunDir(out_dir) if out_dir is not None else None
    ck = None
    if run is not None and not resume:
        run.check_fresh()
    if resume:
        ck = run.load_checkpoint(task)
        diff = _first_difference(ck["settings"], run_settings)
        if diff is not None:
            raise SettingsChangedError(f"cannot resume {run.path}: setting {diff} differs")
        planned = ck["settings"].get("iters")
        if isinstance(planned, int) and iters < planned:
            raise SettingsChangedError(f"cannot resume {run.path} with {iters} iterations: the run was set to {planned} "
                              "(a run can be extended, not shortened)")
        if ck["done"] and iters > planned and ck["format"] == 1:
            raise ResumeError(f"cannot extend {run.path}: its checkpoint was written by an older crosscurv "
                              "that kept no state for extending; rerun it")
        if opt is not None:
            try:
                _check_vectors(ck["vectors"], task, opt.carried)
            except (KeyError, TypeError, ValueError) as exc:
                raise ResumeError(f"{run.checkpoint} is not a readable crosscurv checkpoint (missing or malformed "
                                  f"optimizer state {_one_line(exc)})") from None
    else:
        task.check_loss()  # TaskError unless a finite scalar
    # decided before the run's vectors exist, so that the probe's graph is not on top of them
    engine = choose_engine(task, hvp_method, chunk_size)
    plan = masked_product_plan(task, pattern, "auto")
    if run is not None and not resume:
        run.create()
    store = make_store(use_offload, task.device, run.path if run is not None else None)
    try:
        if ck is not None:
            done = bool(ck["done"]) and iters == ck["settings"].get("iters")
            k0 = ck["settings"]["iters"] if done else int(ck["k"])
            start = int(ck["start"])
            records = run.records_upto(k0)
            est = ck["estimates"]
            for name in _CARRIED + (opt.carried if opt is not None else ()):
                store.park(name, ck["vectors"][name])
            prior_elapsed = float(ck.get("elapsed_s", 0.0))
            ck = None  # its vectors now live in the store only
        else:
            done, k0, start, records, prior_elapsed = False, 0, 0, [], 0.0
            est = EstimateState()
            store.park("theta_j", tree.clone(task.params))
            store.park("theta_s", tree.clone(task.params))
            store.park("z", tree.zeros_like(task.params))
            store.park("y", tree.zeros_like(task.params))
            store.park("w", None)
            store.park("p", init_power_vector(task.params, seed))
            store.park("vmax", None)
            store.park("vmin", None)
            if opt is not None:
                opt.start(store, task.params)
        ctx = RunContext(task, pattern, lr, iters, engine, plan, store, est, run_settings, run=run,
                         every=checkpoint_every, records=records, progress=progress, on_record=on_record,
                         prior_elapsed=prior_elapsed, opt=opt)
        if run is not None and not resume:
            ctx.checkpoint(0, 0)
        return _run(ctx, done, start, k0 if resume else None, hvp_method)
    finally:
        store.close()


def _run(ctx: RunContext, done: bool, start: int, resumed_from, requested) -> ProtocolResult:
    run = ctx.run
    if run is not None:
        ctx.writer = RecordWriter(run.records, append=resumed_from is not None)
        write_summary(run.summary, _summary(ctx, "running", "running", None, resumed_from, requested))
    status, message, diverged_at = "complete", "", None
    try:
        if not done:
            try:
                for k in range(start, ctx.iters + 1):
                    _iteration(ctx, k)
                    if k < ctx.iters:
                        ctx.after_step(k)
                ctx.mark_done()
            except _Diverged as exc:
                status, message, diverged_at = "diverged", str(exc), exc.k
        if status == "complete":
            message = f"complete: {len(ctx.records)} iterations"
    except BaseException as exc:
        if run is not None:
            note = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"interrupted: {type(exc).__name__}: {exc}"
            write_summary(run.summary, _summary(ctx, "interrupted", note, None, resumed_from, requested))
        raise
    finally:
        if ctx.writer is not None:
            ctx.writer.close()
    if status == "diverged" and run is not None:
        message += f"; {len(ctx.records)} records kept in {run.records}"
    summary = _summary(ctx, status, message, diverged_at, resumed_from, requested)
    if run is not None:
        write_summary(run.summary, summary)
    return ProtocolResult(status, ctx.records, summary, message, diverged_at, run.path if run is not None else None)
