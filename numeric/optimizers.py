"""Block-separable optimizers: specs, state, the update rule and the scheme step (beyond the paper).

Block ``i`` moves by ``-eta_i phi_i(g_i, s_i)`` with ``eta_i = lr * f_i`` (the
factors of ``--block-lr NAME=FACTOR,...``, unnamed blocks 1) and its state
``s_i`` updated from the same gradient (:mod:`crosscurv.theory.optimizers` for the
symbolic side).  The update rules reproduce ``torch.optim`` operation by
operation (single-tensor path, no weight decay):

* ``sgd``: ``theta - eta_i g`` (exactly the plain step of :mod:`crosscurv.numeric.steps`);
* ``momentum:BETA`` (``torch.optim.SGD(momentum=BETA)``, dampening 0, no
  Nesterov): ``buf = g`` at the first step, then ``buf = BETA buf + g``;
  ``theta - eta_i buf``;
* ``adam[:B1,B2,EPS]`` (``torch.optim.Adam``, defaults 0.9, 0.999, 1e-8):
  ``m = lerp(m, g, 1 - B1)``, ``v = B2 v + (1 - B2) g^2``, step ``t``,
  ``theta - (eta_i / (1 - B1^t)) m / (sqrt(v) / sqrt(1 - B2^t) + EPS)``.

The scheme step (:func:`optimizer_scheme_step`) is :func:`crosscurv.numeric.steps.scheme_step_with_grads`
with the optimizer as its update: block ``i``'s gradient is evaluated where
exactly the blocks of ``S(i)`` hold their new values, and both the move and
the state update use that fresh gradient.  JC and ``S`` keep separate states
(:class:`OptimizerState`), equal at the start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import torch

from crosscurv.theory.errors import InputError
from crosscurv.theory.patterns import DelayPattern

from .steps import scheme_step_with_grads

__all__ = [
    "OptimizerError",
    "OptimizerSpec",
    "OptimizerState",
    "OptimizerSetup",
    "STATE_BUFFERS",
    "optimizer_setup",
    "parse_optimizer",
    "parse_block_lr",
    "block_factors",
    "param_lrs",
    "optimizer_update",
    "optimizer_scheme_step",
    "direction",
    "direction_jacobian_apply",
]


class OptimizerError(InputError):
    """A bad ``--optimizer`` or ``--block-lr`` spec, or a state that does not fit."""


OPTIMIZERS = ("sgd", "momentum", "adam")
ADAM_DEFAULTS = (0.9, 0.999, 1e-8)
#: The state buffers of each optimizer (``torch.optim``'s names), in a fixed order.
STATE_BUFFERS = {"sgd": (), "momentum": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq")}


@dataclass(frozen=True)
class OptimizerSpec:
    """What ``--optimizer`` asks for.

    Attributes:
        name: ``"sgd"``, ``"momentum"`` or ``"adam"``.
        beta: heavy-ball coefficient (``momentum``).
        betas: Adam's ``(beta1, beta2)``.
        eps: Adam's ``eps``.
    """

    name: str = "sgd"
    beta: float = 0.0
    betas: tuple = ADAM_DEFAULTS[:2]
    eps: float = ADAM_DEFAULTS[2]

    @property
    def stateful(self) -> bool:
        return self.name != "sgd"

    def describe(self) -> str:
        """Canonical spec text (parses back to the same spec)."""
        if self.name == "momentum":
            return f"momentum:{self.beta!r}"
        if self.name == "adam":
            return f"adam:{self.betas[0]!r},{self.betas[1]!r},{self.eps!r}"
        return "sgd"

    def to_dict(self) -> dict:
        out = {"name": self.name, "spec": self.describe()}
        if self.name == "momentum":
            out["beta"] = self.beta
        if self.name == "adam":
            out.update(beta1=self.betas[0], beta2=self.betas[1], eps=self.eps)
        return out


def _number(text: str, what: str, spec: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise OptimizerError(f"{what} in optimizer {spec!r} must be a number, got {text.strip()!r}") from None
    if not math.isfinite(x):
        raise OptimizerError(f"{what} in optimizer {spec!r} must be finite, got {text.strip()!r}")
    return x


def parse_optimizer(text: str | OptimizerSpec | None) -> OptimizerSpec:
    """Parse ``sgd``, ``momentum:BETA`` (``0 <= BETA < 1``) or ``adam[:B1,B2,EPS]``.

    Raises:
        OptimizerError: one line naming what is wrong.
    """
    if isinstance(text, OptimizerSpec):
        return text
    if text is None:
        return OptimizerSpec()
    if not isinstance(text, str):
        raise OptimizerError(f"optimizer must be text, got {type(text).__name__}")
    spec = text.strip()
    name, sep, args = spec.partition(":")
    name = name.strip().lower()
    if name not in OPTIMIZERS:
        raise OptimizerError(f"unknown optimizer {spec!r}: use sgd, momentum:BETA or adam[:B1,B2,EPS]")
    if name == "sgd":
        if sep:
            raise OptimizerError(f"optimizer sgd takes no arguments, got {spec!r}")
        return OptimizerSpec()
    if name == "momentum":
        if not args.strip():
            raise OptimizerError(f"optimizer momentum needs its coefficient: momentum:BETA, got {spec!r}")
        beta = _number(args, "BETA", spec)
        if not 0.0 <= beta < 1.0:
            raise OptimizerError(f"momentum coefficient must satisfy 0 <= BETA < 1, got {beta!r}")
        return OptimizerSpec("momentum", beta=beta)
    if not sep:
        return OptimizerSpec("adam")
    parts = args.split(",")
    if len(parts) != 3:
        raise OptimizerError(f"adam takes three values adam:B1,B2,EPS, got {spec!r}")
    b1, b2, eps = (_number(p, w, spec) for p, w in zip(parts, ("B1", "B2", "EPS")))
    for b, w in ((b1, "B1"), (b2, "B2")):
        if not 0.0 <= b < 1.0:
            raise OptimizerError(f"adam {w} must satisfy 0 <= {w} < 1, got {b!r}")
    if eps < 0.0:
        raise OptimizerError(f"adam EPS must be >= 0, got {eps!r}")
    return OptimizerSpec("adam", betas=(b1, b2), eps=eps)


def parse_block_lr(text: str | Mapping | None, block_names: Sequence[str]) -> dict:
    """Parse ``NAME=FACTOR,...`` into ``{block name: factor}`` (only the named blocks).

    ``NAME`` is a block name or its 1-based index; ``FACTOR`` a finite number
    ``> 0``.  An empty text means no factors.

    Raises:
        OptimizerError: unknown or repeated block, missing ``=``, bad factor.
    """
    names = [str(b) for b in block_names]
    if text is None:
        return {}
    items = text.items() if isinstance(text, Mapping) else None
    if items is None:
        if not isinstance(text, str):
            raise OptimizerError(f"--block-lr must be text NAME=FACTOR,..., got {type(text).__name__}")
        if not text.strip():
            return {}
        items = []
        for part in text.split(","):
            key, eq, val = part.partition("=")
            if not eq or not key.strip() or not val.strip():
                raise OptimizerError(f"--block-lr entries must be NAME=FACTOR, got {part.strip()!r}")
            items.append((key.strip(), val.strip()))
    out: dict = {}
    for key, val in items:
        key = str(key)
        if key not in names:
            if key.isdigit() and 1 <= int(key) <= len(names):
                key = names[int(key) - 1]
            else:
                raise OptimizerError(f"--block-lr names unknown block {key!r}; blocks are {', '.join(names)}")
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise OptimizerError(f"--block-lr factor for block {key!r} must be a number, got {val!r}") from None
        if not math.isfinite(f) or f <= 0.0:
            raise OptimizerError(f"--block-lr factor for block {key!r} must be finite and > 0, got {val!r}")
        if key in out:
            raise OptimizerError(f"--block-lr names block {key!r} twice")
        out[key] = f
    return out


def block_factors(task, block_lr: str | Mapping | None = None) -> list[float]:
    """Step-size factor ``f_i`` of every block of ``task`` in block order (unnamed blocks 1)."""
    named = parse_block_lr(block_lr, task.block_names)
    return [named.get(b, 1.0) for b in task.block_names]


def param_lrs(task, lr, factors: Sequence[float] | None = None) -> dict:
    """``{parameter name: lr * f_i}`` (``lr`` itself where ``f_i == 1``, so plain runs keep their numbers)."""
    factors = [1.0] * task.n_blocks if factors is None else list(factors)
    if len(factors) != task.n_blocks:
        raise OptimizerError(f"{len(factors)} step-size factors for {task.n_blocks} blocks")
    out = {}
    for b, f in zip(task.block_names, factors):
        for k in task.blocks[b]:
            out[k] = lr if f == 1.0 else lr * f
    return out


@dataclass(frozen=True)
class OptimizerSetup:
    """A run's optimizer: the spec and the block step-size factors, as :func:`optimizer_setup` checked them.

    Attributes:
        spec: the :class:`OptimizerSpec`.
        factors: ``f_i`` of every block, in block order.
        named: ``{block name: f_i}`` of the blocks whose factor is not 1 (the
            canonical form of ``--block-lr``, recorded in run summaries).
    """

    spec: OptimizerSpec
    factors: tuple
    named: dict

    @property
    def plain(self) -> bool:
        """``sgd`` with every factor 1: the paper's setting (the protocol's original path)."""
        return self.spec.name == "sgd" and not self.named

    @property
    def buffers(self) -> tuple:
        """Names of the optimizer's state buffers (:data:`STATE_BUFFERS`)."""
        return STATE_BUFFERS[self.spec.name]

    @property
    def f_max(self) -> float:
        return max(self.factors, default=1.0)

    def settings(self) -> dict:
        """``{"optimizer": spec dict, "block_lr": named factors}`` for a run's settings."""
        return {"optimizer": self.spec.to_dict(), "block_lr": dict(self.named)}

    def describe(self) -> str:
        """``"momentum:0.9, block-lr B=4.0"``-style text."""
        text = self.spec.describe()
        if self.named:
            text += ", block-lr " + ",".join(f"{b}={f!r}" for b, f in self.named.items())
        return text


def optimizer_setup(task, optimizer: str | OptimizerSpec | None = None,
                    block_lr: str | Mapping | None = None) -> OptimizerSetup:
    """Check ``--optimizer`` and ``--block-lr`` against ``task``'s blocks (factors of 1 are dropped).

    Raises:
        OptimizerError: one line naming the bad spec.
    """
    spec = parse_optimizer(optimizer)
    named = parse_block_lr(block_lr, task.block_names)
    factors = tuple(named.get(b, 1.0) for b in task.block_names)
    return OptimizerSetup(spec, factors, {b: f for b, f in zip(task.block_names, factors) if f != 1.0})


@dataclass
class OptimizerState:
    """One run's optimizer state.

    Attributes:
        step: steps taken (Adam's bias corrections use ``step + 1`` at the next one).
        buffers: ``{"momentum_buffer": {param: Tensor}}`` or
            ``{"exp_avg": {...}, "exp_avg_sq": {...}}``; missing entries mean
            torch's initial state (no buffer / zeros).
    """

    step: int = 0
    buffers: dict = field(default_factory=dict)

    def clone(self) -> "OptimizerState":
        return OptimizerState(self.step, {n: {k: v.detach().clone() for k, v in d.items()} for n, d in self.buffers.items()})

    def state_dict(self) -> dict:
        return {"step": self.step, "buffers": {n: dict(d) for n, d in self.buffers.items()}}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> "OptimizerState":
        try:
            return cls(int(state["step"]), {n: dict(d) for n, d in state["buffers"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise OptimizerError(f"optimizer state is not readable: {exc}") from None


def _adam_consts(spec: OptimizerSpec, step: int):
    b1, b2 = spec.betas
    t = float(step)
    return 1 - b1**t, (1 - b2**t) ** 0.5


def optimizer_update(spec: OptimizerSpec, keys: Sequence[str], params: Mapping, grads: Mapping,
                     state: OptimizerState, new_state: OptimizerState, lrs: Mapping) -> dict:
    """New values of the parameters ``keys`` and their new state (``torch.optim`` arithmetic).

    Args:
        spec: the optimizer.
        keys: parameter names to move (one block, or all for JC).
        params: the point the step starts from.
        grads: the gradients to use for ``keys`` (fresh ones for scheme ``S``).
        state: the state at the start of the step (read only).
        new_state: receives the updated buffers of ``keys`` (its ``step`` must
            already be ``state.step + 1``).
        lrs: ``{name: lr_i}`` (:func:`param_lrs`).

    Returns:
        ``{key: new value}`` (new tensors; nothing is modified in place).
    """
    out = {}
    if spec.name == "sgd":
        for k in keys:
            out[k] = params[k] - lrs[k] * grads[k]
        return out
    if spec.name == "momentum":
        old = state.buffers.get("momentum_buffer", {})
        dst = new_state.buffers.setdefault("momentum_buffer", {})
        for k in keys:
            g = grads[k]
            buf = g.detach().clone() if k not in old else old[k].clone().mul_(spec.beta).add_(g, alpha=1)
            dst[k] = buf
            out[k] = params[k].clone().add_(buf, alpha=-lrs[k])
        return out
    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    dea = new_state.buffers.setdefault("exp_avg", {})
    deas = new_state.buffers.setdefault("exp_avg_sq", {})
    bc1, bc2_sqrt = _adam_consts(spec, new_state.step)
    for k in keys:
        g = grads[k]
        m = (ea[k].clone() if k in ea else torch.zeros_like(params[k])).lerp_(g, 1 - b1)
        v = (eas[k].clone() if k in eas else torch.zeros_like(params[k])).mul_(b2).addcmul_(g, g, value=1 - b2)
        dea[k], deas[k] = m, v
        denom = (v.sqrt() / bc2_sqrt).add_(spec.eps)
        out[k] = params[k].clone().addcdiv_(m, denom, value=-(lrs[k] / bc1))
    return out


def optimizer_scheme_step(task, params: Mapping, pattern: DelayPattern, lr, spec: OptimizerSpec | str,
                          state: OptimizerState | None = None, factors: Sequence[float] | None = None,
                          grad_at_params: Mapping | None = None):
    """One exact step of scheme ``S`` with a block-separable optimizer.

    Args:
        task: the :class:`crosscurv.numeric.Task`.
        params: ``theta^k``.
        pattern: acyclic delay pattern (``jc`` for Jacobi).
        lr: base learning rate ``eta``.
        spec: :class:`OptimizerSpec` or its text.
        state: the run's state at ``theta^k`` (default: the initial state).
        factors: per-block step-size factors (default all 1).
        grad_at_params: ``grad L(theta^k)`` if known (JC and the blocks with an
            empty fresh set use it instead of a new evaluation, as in
            :func:`crosscurv.numeric.steps.scheme_step_with_grads`).

    Returns:
        ``(theta^{k+1}, new_state, g_tilde)``; ``g_tilde`` holds the fresh
        gradient each block used (the full gradient for JC).  With ``sgd`` and
        no factors this is exactly :func:`crosscurv.numeric.steps.scheme_step_with_grads`.
    """
    spec = parse_optimizer(spec)
    state = OptimizerState() if state is None else state
    lrs = param_lrs(task, lr, factors)
    new_state = OptimizerState(state.step + 1, {n: dict(d) for n, d in state.buffers.items()})
    if spec.name == "sgd" and all(f == 1.0 for f in (factors or [])):
        new, used = scheme_step_with_grads(task, params, pattern, lr, grad_at_params)
        return new, new_state, used

    def update(keys, old, grads):
        return optimizer_update(spec, keys, old, grads, state, new_state, lrs)

    new, used = scheme_step_with_grads(task, params, pattern, lr, grad_at_params, update=update)
    return new, new_state, used


# -- the direction map and its Jacobian (estimates; float64 arithmetic) ----------
def direction(spec: OptimizerSpec, state: OptimizerState, grads: Mapping) -> dict:
    """``phi(g, s)``: the step the run would take with gradients ``grads`` is ``-lr_i phi``.

    ``sgd``: ``g``; ``momentum``: ``beta buf + g`` (``g`` without a buffer);
    ``adam``: ``(m'/c1) / (sqrt(v')/sqrt(c2) + eps)`` at step ``state.step + 1``.
    """
    if spec.name == "sgd":
        return dict(grads)
    if spec.name == "momentum":
        buf = state.buffers.get("momentum_buffer", {})
        return {k: (buf[k] * spec.beta + g if k in buf else g) for k, g in grads.items()}
    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    bc1, bc2_sqrt = _adam_consts(spec, state.step + 1)
    out = {}
    for k, g in grads.items():
        m = (ea[k] if k in ea else torch.zeros_like(g)).lerp(g, 1 - b1)
        v = (eas[k] if k in eas else torch.zeros_like(g)) * b2 + (1 - b2) * g * g
        out[k] = (m / bc1) / (v.sqrt() / bc2_sqrt + spec.eps)
    return out


def direction_jacobian_apply(spec: OptimizerSpec, state: OptimizerState, grads: Mapping, v: Mapping) -> dict:
    """``J_phi v``: the Jacobian of :func:`direction` in the gradient, at ``grads``, applied to ``v``.

    Identity for ``sgd`` and ``momentum``; diagonal for Adam:
    ``J = (1 - b1) / (c1 D) - (m'/c1) (1 - b2) g / (c2 r D^2)`` with
    ``r = sqrt(v'/c2)``, ``D = r + eps`` (:func:`crosscurv.theory.optimizers.adam_jacobian`);
    where ``r = 0`` (zero gradient and zero second moment, Adam's kink) the
    second term is taken as 0.
    """
    if spec.name in ("sgd", "momentum"):
        return dict(v)
    b1, b2 = spec.betas
    ea, eas = state.buffers.get("exp_avg", {}), state.buffers.get("exp_avg_sq", {})
    t = float(state.step + 1)
    c1, c2 = 1 - b1**t, 1 - b2**t
    out = {}
    for k, g in grads.items():
        m = (ea[k] if k in ea else torch.zeros_like(g)).lerp(g, 1 - b1)
        vv = (eas[k] if k in eas else torch.zeros_like(g)) * b2 + (1 - b2) * g * g
        r = (vv / c2).sqrt()
        D = r + spec.eps
        second = torch.where(r > 0, (m / c1) * (1 - b2) * g / (c2 * torch.where(r > 0, r, torch.ones_like(r)) * D * D),
                             torch.zeros_like(r))
        out[k] = ((1 - b1) / (c1 * D) - second) * v[k]
    return out
