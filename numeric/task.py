"""The ``Task`` contract (docs/design.md): named parameters, a pure loss, a block partition.

A task is

* ``params``: ``dict[str, Tensor]`` of trainable tensors (any shapes, one dtype
  and device);
* ``loss``: a pure function ``loss(params) -> scalar tensor`` giving the
  full-batch objective ``L(theta)``; it must be differentiable twice by
  ``torch.func`` (or at least by double backward);
* ``blocks``: an ordered ``dict[block_name, list[param_name]]`` covering every
  parameter exactly once.  Block ``i`` of the paper is the ``i``-th entry
  (1-based in the paper and on the command line, 0-based in code).

Built-in tasks and user tasks (``crosscurv run module:factory``) share it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from crosscurv.numeric.chain import Chain
from crosscurv.theory.errors import TaskError

__all__ = ["TaskError", "Task", "task_from_module", "partition_by_rule"]


Params = dict  # dict[str, torch.Tensor]


@dataclass
class Task:
    """A block optimisation problem ``min L(theta_1, ..., theta_N)``.

    Args:
        params: named trainable tensors (the initial point ``theta^0``).
        loss: pure full-batch objective ``loss(params) -> scalar tensor``.
        blocks: ordered partition ``{block_name: [param names]}``.
        name: short task label used in reports.
        info: free-form JSON-serialisable metadata (data source, sizes, ...)
            recorded in every run summary.
        default_pattern: pattern spec used when the user gives none
            (for example ``"gs"`` or ``"gs:8,7,6,5,4,3,2,1"``).
        chain: optional :class:`crosscurv.numeric.chain.Chain`, the same loss written as
            one stage per block in block order; scheme steps then reuse the
            stages before the first updated block (same numbers, fewer passes).
        loss_terms: optional sequence of pure functions ``term(params) -> scalar tensor``
            whose sum is the loss (for example one per client or per data shard:
            ``L = sum_t L_t``); the protocol's default engine then holds one term's
            graph at a time (:class:`crosscurv.numeric.point.TermwisePoint`), so its
            memory follows one term's activations, not the whole loss's.

    Construction checks the partition; :meth:`check_loss` evaluates the loss once and checks that it
    is a finite scalar.
    """

    params: Params
    loss: Callable[[Params], torch.Tensor]
    blocks: dict
    name: str = "task"
    info: dict = field(default_factory=dict)
    default_pattern: str = "gs"
    chain: Chain | None = None
    loss_terms: Sequence[Callable[[Params], torch.Tensor]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.params, Mapping) or not self.params:
            raise TaskError("params must be a non-empty dict of named tensors")
        for k, v in self.params.items():
            if not isinstance(k, str):
                raise TaskError(f"parameter names must be strings, got {k!r}")
            if not isinstance(v, torch.Tensor):
                raise TaskError(f"parameter {k!r} is not a tensor ({type(v).__name__})")
            if not v.is_floating_point():
                raise TaskError(f"parameter {k!r} is not floating point ({v.dtype})")
        if not callable(self.loss):
            raise TaskError("loss must be callable: loss(params) -> scalar tensor")
        if not isinstance(self.blocks, Mapping) or not self.blocks:
            raise TaskError("blocks must be a non-empty ordered dict {block: [param names]}")
        seen: dict[str, str] = {}
        for b, names in self.blocks.items():
            if isinstance(names, str) or not isinstance(names, Sequence):
                raise TaskError(f"block {b!r} must list parameter names, got {names!r}")
            if len(names) == 0:
                raise TaskError(f"block {b!r} is empty")
            for n in names:
                if n not in self.params:
                    raise TaskError(f"block {b!r} names unknown parameter {n!r}")
                if n in seen:
                    raise TaskError(f"parameter {n!r} is in blocks {seen[n]!r} and {b!r}")
                seen[n] = b
        missing = [n for n in self.params if n not in seen]
        if missing:
            raise TaskError(f"parameters in no block: {', '.join(missing)}")
        self.params = dict(self.params)
        self.blocks = {str(b): list(v) for b, v in self.blocks.items()}
        dtypes = {v.dtype for v in self.params.values()}
        devices = {v.device for v in self.params.values()}
        if len(dtypes) > 1 or len(devices) > 1:
            raise TaskError(f"parameters mix dtypes/devices: {sorted(map(str, dtypes | devices))}")
        if self.chain is not None:
            if not isinstance(self.chain, Chain):
                raise TaskError("chain must be a crosscurv.numeric.chain.Chain, got "
                                f"{type(self.chain).__name__}")
            if len(self.chain.stages) != len(self.blocks):
                raise TaskError(f"chain has {len(self.chain.stages)} stages for "
                                f"{len(self.blocks)} blocks")
        if self.loss_terms is not None:
            terms = self.loss_terms
            if isinstance(terms, (str, Mapping)) or not isinstance(terms, Sequence) or not terms:
                raise TaskError("loss_terms must be a non-empty sequence of functions "
                                "term(params) -> scalar tensor")
            for i, term in enumerate(self.loss_terms):
                if not callable(term):
                    raise TaskError(f"loss_terms[{i}] is not callable ({type(term).__name__})")
            self.loss_terms = tuple(self.loss_terms)

    # -- basic facts -------------------------------------------------------
    @property
    def block_names(self) -> list[str]:
        return list(self.blocks)

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def dtype(self) -> torch.dtype:
        return next(iter(self.params.values())).dtype

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    def block_sizes(self) -> list[int]:
        """Number of scalars ``d_i`` in each block."""
        return [sum(self.params[n].numel() for n in names) for names in self.blocks.values()]

    def num_params(self) -> int:
        return sum(v.numel() for v in self.params.values())

    def check_loss(self, params: Params | None = None) -> float:
        """Evaluate the loss once; raise :class:`TaskError` unless it is a finite scalar."""
        p = self.params if params is None else params
        try:
            with torch.no_grad():
                value = self.loss(p)
        except Exception as exc:  # user code: report, do not crash
            raise TaskError(f"loss(params) raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(value, torch.Tensor):
            raise TaskError(f"loss(params) must return a tensor, got {type(value).__name__}")
        if value.numel() != 1 or value.dim() != 0:
            raise TaskError(f"loss(params) must return a scalar, got shape {tuple(value.shape)}")
        v = float(value)
        if not math.isfinite(v):
            raise TaskError(f"loss(params) is not finite ({v})")
        if self.chain is not None:
            try:
                with torch.no_grad():
                    c = float(self.chain.loss(p))
            except Exception as exc:  # user code: report, do not crash
                raise TaskError(f"chain.loss(params) raised {type(exc).__name__}: {exc}") from exc
            if not abs(c - v) <= 1e-6 * max(1.0, abs(v)):
                raise TaskError(f"chain.loss(params) = {c!r} is not loss(params) = {v!r}")
        if self.loss_terms is not None:
            self._check_terms(p, v)
        return v

    def _check_terms(self, p: Params, v: float) -> None:
        """``sum_t term_t(params)`` equals ``loss(params)`` up to the rounding of the sum's ``T``
        additions: ``|sum - L| <= 4 T eps sum_t |term_t|`` (``eps`` of the parameters' dtype)."""
        values = []
        for i, term in enumerate(self.loss_terms):
            try:
                with torch.no_grad():
                    t = term(p)
            except Exception as exc:  # user code: report, do not crash
                raise TaskError(
                    f"loss_terms[{i}](params) raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(t, torch.Tensor) or t.numel() != 1 or t.dim() != 0:
                raise TaskError(f"loss_terms[{i}](params) must return a scalar tensor")
            values.append(float(t))
        total = math.fsum(values)
        tol = 4 * len(values) * torch.finfo(self.dtype).eps * max(math.fsum(abs(x)
            for x in values), abs(v))
        if not abs(total - v) <= tol:
            raise TaskError(f"the loss terms sum to {total!r}, not to loss(params) = {v!r} "
                            f"(rounding allows {tol:.3g})")

    def to(self, device=None, dtype=None) -> "Task":
        """A copy whose parameters live on ``device`` / have ``dtype``.

        The loss closure must itself follow the parameters' device and dtype (built-in tasks move
        their data on construction instead, through their factory's ``device``/``dtype`` arguments).
        """
        params = {k: v.detach().to(device=device, dtype=dtype) for k, v in self.params.items()}
        # the chain is not carried over: its input tensor stays where it was built (steps fall back
        # to the loss)
        return Task(params, self.loss, self.blocks, self.name, dict(self.info),
                    self.default_pattern, loss_terms=self.loss_terms)


def partition_by_rule(names: Sequence[str], rule) -> dict:
    """Group parameter names into ordered blocks.

    Args:
        names: parameter names in model order.
        rule: either a callable ``name -> block name`` or a list of
            ``(block_name, regex)`` pairs tried in order (first match wins).

    Returns:
        ``{block_name: [names]}`` with blocks in first-appearance order for a
        callable rule, in the list's order for a regex rule (empty blocks
        dropped).

    Raises:
        TaskError: a parameter that no rule matches.
    """
    if callable(rule):
        out: dict[str, list[str]] = {}
        for n in names:
            out.setdefault(str(rule(n)), []).append(n)
        return out
    compiled = [(b, re.compile(rx)) for b, rx in rule]
    out = {b: [] for b, _ in compiled}
    for n in names:
        for b, rx in compiled:
            if rx.search(n):
                out[b].append(n)
                break
        else:
            raise TaskError(f"parameter {n!r} matches no block rule")
    return {b: v for b, v in out.items() if v}


def task_from_module(
    module: torch.nn.Module,
    objective: Callable[[Callable, Params], torch.Tensor],
    rule,
    *,
    trainable: Callable[[str], bool] | None = None,
    name: str = "task",
    info: dict | None = None,
    default_pattern: str = "gs",
) -> Task:
    """Build a :class:`Task` from an ``nn.Module`` through ``torch.func.functional_call``.

    Args:
        module: the model; its buffers and non-trainable parameters stay fixed.
        objective: ``objective(forward, params) -> scalar`` where
            ``forward(*args, **kw)`` runs the module with ``params`` substituted.
        rule: block rule for :func:`partition_by_rule`.
        trainable: predicate on parameter names (default: ``requires_grad``).
    """
    named = dict(module.named_parameters())
    keep = [n for n, p in named.items() if (trainable(n) if trainable else p.requires_grad)]
    params = {n: named[n].detach().clone() for n in keep}

    def loss(p: Params) -> torch.Tensor:
        def forward(*args, **kwargs):
            return torch.func.functional_call(module, p, args, kwargs, strict=False)

        return objective(forward, p)

    blocks = partition_by_rule(keep, rule)
    return Task(params, loss, blocks, name, info or {}, default_pattern)
