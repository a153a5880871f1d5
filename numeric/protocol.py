"""The controlled protocol (paper, Section 5.1, "Controlled trajectories").

JC and pattern-``S`` trajectories start from the same ``theta^0`` (the task's parameters) and take
exact full-batch steps (:func:`crosscurv.numeric.steps.scheme_step`) with a constant learning rate
``eta``, no momentum (the paper's setting; with ``optimizer`` / ``block_lr`` both runs use a
block-separable optimizer from zero state and the estimates are its generalizations, see
:func:`run_protocol`). How the runs step and the carried states advance is the run's update rule
(:mod:`crosscurv.numeric.update_rules`: the paper's plain steps, or the optimizer). Iteration ``k =
0..K`` is one body (:func:`_iteration`) over the per-point interface of
:mod:`crosscurv.numeric.point` (value, gradient, ``H v``, ``M_S v``):

* at ``theta_S^k``: the loss, ``g_S^k`` and ``u^k = M_S(theta_S^k) g_S^k``, then the ``S`` run's
  step (the scheme step reuses ``g_S^k`` for the blocks with an empty fresh set);
* at ``theta_JC^k``: the loss, ``g_JC^k``, ``M_S(theta_JC^k) g_JC^k`` and the products ``H_JC^k
  [p_k, z_k, y_k, Delta^k]`` (power-iteration vector, cumulative state, JC-only state, trajectory
  difference), the JC run's step.

The paper's estimates observe the iteration
(:class:`crosscurv.numeric.paper_estimates.PaperEstimates`): they are handed ``g_JC^k`` and each
product as the body takes it, before the body advances the states in the product's tensors, so that
``H_JC^k z_k`` serves both the cumulative estimate at ``k`` and ``z_{k+1}`` and a run costs ``O(K)``
HVPs. The record of ``k >= 1`` (:mod:`crosscurv.numeric.records`) adds the measured gap and the
estimates' error estimates (:mod:`crosscurv.numeric.error_estimates`, from ``g_S^k - g_JC^k - H_JC^k
Delta^k`` and the two steps' remainders, no extra product). At ``k = K`` the products that only
serve ``k + 1`` are skipped.

The products are taken by the run's engine (:mod:`crosscurv.numeric.engine`: one retained graph,
term by term, or batched), chosen once per run.  ``M_S v`` follows a
:class:`crosscurv.numeric.curvature.MaskedProductPlan` (one product per fresh block or per fresh
set, whichever needs fewer; recorded).

The carried vectors (``theta_JC``, ``theta_S``, ``z``, ``y``, the pending recursive term ``w``, the
power vector ``p``, the extreme eigenvectors ``vmax``, ``vmin``, ``M_S g_JC``, and within an
iteration ``g_JC^k`` and ``g_JC^k + H_JC^k Delta^k`` for the error estimates) always live in one
store (:mod:`crosscurv.numeric.offload`): resident, or parked off the compute device between uses
when the estimated footprint does not fit comfortably in the available memory
(:func:`crosscurv.numeric.offload.should_offload`) or when asked.

Run directory (``out_dir``): ``records.csv`` (one row per iteration, flushed as it is written),
``summary.json`` (settings, status, metrics, timings) and ``checkpoint.pt``, kept by the trajectory
runner (:mod:`crosscurv.numeric.trajectory`: checkpoint cadence, resume, extension to a larger
``iters``, settings comparison).  The protocol's checkpoint holds exactly what the next iteration
needs (the carried vectors, with an optimizer both runs' states and the estimates' state
differences, ``q``, the ``||u^j||`` history, ``G``, ``L``).  On the CPU the resumed records are bit
for bit those of an uninterrupted run.

Divergence: a non-finite loss at iteration ``k``, or one raising outside its domain there, stops the
run with status ``"diverged"`` (records ``1..k-1`` stay on disk); the CLI exits with code 3.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from crosscurv.theory.patterns import DelayPattern, jacobi

from . import tree
from .curvature import MaskedProductPlan, masked_product_plan
from .engine import Engine, choose_engine
from .estimates import EstimateState, init_power_vector
from .gap import SegmentGap, plain_suffices, reconcile
from .hvp import HVP_METHODS
from .offload import make_store, should_offload
from .optimizers import optimizer_setup
from .paper_estimates import PaperEstimates
from .protocol_checks import ProtocolError, check_iters, check_lr
from .protocol_summary import crosscurv_version, protocol_summary
from .records import (FIELDS, RECORDS_FILE, SUMMARY_FILE, RecordWriter, make_record, read_records,
                      truncate_records, write_summary)
from .run_folder import ResumeError, check_records_header, one_line, unreadable_checkpoint
from .steps import check_pattern
from .task import TaskError
from .threads import computes_with_threads
from .trajectory import (CHECKPOINT_SECONDS, Diverged, RecordsKind, Run, RunFolder, RunOptions,
                         SettingsChangedError, check_resume_settings, diverged_outside_domain,
                         jsonable, outside_domain, run_settings, theta_digest, with_threads)
from .update_rules import PlainRule, UpdateRule, update_rule

__all__ = [
    "ProtocolError", "ResumeError", "SettingsChangedError", "ProtocolResult", "RunOptions",
    "Engine", "choose_engine", "DIVERGED_EXIT_CODE", "CHECKPOINT_SECONDS", "run_protocol",
    "check_lr", "check_iters", "jsonable", "theta_digest", "crosscurv_version",
]

#: Exit code of ``crosscurv run`` for a diverged run.
DIVERGED_EXIT_CODE = 3
#: The carried vectors, in the order a checkpoint lists them.
_CARRIED = ("theta_j", "theta_s", "z", "y", "w", "p", "vmax", "vmin")


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


# -- settings ----------------------------------------------------------------------------
def _run_settings(task, pattern, lr, iters, seed, hvp_method, chunk_size, every, extra,
                  setup) -> dict:
    extra = {**jsonable(extra or {}), **setup.settings()}
    return run_settings(task, lr, iters, seed, hvp_method, extra, {"pattern": pattern.to_dict()},
                        {"hvp_chunk_size": chunk_size, "checkpoint_every": every})


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


def _keep_records(path: str, k: int) -> list:
    """Rows ``1..k`` of ``records.csv`` kept (a missing file is created) and returned."""
    try:
        check_records_header(path)
        if k == 0 and not os.path.exists(path):
            RecordWriter(path).close()
        truncate_records(path, k)
        return read_records(path)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ResumeError(f"{path} is not a readable crosscurv records file "
                          f"({type(exc).__name__})") from None


#: The protocol's records: one row per iteration, :data:`crosscurv.numeric.records.FIELDS`.
RECORDS = RecordsKind(FIELDS, lambda rec: [rec], _keep_records)


# -- the run context --------------------------------------------------------------------
@dataclass
class RunContext:
    """The protocol's body for the trajectory runner (:mod:`crosscurv.numeric.trajectory`): what one
    run's iterations share.

    ``store`` holds the carried vectors between iterations (:mod:`crosscurv.numeric.offload`);
    ``est`` the scalar state of the estimates (:class:`crosscurv.numeric.estimates.EstimateState`);
    ``rule`` the run's update rule (:mod:`crosscurv.numeric.update_rules`: the paper's plain steps
    or an optimizer).
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
    rule: UpdateRule = field(default_factory=PlainRule)
    requested: str = "auto"
    run: Run | None = None
    estimates: PaperEstimates = field(init=False)

    def __post_init__(self):
        self.estimates = PaperEstimates(self)

    @property
    def jacobi(self) -> DelayPattern:
        return jacobi(self.task.n_blocks)

    @property
    def carried(self) -> tuple:
        """Names of the vectors a checkpoint holds."""
        return _CARRIED + self.rule.carried

    # -- the runner's interface -----------------------------------------------------------
    def iteration(self, k: int, run: Run) -> None:
        self.run = run
        _iteration(self, k)

    def vectors(self) -> dict:
        return {name: self.store.fetch(name) for name in self.carried}

    def state(self) -> dict:
        return {"estimates": self.est.state_dict()}

    def sources(self, vectors: Mapping):
        """A vector parked in a file is copied from it (:mod:`crosscurv.numeric.file_save`): its
        pages are never read."""
        files = {}
        for name, vec in vectors.items():
            path = getattr(self.store, "file_of", lambda _: None)(name)
            if path is not None and vec:
                files[next(iter(vec.values())).untyped_storage().data_ptr()] = path
        if not files:
            return None
        return lambda st: (files[st.data_ptr()], 0) if st.data_ptr() in files else None

    def summary(self, run: Run, status: str, message: str, diverged_at) -> dict:
        return protocol_summary(self, run, status, message, diverged_at)

    def emit(self, k: int, loss_jc: float, loss_s: float, estimates: dict) -> None:
        """The record of iteration ``k`` (``bound_bk`` with the current ``G``, ``L``) to the
        runner."""
        bound = self.rule.bound(self.est, self.lr)
        rec = make_record(k, loss_jc=loss_jc, loss_s=loss_s, bound_bk=bound, **estimates)
        self.run.emit(k, rec)


# -- one iteration -----------------------------------------------------------------------
def _iteration(ctx: RunContext, k: int) -> None:
    """Iteration ``k``: the record of ``k`` (``k >= 1``) and, unless ``k = K``, the state of ``k +
    1``.

    The record's ``gap`` is the segment integral of :class:`crosscurv.numeric.gap.SegmentGap` (three
    gradients inside the segment ``theta_JC^k -> theta_S^k``, its ends ``g_JC^k`` and ``g_S^k``),
    with its error bound ``gap_err``, checked against ``loss_s - loss_jc`` by
    :func:`crosscurv.numeric.gap.reconcile`; where that difference alone is within ``2^-10`` of
    itself the segment is skipped (:func:`crosscurv.numeric.gap.plain_suffices`).

    Order (each vector fetched from ``ctx.store`` when used and parked when updated, so that with
    offloading only the vectors in use sit beside a graph):

    1. ``Delta^k = theta_S^k - theta_JC^k`` (parked; ``theta_JC^k`` is kept for the segment under
       another name, without a copy: ``share``);
    2. at ``theta_S^k``: the loss, ``g_S^k`` and the rule's forcing ``M_S (.)`` (the graph there is
       released at once), then the rule's ``S`` step (``theta_S^{k+1}``), while ``g_S^k`` and the
       forcing are at hand; with offloading both are then parked and read back entry by entry at
       each later use (:func:`_between_uses`);
    3. at ``theta_JC^k``: the loss, ``g_JC^k`` (held by the point until it is released; with the
       termwise engine and offloading, parked and read back entry by entry), the recursive estimate
       and the JC step, then the products ``H_JC^k [p, z, y, Delta]``, each consumed before the next
       (``g.z`` and ``g.y`` from the vector fetched for its product; ``z``, ``y`` and ``w`` of ``k +
       1`` are formed there, the forcing of ``theta_S^k`` being known), the extremes right after the
       power step, and the graph released before ``w`` is formed;
    4. the segment's gradients, the record, and the rule's :meth:`carry` of the scalar states to ``k
       + 1``.

    Both losses are finite before anything of ``k`` is recorded or carried: a non-finite loss at
    either point stops the run (:class:`crosscurv.numeric.trajectory.Diverged`, naming every
    non-finite loss of ``k``).  How the runs step and the carried states advance is the run's update
    rule (``ctx.rule``, :mod:`crosscurv.numeric.update_rules`: the paper's plain steps, or a
    block-separable optimizer); the estimates of ``k`` (``ctx.estimates``,
    :mod:`crosscurv.numeric.paper_estimates`) read the same quantities under every rule.
    """
    S, rule = ctx.store, ctx.rule
    last = k == ctx.iters
    record: dict = {}
    meas: dict = {}
    # -- Delta^k -----------------------------------------------------------------------------
    # the measured gap L(theta_S) - L(theta_JC) without cancellation (crosscurv.numeric.gap): its
    # end nodes with g_S^k and g_JC^k, the rest once both losses say whether the segment is needed;
    # Delta^k also serves H_JC^k Delta^k
    delta = tree.sub(S.fetch("theta_s"), S.fetch("theta_j"))
    segment = SegmentGap(delta) if k >= 1 else None
    S.park("delta", delta)
    del delta
    if k >= 1:
        # theta_JC^k for the segment (theta_j is parked anew by the JC step)
        S.share("theta_j", "theta_jk")
    loss_s, gs, gs_norm, force = _s_point(ctx, k, last, meas)
    # -- theta_JC^k --------------------------------------------------------------------------
    theta_j = S.fetch("theta_j")
    with diverged_outside_domain(k, "at theta_JC", initial=k == 0):
        at_j = ctx.engine.point(ctx.task.loss, theta_j)
    loss_jc = float(at_j.value)
    if not math.isfinite(loss_jc):
        _diverged(k, loss_jc, loss_s)
    gj = at_j.grad
    ctx.estimates.gradients(k, gj, gs_norm, record, meas)
    if k >= 1:
        segment.add(0.0, gj, S.fetch("delta"))
    if not last:
        rule.jc_step(ctx, k, at_j, theta_j, gj, meas)
    at_j.grad = _between_uses(ctx, "gj", gj, graph_output=True)
    del gj
    # p, z, y and Delta are only read: z, y and w of k + 1 are formed in their products' tensors
    named = [("p", lambda: S.fetch("p")), ("z", lambda: S.fetch("z")), ("y", lambda: S.fetch("y"))]
    if not last:
        named.append(("delta", lambda: S.fetch("delta")))
    _jc_products(ctx, k, last, at_j, theta_j, named, gs, force, record, meas)
    at_j.release()
    del at_j, theta_j, force
    S.park("gj", None)
    if k >= 1:
        _segment_record(ctx, k, segment, loss_s, loss_jc, gs, record, meas)
    del gs
    for name in ("delta", "gs", "force"):  # no longer needed (gs and force parked by _between_uses)
        S.park(name, None)
    if not last:
        rule.carry(ctx, k, meas)


def _s_point(ctx: RunContext, k: int, last: bool, meas: dict):
    """At ``theta_S^k``: ``(loss_S^k, g_S^k, ||g_S^k||, forcing)`` and, unless ``last``, the rule's
    ``S`` step. The graph there serves only the rule's forcing ``M_S (.)``: it is released before
    the step; ``g_S^k`` and the forcing are returned as :func:`_between_uses` keeps them."""
    S, loss, rule = ctx.store, ctx.task.loss, ctx.rule
    theta_s = S.fetch("theta_s")
    with diverged_outside_domain(k, "at theta_S", initial=k == 0):
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
        with diverged_outside_domain(k, "inside the S step from theta_S^k"):
            rule.s_step(ctx, k, theta_s, gs, force, meas)
    del theta_s
    gs = _between_uses(ctx, "gs", gs)
    if force is not None:
        force = _between_uses(ctx, "force", force)
    return loss_s, gs, gs_norm, force


def _jc_products(ctx: RunContext, k: int, last: bool, at_j, theta_j, named, gs, force, record: dict,
                 meas: dict) -> None:
    """The products ``H_JC^k [p, z, y, Delta]`` (``named``), each consumed before the next: first by
    the paper's estimates (``ctx.estimates``: the power step and the extremes, the cumulative and
    JC-only estimates, ``q``), then (unless ``last``) by the rule, which forms ``z``, ``y`` and
    ``w`` of ``k + 1`` in their products' tensors."""
    rule = ctx.rule
    # the vector of the product in hand: a hook takes the body's only reference (held.pop)
    held: dict = {}
    for name, held["v"], Hv in _products(at_j, k, named):
        ctx.estimates.product(k, name, held["v"], Hv, at_j.grad, record, meas)
        if name == "delta":  # the last product (k < K): the graph is released before w is formed
            at_j.release()
        if name == "z" and not last:
            rule.advance_z(ctx, held.pop("v"), Hv, force)
        elif name == "y" and not last:
            rule.advance_y(ctx, at_j, held.pop("v"), Hv)
        elif name == "delta":
            rule.advance_delta(ctx, at_j, held.pop("v"), Hv, gs, force, meas)
        held.clear()
        del Hv
        # the extremes after the power step, whose p^T H p they fold in, before the other products
        if name == "p":
            ctx.estimates.extremes(k, at_j, theta_j, record, meas)


def _segment_record(ctx: RunContext, k: int, segment, loss_s: float, loss_jc: float, gs,
                    record: dict, meas: dict) -> None:
    """The measured gap of ``k >= 1`` (the segment's interior where the plain difference does not
    suffice, and the loss is defined along it), the error columns, and the record to the runner."""
    S, loss = ctx.store, ctx.task.loss
    if plain_suffices(loss_s, loss_jc, segment.dtype):
        # far apart: the plain difference alone (crosscurv.numeric.gap.reconcile)
        measured = (math.nan, math.nan)
    else:
        delta = S.fetch("delta")
        segment.add(1.0, _whole(S, "gs", gs), delta)
        theta_jk = S.fetch("theta_jk")
        try:
            segment.interior(loss, theta_jk, delta, lambda q: ctx.engine.gradient(loss, q))
            measured = segment.result()
        except Exception as exc:  # the segment left the loss's domain: the plain difference
            if not outside_domain(exc):
                raise
            measured = (math.nan, math.nan)
        del theta_jk, delta
    S.park("theta_jk", None)
    record["gap"], record["gap_err"] = reconcile(*measured, loss_s, loss_jc, segment.dtype)
    ctx.rule.error_columns(ctx, record, {**meas, "losses": (loss_jc, loss_s)})
    ctx.emit(k, loss_jc, loss_s, record)


def _diverged(k: int, loss_jc: float, loss_s: float):
    """Raise :class:`crosscurv.numeric.trajectory.Diverged` for iteration ``k``, naming each
    non-finite loss."""
    bad = ", ".join(f"{n} = {v}" for n, v in (("loss_jc", loss_jc), ("loss_s", loss_s))
                    if not math.isfinite(v))
    raise Diverged(k, f"diverged at k={k}: {bad}")


def _between_uses(ctx: RunContext, name: str, vector: Mapping,
                  graph_output: bool = False) -> Mapping:
    """``vector`` parked under ``name`` and read back entry by entry at each use, where that saves
    memory: with an offloaded store, unless ``vector`` is the output of a graph still held (a
    retained graph's gradient, ``graph_output``: the graph keeps it alive; the termwise engine holds
    none); else ``vector`` itself. Its readers only read it (an entry written in place would not
    reach the store)."""
    S = ctx.store
    if not getattr(S, "offloaded", False) or (graph_output and ctx.engine.name != "termwise"):
        return vector
    S.park(name, vector)
    return tree.lazy(vector, lambda n: S.fetch_entry(name, n))


def _whole(S, name: str, vector: Mapping) -> Mapping:
    """``vector`` whole: where :func:`_between_uses` parked it under ``name``, one fetch of it (on
    the CPU a map of its file, cheaper than reading it entry by entry where no graph is alive beside
    it); else itself."""
    return S.fetch(name) if S.holds(name) else vector


def _products(point, k: int, named):
    """``(name, v, H v)`` for ``named = [(name, get), ...]`` in order, each ``v = get()`` fetched
    once.

    At ``k = 0`` only the power vector's product is taken: ``z``, ``y`` and ``Delta`` are exactly
    zero there, and so are their products.
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


# -- the protocol ------------------------------------------------------------------------
def _check_inputs(task, pattern, lr, iters, opts: RunOptions, chunk_size, offload):
    """``(lr, iters, pattern)`` checked (one-line :class:`ProtocolError`, :class:`ResumeError`)."""
    lr, iters, pattern = check_lr(lr), check_iters(iters), check_pattern(task, pattern)
    if opts.hvp_method not in HVP_METHODS:
        known = ", ".join(HVP_METHODS)
        raise ProtocolError(f"unknown HVP method {opts.hvp_method!r} (use {known})")
    counts = (("HVP chunk size", chunk_size), ("checkpoint interval", opts.checkpoint_every))
    for name, value in counts:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ProtocolError(f"{name} must be an integer >= 1, got {value!r}")
    if offload is not None and not isinstance(offload, bool):
        raise ProtocolError(f"offload must be True, False or None, got {offload!r}")
    if opts.resume and opts.out_dir is None:
        raise ResumeError("resume needs an output directory")
    return lr, iters, pattern


@computes_with_threads
def run_protocol(task, pattern: DelayPattern | str, lr: float, iters: int, *,
                 chunk_size: int | None = None, offload: bool | None = None,
                 options: RunOptions | None = None, **keywords) -> ProtocolResult:
    """Run JC and pattern ``S`` side by side for ``iters`` iterations (module docstring).

    Args:
        task: a :class:`crosscurv.numeric.Task`; ``task.params`` is ``theta^0``.
        pattern: acyclic delay pattern over ``task.n_blocks`` blocks, or its
            command-line spelling (``"gs"``, ``"gs:3,2,1"``, ``"2<-1,3<-2"``...).
        lr: constant learning rate ``eta > 0``.
        iters: number of iterations ``K >= 1`` (on resume it may exceed the
            run's: the run is extended).
        chunk_size: at most this many HVPs per batch (batched engine).
        offload: park the carried vectors off the compute device between
            their uses (:mod:`crosscurv.numeric.offload`; records are unchanged).
            ``None``: when the estimated footprint exceeds half the available
            memory (:func:`crosscurv.numeric.offload.should_offload`).
        options, keywords: the run's :class:`crosscurv.numeric.trajectory.RunOptions`, each also
            a keyword: ``out_dir`` (``None``: records in memory only), ``resume`` (continue or
            extend the run in ``out_dir``), ``hvp_method`` (module docstring), ``seed`` (of the
            power iteration's start vector), ``settings`` (extra JSON-able settings, recorded and
            checked on resume), ``checkpoint_every`` (default by elapsed time), ``progress(k, K)``,
            ``on_record(record)`` (after each record is written, before any checkpoint; an
            exception there interrupts the run), ``optimizer`` (``"sgd"``, the default: the
            paper's plain steps, ``"momentum:BETA"`` or ``"adam[:B1,B2,EPS]"``, both runs from zero
            state) and ``block_lr`` (``"NAME=FACTOR,..."`` or ``{name: factor}``).  Plain ``sgd``
            with no factor other than 1 runs exactly the paper's protocol; anything else the
            generalized estimates (:mod:`crosscurv.numeric.optimizer_estimates`) in the same
            columns, with ``bound_bk`` the majorant of
            :func:`crosscurv.numeric.optimizer_estimates.optimizer_bound` (NaN for Adam).
        threads: intra-op threads of the call (``None``: ``OMP_NUM_THREADS`` if set, else 1, as the
            command line; :mod:`crosscurv.numeric.threads`); recorded as ``settings["threads"]``.

    Returns:
        A :class:`ProtocolResult` (``status`` ``"complete"`` or ``"diverged"``).

    Raises:
        ProtocolError, ResumeError, TaskError, PatternError: bad input (one line).
        KeyboardInterrupt and any exception from ``on_record`` propagate after
        ``summary.json`` is written with status ``"interrupted"``.
    """
    opts = RunOptions.of(options, keywords, "run_protocol")
    lr, iters, pattern = _check_inputs(task, pattern, lr, iters, opts, chunk_size, offload)
    setup = optimizer_setup(task, opts.optimizer, opts.block_lr)
    elem = torch.empty((), dtype=task.dtype).element_size()
    use_offload = should_offload(task.num_params(), elem,
                                 task.device) if offload is None else offload
    settings = _run_settings(task, pattern, lr, iters, opts.seed, opts.hvp_method, chunk_size,
                             opts.checkpoint_every, opts.settings, setup)
    settings["offload"] = use_offload
    with_threads(settings)
    rule = update_rule(task, setup)
    folder = None
    if opts.out_dir is not None:
        folder = RunFolder(opts.out_dir, RECORDS_FILE, SUMMARY_FILE)
    run = Run(iters, folder, RECORDS, opts.checkpoint_every, opts.on_record, opts.progress)
    ck = None
    if opts.resume:
        ck = _load(folder, task, settings, rule)
    else:
        if folder is not None:
            folder.check_fresh()
        task.check_loss()  # TaskError unless a finite scalar
    # decided before the run's vectors exist, so that the probe's graph is not on top of them
    engine = choose_engine(task, opts.hvp_method, chunk_size)
    plan = masked_product_plan(task, pattern, "auto")
    if folder is not None and not opts.resume:
        folder.create()
    store = make_store(use_offload, task.device, folder.path if folder is not None else None)
    try:
        ctx = RunContext(task, pattern, lr, iters, engine, plan, store, EstimateState(), settings,
                         rule, opts.hvp_method)
        if ck is not None:
            done, _, start = run.resume_point(ck)
            ctx.est = ck["estimates"]
            for name in ctx.carried:
                store.park(name, ck["vectors"][name])
            ck = None  # its vectors now live in the store only
        else:
            done, start = False, 0
            _start_vectors(store, task.params, opts.seed)
            rule.start(store, task.params)
        return _finish(ctx, run, run.execute(ctx, start, done, task.device))
    finally:
        store.close()


def _load(folder: RunFolder, task, settings: dict, rule) -> dict:
    """The run folder's checkpoint, checked against the task's shapes and ``settings``."""

    def check(ck):
        _check_vectors(ck["vectors"], task)
        ck["estimates"] = EstimateState.from_state_dict(ck["estimates"])

    ck = folder.load_checkpoint(task.device, check)
    check_resume_settings(ck["settings"], settings, folder.path)
    if rule.carried:
        try:
            _check_vectors(ck["vectors"], task, rule.carried)
        except (KeyError, TypeError, ValueError) as exc:
            raise ResumeError(f"{unreadable_checkpoint(folder.checkpoint)} (missing or malformed "
                              f"optimizer state {one_line(exc)})") from None
    return ck


def _start_vectors(store, params: Mapping, seed: int) -> None:
    """The carried vectors at ``k = 0``: both runs at ``theta^0``, the estimates' states zero."""
    store.park("theta_j", tree.clone(params))
    store.park("theta_s", tree.clone(params))
    store.park("z", tree.zeros_like(params))
    store.park("y", tree.zeros_like(params))
    store.park("w", None)
    store.park("p", init_power_vector(params, seed))
    store.park("vmax", None)
    store.park("vmin", None)


def _finish(ctx: RunContext, run: Run, out) -> ProtocolResult:
    """The run's result and final summary."""
    message = out.message
    if out.status == "complete":
        message = f"complete: {len(run.records)} iterations"
    elif run.folder is not None:
        message += f"; {len(run.records)} records kept in {run.folder.records}"
    summary = protocol_summary(ctx, run, out.status, message, out.diverged_at)
    if run.folder is not None:
        write_summary(run.folder.summary, summary)
    return ProtocolResult(out.status, run.records, summary, message, out.diverged_at,
                          run.folder.path if run.folder is not None else None)
