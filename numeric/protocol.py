"""The controlled protocol (paper, Section 5.1, "Controlled trajectories").

JC and pattern-``S`` trajectories start from the same ``theta^0`` (the task's
parameters) and take exact full-batch steps (:func:`numeric.steps.scheme_step`)
with a constant learning rate ``eta``, no momentum.  At every iteration
``k = 0..K`` the protocol evaluates

* at ``theta_JC^k``: the loss, ``g_JC^k``, the products
  ``H_JC^k [p_k, z_k, y_k, Delta^k]`` (power-iteration vector, cumulative
  state, JC-only state, trajectory difference) and ``M_S(theta_JC^k) g_JC^k``;
* at ``theta_S^k``: the loss, ``g_S^k`` and ``u^k = M_S(theta_S^k) g_S^k``
  (the products are skipped at ``k = K``),

writes the record of iteration ``k >= 1`` (:mod:`numeric.records`; estimates
of :mod:`numeric.estimates`), then steps both trajectories.  The HVP
``H_JC^k z_k`` serves both the quadratic term of the cumulative estimate at
``k`` and the propagation of ``z`` to ``k + 1``, so a run costs ``O(K)`` HVPs.

Engines (``hvp_method``):

* ``"reverse"``: one :class:`numeric.point.PointCurvature` per point: the
  gradient is built once with ``create_graph=True`` and every product at that
  point is one backward pass through the retained graph (``M_S v``
  differentiates only the rows of each fresh set); one graph is alive at a
  time (:func:`_iterate_point`);
* ``"forward"`` / ``"rof"``: the products at a point in one batched call of
  :func:`numeric.hvp.hvp_batch` (``chunk_size`` caps the batch), the
  gradients by separate backward passes (:func:`_iterate`);
* ``"auto"`` (default): ``"reverse"`` when one double-backward product works
  at ``theta^0``, else ``"forward"``.  On the CPU the graph engine is both the
  faster (``benchmarks/bench_cumulative.py --hvp``) and the leaner one.

Run directory (``out_dir``): ``records.csv`` (one row per iteration, flushed
as it is written), ``summary.json`` (settings, status, metrics, timings) and
``checkpoint.pt``.  The checkpoint is saved atomically at ``k = 0`` and then
every ``checkpoint_every`` records (default 1 for tasks with fewer than 5M
parameters, else 10); it holds exactly what the next iteration needs
(``theta_JC``, ``theta_S``, ``z``, ``y``, the pending recursive term, the power
vector, the ``||u^j||`` history, ``G``, ``L``) and the run's settings.
``resume=True`` checks that the settings match (:class:`ResumeError` names the
first setting that differs), truncates ``records.csv`` to the checkpoint's
``k`` and continues; on the CPU the resumed records are bit-for-bit those of
an uninterrupted run.  Without ``resume`` an ``out_dir`` that already holds a
run is refused (partial output is never overwritten).

Memory (``benchmarks/bench_memory.py``): the protocol carries six
parameter-sized vectors between iterations (``theta_JC``, ``theta_S``, ``z``,
``y``, the pending recursive term ``w`` and the power vector ``p``).  The graph
engine uses them one at a time and, with ``offload`` (default: on for tasks with
at least :data:`OFFLOAD_PARAMS` parameters), parks them off the compute
device between uses (host memory on a GPU, files in the run folder on the
CPU; :mod:`numeric.offload`), so its peak is one retained graph, one product
in flight and two or three vectors: 3.5x the memory of one gradient step on
the paper's ResNet-18 (width 64), where the batched products needed 6-10x.

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
import weakref
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from theory.errors import InputError
from theory.patterns import DelayPattern

from . import tree
from .curvature import masked_products
from .estimates import EstimateState, quadratic_from_linear
from .hvp import HVP_METHODS, grad, hvp, hvp_batch, hvp_choice
from .offload import make_store
from .point import PointCurvature, masked_product_at
from .metrics import bound_coverage, evaluate_columns
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
from .steps import block_keys, check_pattern, scheme_step
from .task import TaskError

__all__ = [
    "ProtocolError",
    "ResumeError",
    "ProtocolResult",
    "DIVERGED_EXIT_CODE",
    "LARGE_MODEL_PARAMS",
    "OFFLOAD_PARAMS",
    "default_checkpoint_every",
    "run_protocol",
    "crosscurv_version",
]

#: Exit code of ``crosscurv run`` for a diverged run.
DIVERGED_EXIT_CODE = 3
#: Tasks with at least this many parameters checkpoint every 10 records by default.
LARGE_MODEL_PARAMS = 5_000_000
#: Tasks with at least this many parameters park their carried vectors between uses by default
#: (numeric.offload; below it the parking costs more time, ~25% at 0.8M parameters, than the memory is worth).
OFFLOAD_PARAMS = 2_000_000

#: Settings that may change between a run and its resumption.
_VOLATILE = ("checkpoint_every", "offload")

CONSTANTS_NOTE = (
    "G and L are a-posteriori estimates, not certified constants: G is the running maximum of the "
    "gradient norms evaluated on both trajectories, L the running maximum of |p^T H_JC^k p| of a "
    "warm-started power iteration (one HVP per iteration); both can only underestimate the "
    "constants of Assumption 1, so bound_bk estimates Theorem 3's bound rather than guaranteeing it."
)


class ProtocolError(InputError):
    """Bad protocol input: learning rate, iterations, HVP method, or an output folder in use."""


class ResumeError(ProtocolError):
    """Nothing to resume, or the checkpoint was written with different settings."""


@dataclass
class ProtocolResult:
    """Outcome of :func:`run_protocol`.

    Attributes:
        status: ``"complete"``, ``"diverged"`` or ``"interrupted"``.
        records: every record ``k = 1..`` (dicts, :data:`numeric.records.FIELDS`).
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


def default_checkpoint_every(task) -> int:
    """1 for tasks with fewer than :data:`LARGE_MODEL_PARAMS` parameters, else 10."""
    return 1 if task.num_params() < LARGE_MODEL_PARAMS else 10


# -- input checks ----------------------------------------------------------------
def _check_lr(lr) -> float:
    try:
        val = float(lr)
    except (TypeError, ValueError):
        raise ProtocolError(f"learning rate must be a number, got {lr!r}") from None
    if not math.isfinite(val) or val <= 0:
        raise ProtocolError(f"learning rate must be a finite number > 0, got {val}")
    return val


def _check_iters(iters) -> int:
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ProtocolError(f"iterations must be an integer >= 1, got {iters!r}")
    return iters


def _jsonable(obj):
    """``obj`` normalised through a JSON round trip (non-JSON values become strings)."""
    return json.loads(json.dumps(obj, default=str))


def _theta_digest(params: Mapping) -> str:
    h = hashlib.sha256()
    for k, v in params.items():
        h.update(k.encode())
        h.update(str(tuple(v.shape)).encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _run_settings(task, pattern, lr, iters, seed, hvp_method, chunk_size, every, extra) -> dict:
    s = dict(_jsonable(extra or {}))
    s.update(
        task=task.name if "task" not in s else s["task"],
        task_info=_jsonable(task.info),
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
        theta0_sha256=_theta_digest(task.params),
    )
    return _jsonable(s)


def _first_difference(saved: Mapping, now: Mapping) -> str | None:
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
        except RecordsError:
            return True

    def create(self) -> None:
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:
            raise ProtocolError(f"cannot create output directory {self.path}: {exc.strerror}") from None

    def load_checkpoint(self, settings: Mapping, device) -> dict:
        if not os.path.isdir(self.path):
            raise ResumeError(f"nothing to resume: {self.path} does not exist")
        if not os.path.exists(self.checkpoint):
            raise ResumeError(f"nothing to resume: {self.path} has no {CHECKPOINT_FILE}")
        try:
            ck = torch.load(self.checkpoint, map_location=device, weights_only=True)
        except Exception as exc:
            raise ResumeError(f"cannot read {self.checkpoint}: {type(exc).__name__}: {exc}") from None
        if not isinstance(ck, dict) or ck.get("format") != 1:
            raise ResumeError(f"{self.checkpoint} is not a crosscurv checkpoint")
        diff = _first_difference(ck["settings"], settings)
        if diff is not None:
            raise ResumeError(f"cannot resume {self.path}: setting {diff} differs")
        return ck


def _save_checkpoint(run: _RunDir, k: int, start: int, settings, theta_j, theta_s, est: EstimateState, done: bool,
                     clock) -> None:
    """Atomic checkpoint: ``k`` records written, the next iteration is ``start``."""
    atomic_torch_save(
        {
            "format": 1,
            "k": k,
            "start": start,
            "done": done,
            "settings": settings,
            "theta_jc": dict(theta_j),  # never modified in place: no copy needed
            "theta_s": dict(theta_s),
            "estimates": est.state_dict(),
            "elapsed_s": clock(),
        },
        run.checkpoint,
    )


# -- summary -------------------------------------------------------------------------
def _summary(settings, status, message, diverged_at, records, est, timing, loss) -> dict:
    metrics, coverage = {}, None
    if records:
        cols = records_columns(records)
        metrics = {name: m.as_dict() for name, m in evaluate_columns(cols, ESTIMATES).items()}
        for m in metrics.values():
            m["jc_hits"], m["s_hits"] = list(m["jc_hits"]), list(m["s_hits"])
        coverage = bound_coverage(cols["gap"], cols["bound_bk"])
    choice = hvp_choice(loss)
    requested = settings.get("hvp", "auto")
    try:
        engine = _engine_used.get(loss)
    except TypeError:
        engine = None
    return {
        "crosscurv_version": crosscurv_version(),
        "status": status,
        "message": message,
        "diverged_at": diverged_at,
        "records": len(records),
        "settings": settings,
        "metrics": metrics,
        "metrics_note": (
            "paper Section 5.1; w(x) = JC if x > 0, GS (the scheme S) if x < 0, tie if x == 0; a measured "
            "gap of exactly 0 is in neither n_JC nor n_GS; Correct_K needs equal winners (a zero "
            "estimate only agrees with a zero gap)"
        ),
        "bound_bk_coverage": coverage,
        "constants": {"G": est.G, "L": est.L, "note": CONSTANTS_NOTE},
        "hvp": {
            "requested": requested,
            "used": engine or ((choice["auto"] or "forward") if requested == "auto" else requested),
            "engine": ("one retained double-backward graph per point" if engine == "reverse"
                       else "batched products (numeric.hvp.hvp_batch)"),
            "no_vmap": choice["no_vmap"],
        },
        "timing": timing,
    }


# -- the protocol ------------------------------------------------------------------------
def run_protocol(
    task,
    pattern: DelayPattern,
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
) -> ProtocolResult:
    """Run JC and pattern ``S`` side by side for ``iters`` iterations (module docstring).

    Args:
        task: a :class:`numeric.Task`; ``task.params`` is ``theta^0``.
        pattern: acyclic delay pattern over ``task.n_blocks`` blocks.
        lr: constant learning rate ``eta > 0``.
        iters: number of iterations ``K >= 1``.
        out_dir: run directory (``None``: records kept in memory only).
        resume: continue the run in ``out_dir`` from its checkpoint.
        hvp_method: ``"auto"``, ``"forward"`` or ``"reverse"`` (:mod:`numeric.hvp`).
        seed: seed of the power-iteration start vector (recorded).
        settings: extra JSON-able settings recorded in the summary and checked
            on resume (task spec, preset, sizes...).
        checkpoint_every: records between checkpoints (default
            :func:`default_checkpoint_every`).
        chunk_size: at most this many HVPs per ``vmap`` chunk (memory cap).
        progress: ``progress(k, K)`` after each record.
        on_record: ``on_record(record)`` after each record is written (before
            its checkpoint); an exception there interrupts the run.
        offload: park the carried vectors off the compute device between
            their uses (:mod:`numeric.offload`; graph engine only; records are
            unchanged).  ``None``: on for tasks with at least
            :data:`OFFLOAD_PARAMS` parameters.

    Returns:
        A :class:`ProtocolResult` (``status`` ``"complete"`` or ``"diverged"``).

    Raises:
        ProtocolError, ResumeError, TaskError, PatternError: bad input (one line).
        KeyboardInterrupt and any exception from ``on_record`` propagate after
        ``summary.json`` is written with status ``"interrupted"``.
    """
    lr = _check_lr(lr)
    iters = _check_iters(iters)
    check_pattern(task, pattern)
    if hvp_method not in HVP_METHODS:
        raise ProtocolError(f"unknown HVP method {hvp_method!r} (use {', '.join(HVP_METHODS)})")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ProtocolError(f"HVP chunk size must be an integer >= 1, got {chunk_size!r}")
    if offload is not None and not isinstance(offload, bool):
        raise ProtocolError(f"offload must be True, False or None, got {offload!r}")
    use_offload = task.num_params() >= OFFLOAD_PARAMS if offload is None else offload
    every = default_checkpoint_every(task) if checkpoint_every is None else int(checkpoint_every)
    if every < 1:
        raise ProtocolError(f"checkpoint interval must be >= 1, got {checkpoint_every!r}")
    run_settings = _run_settings(task, pattern, lr, iters, seed, hvp_method, chunk_size, every, settings)
    run_settings["offload"] = use_offload

    run = _RunDir(out_dir) if out_dir is not None else None
    if run is not None and not resume:
        run.check_fresh()
    # decided before the run's vectors exist, so that the probe's graph is not on top of them
    engine = _choose_engine(task, hvp_method)
    records: list[dict] = []
    prior_elapsed = 0.0
    if run is not None and resume:
        ck = run.load_checkpoint(run_settings, task.device)
        k0 = int(ck["k"])
        if k0 == 0 and not os.path.exists(run.records):
            RecordWriter(run.records).close()
        truncate_records(run.records, k0)
        records = read_records(run.records)
        theta_j, theta_s = dict(ck["theta_jc"]), dict(ck["theta_s"])
        est = EstimateState.from_state_dict(ck["estimates"])
        prior_elapsed = float(ck.get("elapsed_s", 0.0))
        done = bool(ck["done"])
        start = int(ck["start"])
        del ck  # its vectors now live in theta_j, theta_s and est only
    else:
        if resume:
            raise ResumeError("resume needs an output directory")
        task.check_loss()  # TaskError unless a finite scalar
        k0 = 0
        theta_j = tree.clone(task.params)
        theta_s = tree.clone(task.params)
        est = EstimateState(task.params, seed)
        done = False
        start = 0
        if run is not None:
            run.create()
            _save_checkpoint(run, 0, 0, run_settings, theta_j, theta_s, est, False, lambda: 0.0)

    t0 = time.perf_counter()
    computed = [0]

    def clock() -> float:
        return prior_elapsed + time.perf_counter() - t0

    def timing() -> dict:
        el = time.perf_counter() - t0
        return {
            "resumed_from": k0 if resume else None,
            "iterations_this_session": computed[0],
            "elapsed_s_this_session": el,
            "iterations_per_s": computed[0] / el if el > 0 and computed[0] else None,
            "elapsed_s_total": clock(),
        }

    writer = None
    if run is not None:
        writer = RecordWriter(run.records, append=resume)
        write_summary(run.summary, _summary(run_settings, "running", "running", None, records, est, timing(), task.loss))

    status, message, diverged_at = "complete", "", None
    # the iterates travel in a dict the engine empties: arguments held by this frame could not be freed
    carry = {"theta_j": theta_j, "theta_s": theta_s}
    del theta_j, theta_s
    try:
        if not done:
            if engine == "reverse":
                store = make_store(use_offload, task.device, run.path if run is not None else None)
                try:
                    status, message, diverged_at = _iterate_point(
                        task, pattern, lr, iters, start, carry, est,
                        records, writer, run, run_settings, every, clock, computed, progress, on_record, store,
                    )
                finally:
                    store.close()
            else:
                status, message, diverged_at = _iterate(
                    task, pattern, lr, iters, start, carry, est, hvp_method, chunk_size,
                    records, writer, run, run_settings, every, clock, computed, progress, on_record,
                )
        if status == "complete":
            message = f"complete: {len(records)} iterations"
    except BaseException as exc:
        if run is not None:
            note = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"interrupted: {type(exc).__name__}: {exc}"
            write_summary(run.summary, _summary(run_settings, "interrupted", note, None, records, est, timing(), task.loss))
        raise
    finally:
        if writer is not None:
            writer.close()
    if status == "diverged" and run is not None:
        message += f"; {len(records)} records kept in {run.records}"
    summary = _summary(run_settings, status, message, diverged_at, records, est, timing(), task.loss)
    if run is not None:
        write_summary(run.summary, summary)
    return ProtocolResult(status, records, summary, message, diverged_at, out_dir)


def _emit(k, iters, lj_f, ls_f, est_k, est, lr, records, computed, writer, on_record, progress) -> None:
    """Complete the record of iteration ``k`` (``bound_bk`` with the current ``G``, ``L``) and hand it on:
    memory, ``records.csv`` (flushed), the ``on_record`` hook, the progress callback."""
    est_k["bound_bk"] = est.bound(lr)
    rec = make_record(k, loss_jc=lj_f, loss_s=ls_f, gap=ls_f - lj_f, **est_k)
    records.append(rec)
    computed[0] += 1
    if writer is not None:
        writer.write(rec)
    if on_record is not None:
        on_record(rec)
    if progress is not None:
        progress(k, iters)


def _iterate(task, pattern, lr, iters, start, carry, est, method, chunk, records, writer, run,
             settings, every, clock, computed, progress, on_record):
    """Iterations ``start..iters``; returns ``(status, message, diverged_at)``.

    ``carry`` holds ``theta_JC`` and ``theta_S`` under ``"theta_j"`` / ``"theta_s"``
    and is emptied (so that the caller holds no stale iterate).

    The four products ``H_JC^k [p, z, y, Delta]`` are consumed in that order,
    each used (estimate term, contraction) and released before the next; with
    ``chunk == 1`` they are also *computed* one at a time (:func:`numeric.hvp.hvp`,
    nothing stacked), the lean-memory setting of benchmarks/bench_memory.py.
    Every other large temporary is released as soon as it is used.
    """
    loss = task.loss
    theta_j, theta_s = carry.pop("theta_j"), carry.pop("theta_s")
    for k in range(start, iters + 1):
        lj, gj = grad(loss, theta_j)
        ls, gs = grad(loss, theta_s)
        lj_f, ls_f = float(lj), float(ls)
        if not (math.isfinite(lj_f) and math.isfinite(ls_f)):
            if k == 0:
                raise TaskError(f"loss at the initial parameters is not finite ({lj_f})")
            bad = ", ".join(f"{n} = {v}" for n, v in (("loss_jc", lj_f), ("loss_s", ls_f)) if not math.isfinite(v))
            return "diverged", f"diverged at k={k}: {bad}", k
        est.observe_gradients(gj, gs)
        last = k == iters
        est_k: dict = {}
        if k >= 1:
            # uses w, q of k - 1 (before contract_delta); w is released unless the run stops here
            est_k["recursive"] = est.recursive(gj, release=not last)
        # Delta^0 = z_0 = y_0 = 0: at k = 0 only the power vector needs a product
        names = ["p"] if k == 0 else (["p", "z", "y"] if last else ["p", "z", "y", "delta"])
        delta = None  # formed only when its product is due

        def current(name):
            nonlocal delta
            if name == "delta":
                delta = tree.sub(theta_s, theta_j)
                return delta
            return getattr(est, name)

        if chunk == 1:
            products = ((n, hvp(loss, theta_j, current(n), method)) for n in names)
        else:
            products = zip(names, hvp_batch(loss, theta_j, [current(n) for n in names], method, chunk))
        for name, Hv in products:
            if name == "p":
                est.observe_power(Hv)
            elif name == "z":
                est_k["cumulative"] = est.cumulative(gj, Hv)
                if not last:
                    est.contract_z(Hv, lr)
            elif name == "y":
                est_k["jc_only"] = est.jc_only(gj, Hv)
                if not last:
                    est.contract_y(Hv, lr)
            else:
                est.contract_delta(delta, Hv, lr)
            del Hv
        del products
        if k == 0:
            zero = tree.zeros_like(theta_j)
            est.contract_delta(zero, zero, lr)
            est.contract_z(zero, lr)
            est.contract_y(zero, lr)
            del zero
        del delta
        if k >= 1:
            _emit(k, iters, lj_f, ls_f, est_k, est, lr, records, computed, writer, on_record, progress)
        if last:
            if run is not None:
                _save_checkpoint(run, k, k + 1, settings, theta_j, theta_s, est, True, clock)
            break
        (u,) = masked_products(task, theta_s, pattern, [gs], method, chunk)
        del gs
        est.force_s(u, lr)
        del u
        (m_jc,) = masked_products(task, theta_j, pattern, [gj], method, chunk)
        est.force_jc(m_jc, lr)
        del m_jc
        # JC step theta - eta g: the expression numeric.steps.scheme_step uses for an empty
        # pattern, on the same gradient, so it equals scheme_step(task, theta, jacobi) bit for bit.
        theta_j = {n: theta_j[n] - lr * gj[n] for n in theta_j}
        del gj
        theta_s = scheme_step(task, theta_s, pattern, lr)
        if run is not None and k % every == 0:
            _save_checkpoint(run, k, k + 1, settings, theta_j, theta_s, est, False, clock)
    return "complete", "", None


# -- the one-graph-per-point engine ----------------------------------------------------------
_engine_used: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _choose_engine(task, method: str) -> str:
    """``"reverse"`` (one retained double-backward graph per point) or ``"batched"``.

    ``"reverse"`` asks for the graph engine, ``"forward"`` / ``"rof"`` for the
    batched products of :func:`numeric.hvp.hvp_batch`.  ``"auto"`` takes the
    graph engine when one product by double backward works at ``theta^0``
    (it shares the gradient at each point and is the cheapest in time and
    memory on the CPU, benchmarks/bench_hvp.py and bench_memory.py), and
    otherwise the batched forward-over-reverse products.  The probe costs one
    gradient and one product per run (``k = 0`` builds its own graph again:
    keeping the probe's would put it on top of the run's first vectors).
    """
    if method == "auto":
        try:
            point = PointCurvature(task.loss, task.params)
            point.hvp(point.grad)
            engine = "reverse"
        except Exception:  # no double backward for some kernel: forward-over-reverse it is
            engine = "batched"
    else:
        engine = "reverse" if method == "reverse" else "batched"
    try:
        _engine_used[task.loss] = "reverse" if engine == "reverse" else None
    except TypeError:
        pass
    return engine


_STATE = ("z", "y", "w", "p")


def _park_all(est: EstimateState, store) -> None:
    for name in _STATE:
        store.park(name, getattr(est, name))
        setattr(est, name, None)


def _fetch_all(est: EstimateState, store) -> None:
    for name in _STATE:
        setattr(est, name, store.fetch(name))


def _iterate_point(task, pattern, lr, iters, start, carry, est, records, writer, run,
                   settings, every, clock, computed, progress, on_record, store):
    """Iterations ``start..iters`` with every product at a point on one retained graph.

    Per iteration, a :class:`numeric.point.PointCurvature` at ``theta_JC^k``
    gives ``L`` and ``g_JC^k``; the inner products with ``g_JC^k`` (``w``,
    ``z``, ``y``), the masked product ``M_S(theta_JC^k) g_JC^k`` (rows of each
    fresh set only) and the JC step are taken first, so the gradient leaves
    before the other products (``p``, ``z``, ``y``, ``Delta``), each consumed
    and dropped before the next; the graph is released; then one at
    ``theta_S^k`` gives ``L``, ``g_S^k`` and ``u^k = M_S(theta_S^k) g_S^k``.
    Only one graph is alive at a time, and every carried vector (``theta_JC``,
    ``theta_S``, ``z``, ``y``, ``w``, ``p``, ``M_S g_JC``) waits in ``store``
    between its uses (:mod:`numeric.offload`): with offloading, only the vector
    in use sits beside the graph.  The estimates are the expressions of
    :func:`_iterate` (only the round-off of the products differs).
    """
    loss = task.loss
    keys = block_keys(task)
    _park_all(est, store)
    store.park("theta_j", carry.pop("theta_j"))
    store.park("theta_s", carry.pop("theta_s"))

    def checkpoint(k, start_next, done):
        _fetch_all(est, store)
        _save_checkpoint(run, k, start_next, settings, store.fetch("theta_j"), store.fetch("theta_s"), est, done,
                         clock)
        _park_all(est, store)

    for k in range(start, iters + 1):
        last = k == iters
        # -- theta_JC^k ------------------------------------------------------------------
        theta_j = store.fetch("theta_j")
        at_j = PointCurvature(loss, theta_j)
        lj_f = float(at_j.value)
        if not math.isfinite(lj_f):
            if k == 0:
                raise TaskError(f"loss at the initial parameters is not finite ({lj_f})")
            with torch.no_grad():
                ls_f = float(loss(store.fetch("theta_s")))
            bad = ", ".join(f"{n} = {v}" for n, v in (("loss_jc", lj_f), ("loss_s", ls_f)) if not math.isfinite(v))
            return "diverged", f"diverged at k={k}: {bad}", k
        gj = at_j.grad
        est.observe_gradients(gj)
        est_k: dict = {}
        # The terms linear in g_JC^k first (quadratic_estimate split by quadratic_from_linear), so that
        # g_JC^k is gone before any product: z and y are fetched twice per iteration (free when they
        # stay resident, two file reads when offloaded), the price of one vector less at the peak.
        if k >= 1:
            est.w = store.fetch("w")
            est_k["recursive"] = est.recursive(gj)
            est.w = None
            gz = tree.dot(gj, store.fetch("z"))
            gy = tree.dot(gj, store.fetch("y"))
        if not last:
            store.park("m_jc", masked_product_at(at_j, keys, pattern, gj))
            # the JC step theta - eta g: the expression numeric.steps.scheme_step uses for an empty pattern
            store.park("theta_j", {n: theta_j[n] - lr * gj[n] for n in theta_j})
        del gj

        def H(v):  # H_JC^k v; at k = 0 every vector it meets (z, y, Delta) is exactly zero
            return at_j.hvp(v) if k >= 1 else tree.zeros_like(v)

        est.p = store.fetch("p")
        est.observe_power(at_j.hvp(est.p))
        store.park("p", est.p)
        est.p = None
        est.z = store.fetch("z")
        Hz = H(est.z)
        if k >= 1:
            est_k["cumulative"] = float(quadratic_from_linear(gz, est.z, Hz))
        if not last:
            est.contract_z(Hz, lr)
            store.park("z", est.z)
        del Hz
        est.z = None
        est.y = store.fetch("y")
        Hy = H(est.y)
        if k >= 1:
            est_k["jc_only"] = float(quadratic_from_linear(gy, est.y, Hy))
        if not last:
            est.contract_y(Hy, lr)
            del Hy
            est.force_jc(store.fetch("m_jc"), lr)
            store.park("m_jc", None)
            store.park("y", est.y)
        else:
            del Hy
        est.y = None
        if not last:
            delta = tree.sub(store.fetch("theta_s"), theta_j)
            Hd = H(delta)
            est.contract_delta(delta, Hd, lr)
            del delta, Hd
            store.park("w", est.w)
            est.w = None
        at_j.release()
        del at_j, theta_j

        # -- theta_S^k -------------------------------------------------------------------
        theta_s = store.fetch("theta_s")
        at_s = PointCurvature(loss, theta_s)
        ls_f = float(at_s.value)
        if not math.isfinite(ls_f):
            return "diverged", f"diverged at k={k}: loss_s = {ls_f}", k
        gs = at_s.grad
        est.observe_gradients(gs)
        if k >= 1:
            _emit(k, iters, lj_f, ls_f, est_k, est, lr, records, computed, writer, on_record, progress)
        if last:
            del at_s, gs, theta_s
            if run is not None:
                checkpoint(k, k + 1, True)
            break
        u = masked_product_at(at_s, keys, pattern, gs)
        at_s.release()
        del at_s, gs
        est.w, est.z = store.fetch("w"), store.fetch("z")
        est.force_s(u, lr)
        del u
        store.park("w", est.w)
        store.park("z", est.z)
        est.w = est.z = None
        store.park("theta_s", scheme_step(task, theta_s, pattern, lr))
        del theta_s
        if run is not None and k % every == 0:
            checkpoint(k, k + 1, False)
    return "complete", "", None
