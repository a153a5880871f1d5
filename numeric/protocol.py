"""The controlled protocol (paper, Section 5.1, "Controlled trajectories").

JC and pattern-``S`` trajectories start from the same ``theta^0`` (the task's
parameters) and take exact full-batch steps (:func:`crosscurv.numeric.steps.scheme_step`)
with a constant learning rate ``eta``, no momentum (the paper's setting; with
``optimizer`` / ``block_lr`` both runs use a block-separable optimizer from zero
state and the estimates are its generalizations, see :func:`run_protocol`).
How the runs step and the carried states advance is the run's update rule
(:mod:`crosscurv.numeric.update_rules`: the paper's plain steps, or the optimizer).
Iteration ``k = 0..K`` is one body (:func:`_iteration`) over the per-point interface of
:mod:`crosscurv.numeric.point` (value, gradient, ``H v``, ``M_S v``):

* at ``theta_S^k``: the loss, ``g_S^k`` and ``u^k = M_S(theta_S^k) g_S^k``, then the ``S`` run's step (the
  scheme step reuses ``g_S^k`` for the blocks with an empty fresh set);
* at ``theta_JC^k``: the loss, ``g_JC^k``, ``M_S(theta_JC^k) g_JC^k`` and the
  products ``H_JC^k [p_k, z_k, y_k, Delta^k]`` (power-iteration vector,
  cumulative state, JC-only state, trajectory difference), the JC run's step;

the converged extreme eigenpairs of ``H_JC^k`` (:func:`crosscurv.numeric.estimates.track_extremes`, warm-started
from the carried ``vmax``, ``vmin``); it writes the record of iteration ``k >= 1`` (:mod:`crosscurv.numeric.records`;
the estimates of :mod:`crosscurv.numeric.estimates`, their error estimates and certified winners of
:mod:`crosscurv.numeric.error_estimates`, measured from ``g_S^k - g_JC^k - H_JC^k Delta^k`` and the two steps'
remainders, no extra product), then carries the estimates' scalar state to ``k + 1``.  At
``k = K`` the products that only serve ``k + 1`` are skipped.  The HVP
``H_JC^k z_k`` serves both the quadratic term of the cumulative estimate at
``k`` and the propagation of ``z`` to ``k + 1``, so a run costs ``O(K)`` HVPs.

Engines (chosen once per run, recorded in the summary under ``"hvp"``):

* ``"graph"`` (:class:`crosscurv.numeric.point.PointCurvature`): the gradient is built
  once with ``create_graph=True`` and every product at that point is one
  backward pass through the retained graph; one graph is alive at a time;
* ``"termwise"`` (:class:`crosscurv.numeric.point.TermwisePoint`): for a task whose loss is
  a sum of terms (``Task.loss_terms``: the ``fl`` task's clients), the gradient and every
  product accumulated term by term by double backward, one term's graph alive at a time
  (the memory of one term's activations, at the price of repeating each term's forward
  and first backward per product);
* ``"batched"`` (:class:`crosscurv.numeric.point.BatchedPoint`): the gradient by one
  backward pass, the products at a point in one batched call of
  :func:`crosscurv.numeric.hvp.hvp_batch` (``chunk_size`` caps the batch).

``hvp_method`` ``"reverse"`` asks for the graph engine, ``"forward"`` /
``"rof"`` for the batched one with that method, and ``"auto"`` (default) takes
the termwise engine for a task with loss terms, else has the meaning it has
everywhere (:func:`crosscurv.numeric.hvp.resolve_method`): double backward when one
product works at ``theta^0`` (the graph engine), else forward-over-reverse (batched).  ``M_S v`` follows a
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

from crosscurv.theory.errors import SettingsChangedError
from crosscurv.theory.patterns import DelayPattern, jacobi, parse_pattern

from . import tree
from .curvature import MaskedProductPlan, masked_product_plan
from .file_save import mapped_sources
from .gap import SegmentGap, plain_suffices, reconcile
from .estimates import (EstimateState, Extremes, init_power_vector, quadratic_from_linear,
                        recursive_estimate, track_extremes)
from .hvp import HVP_METHODS, grad, resolve_method
from .metrics import run_metrics
from .offload import make_store, should_offload
from .optimizers import optimizer_setup
from .point import BatchedPoint, PointCurvature, TermwisePoint
from .protocol_checks import ProtocolError, check_iters, check_lr
from .run_folder import ResumeError, check_records_header, check_resumable, one_line, unreadable_checkpoint
from .records import (
    CHECKPOINT_FILE,
    ESTIMATES,
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
from .steps import check_pattern
from .threads import computes_with_threads
from .update_rules import PlainRule, UpdateRule, update_rule
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
#: Checkpoint format (an older one is refused in one line: its run cannot be continued).
_FORMAT = 2

#: Settings that may change between a run and its resumption (``iters`` may grow: checked apart).
_VOLATILE = ("checkpoint_every", "offload", "iters")
#: The carried vectors, in the order a checkpoint lists them.
_CARRIED = ("theta_j", "theta_s", "z", "y", "w", "p", "vmax", "vmin")
#: The optimizer settings of a run made before runs recorded them (plain steps).
_PLAIN_OPTIMIZER = {"optimizer": {"name": "sgd", "spec": "sgd"}, "block_lr": {}}
CONSTANTS_NOTE = (
    "G and L are a-posteriori estimates, not certified constants: G is the running maximum of the "
    "gradient norms evaluated on both trajectories, L the running maximum of |p^T H_JC^k p| of a "
    "warm-started power iteration (one HVP per iteration); both can only underestimate the "
    "constants of Assumption 1, so bound_bk estimates Theorem 3's bound rather than guaranteeing it."
)


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
        name: ``"graph"``, ``"termwise"`` or ``"batched"``.
        method: the concrete HVP method (``"reverse"`` for the graph and termwise engines).
        chunk_size: at most this many products per batch (batched engine).
        terms: the task's loss terms (termwise engine), whose sum is the ``loss`` the points are asked for.
    """

    name: str
    method: str
    chunk_size: int | None = None
    terms: tuple = ()

    def point(self, loss, params: Mapping):
        """The :class:`crosscurv.numeric.point.Point` at ``params`` (the termwise engine sums its ``terms``,
        which add up to ``loss``)."""
        if self.name == "graph":
            return PointCurvature(loss, params)
        if self.name == "termwise":
            return TermwisePoint(self.terms, params)
        return BatchedPoint(loss, params, self.method, self.chunk_size)

    def gradient(self, loss, params: Mapping) -> dict:
        """``grad L(params)`` alone (no graph kept): term by term for the termwise engine, else one backward pass."""
        if self.name == "termwise":
            return TermwisePoint(self.terms, params).grad
        return grad(loss, params)[1]

    def describe(self) -> str:
        if self.name == "graph":
            return "one retained double-backward graph per point"
        if self.name == "termwise":
            return f"double backward term by term, one of the loss's {len(self.terms)} terms' graph at a time"
        return "batched products (crosscurv.numeric.hvp.hvp_batch)"


def choose_engine(task, hvp_method: str = "auto", chunk_size: int | None = None) -> Engine:
    """The engine for ``hvp_method`` (``"auto"``: the termwise engine for a task with loss terms if one
    product works at ``theta^0`` that way, else :func:`crosscurv.numeric.hvp.resolve_method` at ``theta^0``)."""
    if hvp_method not in HVP_METHODS:
        raise ProtocolError(f"unknown HVP method {hvp_method!r} (use {', '.join(HVP_METHODS)})")
    terms = tuple(getattr(task, "loss_terms", None) or ())
    if hvp_method == "auto" and len(terms) > 1:
        try:  # every term twice differentiable by double backward
            point = TermwisePoint(terms, task.params)
            point.hvp(point.grad)
            return Engine("termwise", "reverse", terms=terms)
        except Exception:  # some term has no double derivative: the engines below decide
            pass
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
        if key in _VOLATILE or (key == "threads" and key not in saved):  # older API runs lack it
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
        check_resumable(self.path)
        bad = unreadable_checkpoint(self.checkpoint)
        try:
            ck = torch.load(self.checkpoint, map_location=task.device, weights_only=True)
        except Exception as exc:  # truncated, undecodable, or pickled foreign objects
            raise ResumeError(f"{bad} ({type(exc).__name__}: {one_line(exc)})") from None
        if isinstance(ck, dict) and isinstance(ck.get("format"), int) and ck["format"] < _FORMAT:
            raise ResumeError(f"{self.checkpoint} was written by an older crosscurv (checkpoint format {ck['format']}); "
                              "it cannot be continued: rerun it")
        if not isinstance(ck, dict) or ck.get("format") != _FORMAT:
            raise ResumeError(f"{bad} (unknown format)")
        try:
            _check_vectors(ck["vectors"], task)
            ck["estimates"] = EstimateState.from_state_dict(ck["estimates"])
            for key in ("k", "start", "done", "settings"):
                ck[key]  # noqa: B018 (presence)
            if not isinstance(ck["settings"], dict):
                raise TypeError("settings")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResumeError(f"{bad} (missing or malformed entry {one_line(exc)})") from None
        return ck

    def records_upto(self, k: int) -> list:
        """Keep rows ``1..k`` of ``records.csv`` (a missing file is created) and return them."""
        try:
            check_records_header(self.records)
            if k == 0 and not os.path.exists(self.records):
                RecordWriter(self.records).close()
            truncate_records(self.records, k)
            return read_records(self.records)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ResumeError(f"{self.records} is not a readable crosscurv records file ({type(exc).__name__})") from None


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


# -- the run context --------------------------------------------------------------------
@dataclass
class RunContext:
    """Everything one run's iterations share (instead of long parameter lists).

    ``store`` holds the carried vectors between iterations (:mod:`crosscurv.numeric.offload`);
    ``est`` the scalar state of the estimates (:class:`crosscurv.numeric.estimates.EstimateState`);
    ``rule`` the run's update rule (:mod:`crosscurv.numeric.update_rules`: the paper's plain steps or an optimizer).
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
    rule: UpdateRule = field(default_factory=PlainRule)

    @property
    def jacobi(self) -> DelayPattern:
        return jacobi(self.task.n_blocks)

    @property
    def carried(self) -> tuple:
        """Names of the vectors a checkpoint holds."""
        return _CARRIED + self.rule.carried

    def clock(self) -> float:
        return self.prior_elapsed + time.perf_counter() - self.t0

    # -- checkpoints ----------------------------------------------------------------
    def checkpoint(self, k: int, start: int, done: bool = False) -> None:
        """Atomic checkpoint: ``k`` records are final, the next iteration to run is ``start``."""
        t = time.perf_counter()
        vectors = {name: self.store.fetch(name) for name in self.carried}
        # a vector parked in a file is copied from it (crosscurv.numeric.file_save): its pages are never read
        files = {}
        for name, vec in vectors.items():
            path = getattr(self.store, "file_of", lambda _: None)(name)
            if path is not None and vec:
                files[next(iter(vec.values())).untyped_storage().data_ptr()] = path
        atomic_torch_save(
            {
                "format": _FORMAT,
                "k": k,
                "start": start,
                "done": done,
                "settings": self.settings,
                "vectors": vectors,
                "estimates": self.est.state_dict(),
                "elapsed_s": self.clock(),
            },
            self.run.checkpoint,
            sources=(lambda st: (files[st.data_ptr()], 0) if st.data_ptr() in files else None) if files else None,
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
        cpu = self.task.device.type == "cpu"
        # on the CPU the checkpoint is mapped, not read, and its vectors are copied file to file
        ck = torch.load(self.run.checkpoint, map_location=self.task.device, weights_only=True, mmap=cpu)
        ck["done"] = True
        ck["settings"] = self.settings
        ck["elapsed_s"] = self.clock()
        atomic_torch_save(ck, self.run.checkpoint, sources=mapped_sources(ck, self.run.checkpoint) if cpu else None)

    # -- records ----------------------------------------------------------------------
    def emit(self, k: int, loss_jc: float, loss_s: float, estimates: dict) -> None:
        """Complete the record of iteration ``k`` (``bound_bk`` with the current ``G``, ``L``) and hand it on:
        memory, ``records.csv`` (flushed), the ``on_record`` hook, the progress callback."""
        rec = make_record(k, loss_jc=loss_jc, loss_s=loss_s, bound_bk=self.rule.bound(self.est, self.lr), **estimates)
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
    inside the segment ``theta_JC^k -> theta_S^k``, its ends ``g_JC^k`` and ``g_S^k``), with its error bound
    ``gap_err``, checked against ``loss_s - loss_jc`` by :func:`crosscurv.numeric.gap.reconcile`; where that
    difference alone is within ``2^-10`` of itself the segment is skipped
    (:func:`crosscurv.numeric.gap.plain_suffices`); ``sharpness`` is the power iteration's ``p_k^T H_JC^k p_k``.

    Order (each vector fetched from ``ctx.store`` when used and parked when updated, so that with
    offloading only the vectors in use sit beside a graph):

    1. ``Delta^k = theta_S^k - theta_JC^k`` (parked; ``theta_JC^k`` is kept for the segment under another
       name, without a copy: ``share``);
    2. at ``theta_S^k``: the loss, ``g_S^k`` and the rule's forcing ``M_S (.)`` (the graph there is released
       at once), then the rule's ``S`` step (``theta_S^{k+1}``), while ``g_S^k`` and the forcing are at hand;
       with offloading both are then parked and read back entry by entry at each later use
       (:func:`_between_uses`);
    3. at ``theta_JC^k``: the loss, ``g_JC^k`` (held by the point until it is released; with the termwise
       engine and offloading, parked and read back entry by entry), the recursive estimate and the JC step,
       then the products ``H_JC^k [p, z, y, Delta]``, each consumed before the next (``g.z`` and ``g.y`` from
       the vector fetched for its product; ``z``, ``y`` and ``w`` of ``k + 1`` are formed there, the forcing
       of ``theta_S^k`` being known), the extremes right after the power step, and the graph released
       before ``w`` is formed;
    4. the segment's gradients, the record, and the rule's :meth:`carry` of the scalar states to ``k + 1``.

    Both losses are finite before anything of ``k`` is recorded or carried: a non-finite loss at either
    point stops the run (:class:`_Diverged`, naming every non-finite loss of ``k``).  How the runs step and
    the carried states advance is the run's update rule (``ctx.rule``,
    :mod:`crosscurv.numeric.update_rules`: the paper's plain steps, or a block-separable optimizer); the
    estimates of ``k`` read the same quantities under every rule: ``recursive = g_JC^k . w + q``,
    ``cumulative = g_JC^k . z + z . H z / 2``, ``jc_only = g_JC^k . y + y . H y / 2``, ``q <- Delta . H Delta / 2``.
    """
    S, est, loss, rule = ctx.store, ctx.est, ctx.task.loss, ctx.rule
    last = k == ctx.iters
    record: dict = {}
    meas: dict = {}
    # -- Delta^k -----------------------------------------------------------------------------
    # the measured gap L(theta_S) - L(theta_JC) without cancellation (crosscurv.numeric.gap): its end nodes
    # with g_S^k and g_JC^k, the rest once both losses say whether the segment is needed; Delta^k also
    # serves H_JC^k Delta^k
    delta = tree.sub(S.fetch("theta_s"), S.fetch("theta_j"))
    segment = SegmentGap(delta) if k >= 1 else None
    S.park("delta", delta)
    del delta
    if k >= 1:
        S.share("theta_j", "theta_jk")  # theta_JC^k for the segment (theta_j is parked anew by the JC step)
    # -- theta_S^k ---------------------------------------------------------------------------
    # the graph at theta_S^k serves only the rule's forcing M_S (.): it is released before the S step
    theta_s = S.fetch("theta_s")
    at_s = ctx.engine.point(loss, theta_s)
    loss_s = float(at_s.value)
    if not math.isfinite(loss_s):
        at_s.release()
        del at_s
        if k == 0:
            raise TaskError(f"loss at the initial parameters is not finite ({loss_s})")
        with torch.no_grad():
            loss_jc = float(loss(S.fetch("theta_j")))
        _diverged(k, loss_jc, loss_s)
    gs = at_s.grad
    gs_norm = float(tree.norm(gs))
    force = None if last else rule.s_forcing(ctx, k, at_s, gs)
    at_s.release()
    del at_s
    if not last:
        rule.s_step(ctx, k, theta_s, gs, force, meas)
    del theta_s
    gs = _between_uses(ctx, "gs", gs)
    if force is not None:
        force = _between_uses(ctx, "force", force)
    # -- theta_JC^k --------------------------------------------------------------------------
    theta_j = S.fetch("theta_j")
    at_j = ctx.engine.point(loss, theta_j)
    loss_jc = float(at_j.value)
    if not math.isfinite(loss_jc):
        _diverged(k, loss_jc, loss_s)
    gj = at_j.grad
    # what the error estimates measure at k (crosscurv.numeric.error_estimates); ||g_JC^k||, then ||g_S^k||, feed G
    meas["G"] = est.observe_gradient_norm(float(tree.norm(gj)))
    meas["G_s"] = est.observe_gradient_norm(gs_norm)
    if k >= 1:
        segment.add(0.0, gj, S.fetch("delta"))
        record["recursive"] = float(recursive_estimate(gj, S.fetch("w"), est.q))
    if not last:
        rule.jc_step(ctx, k, at_j, theta_j, gj, meas)
    at_j.grad = _between_uses(ctx, "gj", gj, graph_output=True)
    del gj
    # p, z, y and Delta are only read: z, y and w of k + 1 are formed in their products' tensors
    named = [("p", lambda: S.fetch("p")), ("z", lambda: S.fetch("z")), ("y", lambda: S.fetch("y"))]
    if not last:
        named.append(("delta", lambda: S.fetch("delta")))
    held: dict = {}  # the vector of the product in hand: a hook takes the body's only reference (held.pop)
    for name, held["v"], Hv in _products(at_j, k, named):
        v = held["v"]
        if name == "p":
            S.park("p", est.observe_power(v, Hv))
            record["sharpness"] = est.rayleigh
        elif name == "z":
            meas["Z"] = float(tree.norm(v))
            if k >= 1:
                record["cumulative"] = float(quadratic_from_linear(tree.dot(at_j.grad, v), v, Hv))
            if not last:
                del v
                rule.advance_z(ctx, held.pop("v"), Hv, force)
        elif name == "y":
            meas["Y"] = float(tree.norm(v))
            if k >= 1:
                record["jc_only"] = float(quadratic_from_linear(tree.dot(at_j.grad, v), v, Hv))
            if not last:
                del v
                rule.advance_y(ctx, at_j, held.pop("v"), Hv)
        else:  # delta (k < K), the last product: the graph is released before w is formed
            est.q = 0.5 * tree.dot(v, Hv)
            del v
            at_j.release()
            rule.advance_delta(ctx, at_j, held.pop("v"), Hv, gs, force, meas)
        held.clear()
        v = None
        del Hv
        if name == "p":  # the extremes after the power step, whose p^T H p they fold in, before the other products
            _extremes(ctx, k, at_j, theta_j, record, meas)
    at_j.release()
    del at_j, theta_j, force
    S.park("gj", None)
    # -- the segment and the record ----------------------------------------------------------
    if k >= 1:
        if plain_suffices(loss_s, loss_jc, segment.dtype):
            measured = (math.nan, math.nan)  # far apart: the plain difference alone (crosscurv.numeric.gap.reconcile)
        else:
            delta = S.fetch("delta")
            segment.add(1.0, _whole(S, "gs", gs), delta)
            segment.interior(loss, S.fetch("theta_jk"), delta, lambda q: ctx.engine.gradient(loss, q))
            measured = segment.result()
            del delta
        S.park("theta_jk", None)
        record["gap"], record["gap_err"] = reconcile(*measured, loss_s, loss_jc, segment.dtype)
        rule.error_columns(ctx, record, meas)
        ctx.emit(k, loss_jc, loss_s, record)
    del gs
    for name in ("delta", "gs", "force"):  # no longer needed (gs and force parked by _between_uses)
        S.park(name, None)
    if not last:
        rule.carry(ctx, k, meas)


def _diverged(k: int, loss_jc: float, loss_s: float):
    """Raise :class:`_Diverged` for iteration ``k``, naming each non-finite loss."""
    bad = ", ".join(f"{n} = {v}" for n, v in (("loss_jc", loss_jc), ("loss_s", loss_s)) if not math.isfinite(v))
    raise _Diverged(k, f"diverged at k={k}: {bad}")


def _between_uses(ctx: RunContext, name: str, vector: Mapping, graph_output: bool = False) -> Mapping:
    """``vector`` parked under ``name`` and read back entry by entry at each use, where that saves memory:
    with an offloaded store, unless ``vector`` is the output of a graph still held (a retained graph's
    gradient, ``graph_output``: the graph keeps it alive; the termwise engine holds none); else ``vector``
    itself.  Its readers only read it (an entry written in place would not reach the store)."""
    S = ctx.store
    if not getattr(S, "offloaded", False) or (graph_output and ctx.engine.name != "termwise"):
        return vector
    S.park(name, vector)
    return tree.lazy(vector, lambda n: S.fetch_entry(name, n))


def _whole(S, name: str, vector: Mapping) -> Mapping:
    """``vector`` whole: where :func:`_between_uses` parked it under ``name``, one fetch of it (on the CPU a map
    of its file, cheaper than reading it entry by entry where no graph is alive beside it); else itself."""
    return S.fetch(name) if S.holds(name) else vector


def _extremes(ctx: RunContext, k: int, at_j, theta_j: Mapping, record: dict, meas: dict) -> None:
    """The converged extreme eigenpairs of ``H_JC^k`` (:func:`crosscurv.numeric.estimates.track_extremes`, warm-started from
    the carried ``vmax``, ``vmin``) into the record and ``meas`` (``lam = ||H||``, ``c = ||I - eta H||``)."""
    S, est = ctx.store, ctx.est
    # fetched only if the solve reads them (between solves it returns them unchanged: nothing to park)
    vmax, vmin = (_Parked(S, "vmax"), _Parked(S, "vmin")) if S.holds("vmax") else (None, None)
    prev = None if vmax is None else Extremes(est.lam_max, est.lam_min, vmax, vmin, 0, 0.0, False)
    try:
        ext = track_extremes(at_j.hvp, theta_j, prev, k, seed=int(ctx.settings.get("seed") or 0), store=S)
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
        box = [Hv]
        del Hv  # not held here while the consumer works (between products it may take the extremes)
        yield name, fetched.pop(name), box.pop()
    for name, get in named[len(taken):]:
        v = get()
        yield name, v, tree.zeros_like(v)


# -- summary -------------------------------------------------------------------------
#: ``metrics_note`` of a summary's Section 5.1 metrics.
METRICS_NOTE = (
    "paper Section 5.1; w(x) = JC if x > 0, GS (the scheme S) if x < 0, tie if x == 0; a measured "
    "gap of exactly 0 is in neither n_JC nor n_GS; Correct_K needs equal winners (a zero "
    "estimate only agrees with a zero gap); an iteration with |gap| <= gap_err (the measured gap's "
    "error bound) is undecided: in neither n_JC nor n_GS and left out of Correct_K's denominator"
)
#: ``metrics_note`` of a diverged run, whose ``metrics`` are empty and ``bound_bk_coverage`` null.
DIVERGED_METRICS_NOTE = (
    "none over a diverged run: its last records run into the divergence (losses and estimates "
    "growing without bound); last_finite_state is where it stood, and crosscurv table recomputes "
    "the metrics of the records before the divergence, flagged as such"
)
def _summary(ctx: RunContext, status, message, diverged_at, resumed_from, requested) -> dict:
    metrics, coverage, note = {}, None, METRICS_NOTE
    records = ctx.records
    if status == "diverged":  # the records before a divergence run into it: no metrics over them
        note = DIVERGED_METRICS_NOTE
    elif records:
        metrics, coverage = run_metrics(records_columns(records), ESTIMATES)
    out = {
        "crosscurv_version": crosscurv_version(),
        "status": status,
        "message": message,
        "diverged_at": diverged_at,
        "records": len(records),
        "settings": ctx.settings,
        "metrics": metrics,
        "metrics_note": note,
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
    if status == "diverged":
        out["last_finite_state"] = _last_finite_state(records)
    return out


def _last_finite_state(records) -> dict | None:
    """``{"k", "loss_jc", "loss_s", "gap", "gap_err"}`` of the last record before a divergence
    (``None``: none after ``theta^0``)."""
    if not records:
        return None
    r = records[-1]
    return {key: r.get(key) for key in ("k", "loss_jc", "loss_s", "gap", "gap_err")}


# -- the protocol ------------------------------------------------------------------------
@computes_with_threads
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
        threads: intra-op threads of the call (``None``: ``OMP_NUM_THREADS`` if set, else 1, as the
            command line; :mod:`crosscurv.numeric.threads`); recorded as ``settings["threads"]``.

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
    run_settings.setdefault("threads", torch.get_num_threads())  # the caller's, else the count used

    rule = update_rule(task, setup)
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
        if rule.carried:
            try:
                _check_vectors(ck["vectors"], task, rule.carried)
            except (KeyError, TypeError, ValueError) as exc:
                raise ResumeError(f"{run.checkpoint} is not a readable crosscurv checkpoint (missing or malformed "
                                  f"optimizer state {one_line(exc)})") from None
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
            for name in _CARRIED + rule.carried:
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
            rule.start(store, task.params)
        ctx = RunContext(task, pattern, lr, iters, engine, plan, store, est, run_settings, run=run,
                         every=checkpoint_every, records=records, progress=progress, on_record=on_record,
                         prior_elapsed=prior_elapsed, rule=rule)
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
