"""Step identification: which block scheme does a user's step function perform?

Given a :class:`crosscurv.numeric.Task` and a user function ``step(params, lr) -> new
params``, run it from a few seeded states and step sizes ``eta_k = eta0 *
2^-k`` and compare it with the exact steps of :mod:`crosscurv.numeric.steps`
(Definitions 1 and 2 of the paper): JC, full GS in every block order
(``N <= 4``; else the declared order only), the declared pattern, and the
pattern inferred from the step's own second-order term.  A step *matches* a
candidate only when it agrees to round-off at every state and every ``eta``
-- agreeing to ``O(eta^2)`` is not agreeing: by Lemma 1 every scheme agrees
with JC to first order and differs from it at order 2 (``theta^{k+1} = theta
- eta g + eta^2 M_S g + O(eta^3)``).  Otherwise the report names the nearest
candidate and the observed order of the difference in ``eta``
(:func:`crosscurv.numeric.orders.observe_order`).  This is what ``crosscurv
validate-step`` runs.

Everything here runs in float64 on the task's device.  Bad input (a step
returning other names, shapes or dtypes, non-finite values) raises
:class:`ValidationInputError` with one line naming the problem.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from crosscurv.theory.errors import InputError, ValidationInputError
from crosscurv.theory.patterns import DelayPattern, PatternError, as_pattern, gauss_seidel, jacobi

from . import tree
from .hvp import grad, hvp_batch
from .orders import OrderStudy, observe_order
from .optimizers import STATE_BUFFERS, OptimizerState, block_factors, optimizer_scheme_step, parse_optimizer
from .steps import block_keys, scheme_step
from .task import Task
from .threads import computes_with_threads

__all__ = [
    "ValidationInputError",
    "UserStep",
    "as_user_step",
    "numpy_user_step",
    "check_step_output",
    "seeded_states",
    "default_eta0",
    "Candidate",
    "candidate_patterns",
    "FreshnessFit",
    "freshness_fit",
    "CandidateResult",
    "StepReport",
    "identify_step",
]

EPS64 = float(torch.finfo(torch.float64).eps)


# ---------------------------------------------------------------------------
# The user's step
# ---------------------------------------------------------------------------
@dataclass
class UserStep:
    """What a ``validate-step`` factory provides.

    Attributes:
        task: the :class:`crosscurv.numeric.Task` the step acts on (float64).
        step: ``step(params, lr) -> new params``; ``params`` is a dict of
            float64 tensors keyed like ``task.params`` (a fresh copy: the step
            may modify it in place), ``lr`` a Python float; the result must be
            a dict with the same names, shapes, dtype and device.
        pattern: the declared delay pattern (``DelayPattern``), or ``None``.
        name: a label for reports.
    """

    task: Task
    step: Callable
    pattern: DelayPattern | None = None
    name: str = "step"


def _declared(task: Task, spec) -> DelayPattern | None:
    if spec is None:
        return None
    return as_pattern(spec, task.n_blocks, task.block_names)


def as_user_step(obj, name: str = "step", pattern=None) -> UserStep:
    """Normalise what a factory returned into a :class:`UserStep`.

    Accepted forms (the factory contract):

    * a tuple/list ``(task, step)`` or ``(task, step, pattern)``;
    * a mapping with keys ``"task"``, ``"step"`` and optionally ``"pattern"``;
    * any object with attributes ``.task`` and ``.step`` (and optionally
      ``.pattern``), e.g. a dataclass or a :class:`UserStep`;
    * a mapping of NumPy callables with keys ``"params"``, ``"loss"``, ``"grad"``, ``"step"`` and
      optionally ``"blocks"``, ``"pattern"`` (:func:`numpy_user_step`).

    ``pattern`` may be a CLI spec (``"gs:B,A"``, ``"2<-1"``) or a
    :class:`DelayPattern`; the argument ``pattern`` (e.g. ``--pattern``)
    overrides the factory's declaration.

    Raises:
        ValidationInputError: anything else, a task that is not a
            :class:`crosscurv.numeric.Task`, a step that is not callable, or a task whose
            parameters are not float64.
    """
    declared = None
    numpy_keys = ("params", "loss", "grad", "step")
    if isinstance(obj, Mapping) and "task" not in obj and all(k in obj for k in numpy_keys):
        given = {k: obj[k] for k in numpy_keys + ("blocks",) if k in obj}
        declared = pattern if pattern is not None else obj.get("pattern")
        return numpy_user_step(**given, name=name, pattern=declared)
    if isinstance(obj, (tuple, list)):
        if len(obj) not in (2, 3):
            raise ValidationInputError(
                f"factory returned a {type(obj).__name__} of length {len(obj)}; expected (task, step) or (task, step, pattern)"
            )
        task, step = obj[0], obj[1]
        declared = obj[2] if len(obj) == 3 else None
    elif isinstance(obj, Mapping):
        if "task" not in obj or "step" not in obj:
            raise ValidationInputError(f"factory returned a mapping without 'task' and 'step' keys (keys: {sorted(map(str, obj))})")
        task, step, declared = obj["task"], obj["step"], obj.get("pattern")
    elif hasattr(obj, "task") and hasattr(obj, "step"):
        task, step, declared = obj.task, obj.step, getattr(obj, "pattern", None)
    else:
        raise ValidationInputError(
            f"factory returned {type(obj).__name__}; expected (task, step), (task, step, pattern) or an object with .task and .step"
        )
    if not isinstance(task, Task):
        raise ValidationInputError(f"factory's task is a {type(task).__name__}, not a crosscurv.numeric.Task")
    if not callable(step):
        raise ValidationInputError(f"factory's step is a {type(step).__name__}, not callable as step(params, lr)")
    if task.dtype != torch.float64:
        raise ValidationInputError(
            f"task {task.name!r} has {str(task.dtype).replace('torch.', '')} parameters; step validation runs in float64 "
            "(build the task's parameters and data in float64)"
        )
    task.check_loss()
    if pattern is not None:
        declared = pattern
    return UserStep(task, step, _declared(task, declared), name)


def numpy_user_step(params: Mapping, loss: Callable, grad: Callable, step: Callable,
                    blocks: Mapping | None = None, pattern=None,
                    name: str = "numpy step") -> UserStep:
    """A step written outside torch, as a :class:`UserStep`: NumPy callables on ``{name: float64
    array}``.

    Args:
        params: ``{name: ndarray}`` (float64), a point the loss is defined at (the seeded states
        perturb it).
        loss: ``loss(params) -> float``; grad: ``grad(params) -> {name: ndarray}`` (the gradient of
        ``loss``);
        step: ``step(params, lr) -> {name: ndarray}``, the step under test (it may modify
        ``params``).
        blocks: ``{block: [param names]}`` in block order (default: one block per parameter).
        pattern: the declared pattern, as for :func:`as_user_step`.

    The loss becomes a :class:`crosscurv.numeric.Task` whose backward calls ``grad`` and has no
    second
    derivative (``once_differentiable``), so the Hessian-vector products of the step size and the
    freshness fit are central differences of ``grad`` (:class:`CurvatureRoute`, its
    first-derivative route);
    the verdict compares the step with reference steps built from ``grad`` alone.
    """
    import numpy as np
    from torch.autograd.function import once_differentiable

    names = list(params)
    bad = [n for n in names if np.asarray(params[n]).dtype != np.float64]
    if bad:
        raise ValidationInputError(f"parameter(s) {', '.join(bad)} are not float64 arrays; step "
                                   "validation runs in float64")

    def to_np(p):
        return {n: p[n].detach().cpu().numpy().copy() for n in names}

    class _Loss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            ctx.save_for_backward(*tensors)
            value = loss(dict(zip(names, (t.detach().numpy().copy() for t in tensors))))
            return torch.tensor(float(value), dtype=torch.float64)

        @staticmethod
        @once_differentiable
        def backward(ctx, g_out):
            g = grad(dict(zip(names, (t.detach().numpy().copy() for t in ctx.saved_tensors))))
            return tuple(
                g_out * torch.as_tensor(np.asarray(g[n], dtype=np.float64)).reshape(t.shape)
                for n, t in zip(names, ctx.saved_tensors))

    def torch_step(p, lr):
        out = step(to_np(p), lr)
        if not isinstance(out, Mapping):
            raise ValidationInputError(
                f"{name}: step returned a {type(out).__name__}, not a dict of arrays")
        return {n: torch.as_tensor(np.asarray(v, dtype=np.float64))
                if isinstance(v, np.ndarray) else v for n, v in out.items()}

    def task_loss(p):
        return _Loss.apply(*(p[n] for n in names))

    task_loss.first_derivatives_only = "the loss is NumPy callables (gradients only, no autodiff)"
    start = {n: torch.as_tensor(np.asarray(params[n], dtype=np.float64)).clone() for n in names}
    task = Task(start, task_loss,
                dict(blocks) if blocks is not None else {n: [n] for n in names}, name=name)
    return as_user_step((task, torch_step, pattern), name=name)


def check_step_output(out, params: Mapping, lr: float, where: str = "step") -> dict:
    """Check a step's result against the input ``params``; return a detached copy.

    The copy matters: training code often returns ``model.state_dict()``,
    ``dict(model.named_parameters())`` or ``{n: p.detach()}``, tensors that
    alias the model's parameters and are overwritten by the next call.

    Raises:
        ValidationInputError: not a mapping, other names, a non-tensor value, other
            shapes, dtypes or device, or non-finite values (one line each).
    """
    if not isinstance(out, Mapping):
        raise ValidationInputError(f"{where}(params, lr) must return a dict of tensors, got {type(out).__name__}")
    missing = [k for k in params if k not in out]
    extra = [str(k) for k in out if k not in params]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(extra))
        raise ValidationInputError(f"{where}(params, lr) returned different names: " + "; ".join(parts))
    res = {}
    for k, p in params.items():
        v = out[k]
        if not isinstance(v, torch.Tensor):
            raise ValidationInputError(f"{where}(params, lr) returned {k!r} as {type(v).__name__}, not a tensor")
        if tuple(v.shape) != tuple(p.shape):
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} with shape {tuple(v.shape)}, the parameter has {tuple(p.shape)}"
            )
        if v.dtype != p.dtype:
            raise ValidationInputError(
                f"{where}(params, lr) returned {k!r} as {str(v.dtype).replace('torch.', '')}, "
                f"the parameter is {str(p.dtype).replace('torch.', '')}"
            )
        if v.device != p.device:
            raise ValidationInputError(f"{where}(params, lr) returned {k!r} on {v.device}, the parameter is on {p.device}")
        if not bool(torch.isfinite(v).all()):
            raise ValidationInputError(f"{where}(params, lr) returned non-finite values in {k!r} (lr={lr:.4g})")
        res[k] = v.detach().clone()  # a copy: a step may return live parameters or views of them
    return res


def _call_step(step: Callable, params: Mapping, lr: float, where: str = "step", opt_state=None) -> dict:
    """``step(copy of params, lr)`` (``step(params, lr, state)`` with an optimizer state), checked and copied.

    With ``opt_state`` (an :class:`~crosscurv.numeric.optimizers.OptimizerState`) the
    step receives a fresh copy as a dict ``{"step": k, buffer name: {param:
    tensor}}`` (``torch.optim``'s buffer names, :data:`crosscurv.numeric.optimizers.STATE_BUFFERS`)
    and may return ``new_params`` or ``(new_params, new_state)``; the
    parameters are compared.
    """
    inp = tree.clone(params)
    try:
        if opt_state is None:
            out = step(inp, float(lr))
        else:
            st = opt_state.clone()
            out = step(inp, float(lr), {"step": st.step, **st.buffers})
            if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Mapping):
                out = out[0]
    except InputError:
        raise
    except Exception as exc:  # user code: report in one line
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise ValidationInputError(f"{where}(params, lr) raised {type(exc).__name__}: {msg}") from exc
    return check_step_output(out, params, lr, where)


# ---------------------------------------------------------------------------
# Curvature products: autograd where the model has second derivatives, else
# central differences of gradients
# ---------------------------------------------------------------------------
class CurvatureRoute:
    """How ``H(theta) v`` is computed for the step size and the freshness fit.

    Route ``"autograd"``: :func:`crosscurv.numeric.hvp.hvp_batch` (double backward or
    forward-over-reverse).  Some kernels have neither derivative (PyTorch's
    CPU flash attention behind Hugging Face's default ``sdpa`` attention,
    compiled modules), and a custom ``torch.autograd.Function`` whose
    backward is not differentiable (``once_differentiable``, ``detach``
    inside) makes double backward return a *wrong* product without an
    error.  So the first product is also taken by central differences, and
    a product that raises, or disagrees with the differences by more than
    ``CHECK_RTOL`` (relative), switches to route ``"central-differences"``,
    which needs first derivatives only:

        D(h) v = (grad L(theta + h v) - grad L(theta - h v)) / (2 h),

    in float64 at ``h = c max(||theta||, 1) / ||v||`` for ``c`` in
    ``1e-4, 3e-5, 1e-5``.  The product is the mean of the two consecutive
    values that agree best, and its stated error twice their distance.
    Measured on a tiny random T5 against eager-attention autograd: the
    error of ``D`` is O(1) at ``c = 1e-3`` and up to 12 at ``c = 1e-4`` where
    the step crosses a ReLU kink of the feed-forward layers, ``< 1e-3`` at
    ``c = 1e-5`` (rounding of the float32 layer-norm statistics: about
    ``2e-9 / c``); no Richardson extrapolation, as the error is not smooth
    in ``h``.  The freshness fit reads coefficients to ``0.05`` and the
    step size needs one significant digit; the report states the largest
    estimate, and a note when it exceeds ``0.05``.

    Attributes:
        name: ``"autograd"`` or ``"central-differences"``.
        reason: why autograd was left (empty for autograd).
        max_rel_error: largest stated error bound over the products taken
            (central differences only).
        products: number of products taken (with an error estimate).
        rough: products for the power iteration of the step size (central
            differences at the middle step only: a magnitude is all it needs).
    """

    LEVELS = (1e-4, 3e-5, 1e-5)
    CHECK_RTOL = 1e-5

    def __init__(self, loss):
        self.loss = loss
        self.name = "autograd"
        self.reason = ""
        self.max_rel_error = 0.0
        self.products = 0
        self.rough = 0
        self._checked = False
        # a loss that states it has no second derivative
        if getattr(loss, "first_derivatives_only", None):
            self._leave(loss.first_derivatives_only)

    def batch(self, params: Mapping, vs: Sequence[Mapping]) -> list:
        """``[H(params) v for v in vs]`` (dicts keyed like ``params``)."""
        vs = list(vs)
        if self.name == "autograd":
            try:
                out = hvp_batch(self.loss, params, vs)
            except InputError:
                raise
            except Exception as exc:  # a kernel without second derivatives
                text = str(exc).strip().splitlines()
                self._leave(f"autograd has no second derivative here ({type(exc).__name__}: {text[0] if text else ''})")
            else:
                if not self._checked and vs:
                    self._checked = True
                    fd, fd_err = self._fd(params, vs[0])
                    diff = float(tree.norm(tree.sub(out[0], fd)))
                    scale = max(float(tree.norm(fd)), float(tree.norm(out[0])))
                    if diff > max(self.CHECK_RTOL, 10.0 * fd_err) * scale:
                        self._leave(f"autograd's second derivative disagrees with differences of gradients "
                                    f"(relative difference {diff / scale:.1e}: a backward that is not "
                                    "differentiable, e.g. a custom autograd.Function)")
                if self.name == "autograd":
                    self.products += len(vs)
                    return out
        out = []
        for v in vs:
            hv, err = self._fd(params, v)
            self.products += 1
            self.max_rel_error = max(self.max_rel_error, err)
            out.append(hv)
        return out

    def _leave(self, reason: str) -> None:
        self.name = "central-differences"
        self.reason = reason

    def one(self, params: Mapping, v: Mapping, precise: bool = True) -> dict:
        """``H v``; ``precise=False`` (power iteration: a magnitude is enough) takes the
        central-differences route at the middle step only, without an error estimate (2 gradients, not 6)."""
        if not precise and self.name == "central-differences":
            self.rough += 1
            return self._fd(params, v, levels=self.LEVELS[1:2])[0]
        return self.batch(params, [v])[0]

    def _fd(self, params: Mapping, v: Mapping, levels: Sequence[float] | None = None) -> tuple[dict, float]:
        """``D(h) v`` at the middle step of :attr:`LEVELS`, and its estimated relative error
        (``levels`` of one step: ``D`` there, error not estimated, 0)."""
        levels = self.LEVELS if levels is None else levels
        vn = float(tree.norm(v))
        if vn == 0.0:
            return {k: torch.zeros_like(t) for k, t in params.items()}, 0.0
        base = max(float(tree.norm(params)), 1.0) / vn
        ds = []
        for rel in levels:
            h = rel * base
            gp = grad(self.loss, tree.axpy(h, v, params))[1]
            gm = grad(self.loss, tree.axpy(-h, v, params))[1]
            ds.append(tree.scale(tree.sub(gp, gm), 1.0 / (2.0 * h)))
        if len(ds) == 1:
            return ds[0], 0.0
        # the consecutive pair that agrees best (a kink within the larger step spoils only the pairs with it)
        diffs = [float(tree.norm(tree.sub(ds[i], ds[i + 1]))) for i in range(len(ds) - 1)]
        i = min(range(len(diffs)), key=diffs.__getitem__)
        hv = tree.scale(tree.add(ds[i], ds[i + 1]), 0.5)
        hn = float(tree.norm(hv))
        err = 2.0 * diffs[i]
        return hv, (err / hn if hn > 0 else 0.0)

    def describe(self) -> str:
        """One line: which route the curvature products took."""
        if self.name == "autograd":
            return "curvature route: autograd Hessian-vector products (checked against differences of gradients)"
        return (f"curvature route: central differences of gradients in float64 (h = "
                f"{'/'.join(f'{c:g}' for c in self.LEVELS)} ||theta|| / ||v||; largest estimated relative error of a product "
                f"{self.max_rel_error:.1e}, {self.products} products, {self.rough} more for the step size), "
                f"because {self.reason}")

    def to_dict(self) -> dict:
        return {"route": self.name, "reason": self.reason, "max_rel_error": self.max_rel_error,
                "products": self.products, "step_size_products": self.rough}


# ---------------------------------------------------------------------------
# States and step sizes
# ---------------------------------------------------------------------------
def seeded_states(task: Task, seeds: Sequence[int] = (0, 1, 2), perturb: float = 0.5) -> list[dict]:
    """Points ``theta_s = theta^0 + perturb * sigma_t * xi_s`` around the task's parameters.

    ``xi_s`` is standard normal noise from ``torch.Generator().manual_seed(s)``
    (drawn in float64 on the CPU, so the states are the same on every
    device); ``sigma_t`` is the RMS of tensor ``t``, or the RMS of all
    parameters when ``t`` is zero (e.g. LoRA's ``B = 0``, where the block
    couplings would otherwise vanish), or 1 when everything is zero.

    Returns:
        one ``dict[str, Tensor]`` per seed (dtype/device of the task).
    """
    flat = torch.cat([v.detach().reshape(-1).to(torch.float64).cpu() for v in task.params.values()])
    rms_all = float(flat.pow(2).mean().sqrt()) if flat.numel() else 0.0
    rms_all = rms_all if rms_all > 0 else 1.0
    out = []
    for s in seeds:
        gen = torch.Generator().manual_seed(int(s))
        st = {}
        for k, v in task.params.items():
            v64 = v.detach().to(torch.float64).cpu()
            rms = float(v64.pow(2).mean().sqrt()) if v64.numel() else 0.0
            sigma = rms if rms > 0 else rms_all
            noise = torch.randn(v64.shape, generator=gen, dtype=torch.float64)
            st[k] = (v64 + perturb * sigma * noise).to(dtype=v.dtype, device=v.device)
        out.append(st)
    return out


def seeded_optimizer_states(task: Task, spec, states: Sequence[Mapping], seeds: Sequence[int], steps: int = 3) -> list:
    """One :class:`~crosscurv.numeric.optimizers.OptimizerState` per state: buffers of the size of the gradient there.

    Heavy ball: ``momentum_buffer = rms(g) xi``; Adam: ``exp_avg = rms(g) xi``,
    ``exp_avg_sq = (rms(g) xi')^2``, ``step = steps`` (``xi, xi'`` standard
    normal, per tensor, from ``torch.Generator().manual_seed(1000 + seed)``).
    """
    out = []
    for st, s in zip(states, seeds):
        g = grad(task.loss, st)[1]
        gen = torch.Generator().manual_seed(1000 + int(s))
        bufs = {}
        for b in STATE_BUFFERS[spec.name]:
            d = {}
            for k, v in st.items():
                rms = float(g[k].pow(2).mean().sqrt()) if g[k].numel() else 0.0
                noise = torch.randn(v.shape, generator=gen, dtype=torch.float64).to(v.device, v.dtype)
                x = (rms if rms > 0 else 1.0) * noise
                d[k] = x * x if b == "exp_avg_sq" else x
            bufs[b] = d
        out.append(OptimizerState(steps if spec.name == "adam" else 1, bufs))
    return out


def _spectral_radius(task: Task, params: Mapping, iters: int = 12, route: CurvatureRoute | None = None) -> float:
    """``|lambda|_max`` of ``H(params)`` by power iteration on HVPs (seeded start; products by ``route``)."""
    route = CurvatureRoute(task.loss) if route is None else route
    gen = torch.Generator().manual_seed(1234)
    v = {k: torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype) for k, t in params.items()}
    lam = 0.0
    for _ in range(iters):
        nv = float(tree.norm(v))
        if nv == 0.0 or not math.isfinite(nv):
            return lam
        v = tree.scale(v, 1.0 / nv)
        hv = route.one(params, v, precise=False)
        lam = float(tree.norm(hv))
        v = hv
    return lam


def default_eta0(task: Task, states: Sequence[Mapping], scale: float = 0.1, route: CurvatureRoute | None = None) -> float:
    """``eta0 = scale / max_s |lambda_max(H(theta_s))|`` (``scale`` when ``H = 0``).

    With this choice ``eta * ||H|| <= 0.1`` on the whole grid, so the steps are
    in the asymptotic regime of Lemma 1, while the ``O(eta^2)`` differences
    between schemes (relative size ``eta ||H_ij||``) stay far above round-off.
    """
    route = CurvatureRoute(task.loss) if route is None else route
    lam = max(_spectral_radius(task, s, route=route) for s in states)
    return scale / lam if lam > 0 and math.isfinite(lam) else scale


# ---------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------
@dataclass
class Candidate:
    """A reference scheme the step is compared with.

    Attributes:
        label: e.g. ``"jc"``, ``"gs:B,A"``, ``"pattern {2<-1}"``.
        pattern: its :class:`DelayPattern`.
        roles: why it is a candidate (``"jc"``, ``"gs order"``,
            ``"declared"``, ``"inferred"``).
    """

    label: str
    pattern: DelayPattern
    roles: list = field(default_factory=list)


def _order_label(task: Task, order: Sequence[int]) -> str:
    return ",".join(task.block_names[b] for b in order)


def _pattern_label(task: Task, pattern: DelayPattern) -> str:
    if pattern.is_jacobi:
        return "jc"
    if pattern.is_full_gs():
        return "gs:" + _order_label(task, pattern.order())
    names = task.block_names
    return "{" + ", ".join(f"{names[i]}<-{names[j]}" for i, j in sorted(pattern.pairs)) + "}"


def candidate_patterns(task: Task, declared: DelayPattern | None = None, max_all_orders: int = 4) -> list[Candidate]:
    """JC, full GS in every block order (``N <= max_all_orders``), and the declared pattern.

    For ``N > max_all_orders`` only the declared pattern's order (index
    order when nothing is declared) is tried for GS.  Patterns with the same
    pairs are one candidate (for ``N = 1`` GS is JC).
    """
    n = task.n_blocks
    out: list[Candidate] = []

    def add(p: DelayPattern, role: str) -> None:
        for c in out:
            if c.pattern.pairs == p.pairs:
                if role not in c.roles:
                    c.roles.append(role)
                return
        out.append(Candidate(_pattern_label(task, p), p, [role]))

    add(jacobi(n), "jc")
    if n <= max_all_orders:
        orders = list(itertools.permutations(range(n)))
    else:
        orders = [declared.order() if declared is not None else tuple(range(n))]
    for o in orders:
        add(gauss_seidel(n, o), "gs order")
    if declared is not None:
        add(declared, "declared")
    return out


# ---------------------------------------------------------------------------
# The second-order ("freshness") term of the step
# ---------------------------------------------------------------------------
@dataclass
class FreshnessFit:
    """The step's second-order term fitted by cross-Hessian products (Lemma 1).

    A scheme ``S`` satisfies ``theta^{k+1} = theta - eta g + eta^2 F + O(eta^3)``
    with ``F_i = sum_{j in S(i)} H_ij g_j``.  For the user's step, ``F`` is
    estimated by Richardson extrapolation of ``(U(theta, eta) - theta + eta g)
    / eta^2`` at the two smallest step sizes, and block by block fitted by
    least squares over all states as ``F_i ~ sum_{j != i} a_ij H_ij g_j``.

    Attributes:
        coef: ``N x N`` list; ``coef[i][j] = a_ij`` (``None`` on the diagonal
            and where ``H_ij g_j`` vanishes at every state, so ``a_ij`` is not
            determined).
        residual: per block ``i``, ``||F_i - sum_j a_ij H_ij g_j|| / scale_i``.
        block_names: the task's block names.
        tol: how close to an integer a coefficient must be to be read as one.
    """

    coef: list
    residual: list
    block_names: list
    tol: float = 0.05

    def rounded(self) -> dict:
        """``{(i, j): r}`` with ``r`` in ``{-1, 0, 1}`` where ``a_ij`` is that close to it, else ``None``."""
        out = {}
        for i, row in enumerate(self.coef):
            for j, a in enumerate(row):
                if a is None:
                    continue
                r = round(a)
                out[(i, j)] = int(r) if r in (-1, 0, 1) and abs(a - r) <= self.tol else None
        return out

    @property
    def is_pattern_form(self) -> bool:
        """Residuals small and every determined coefficient is 0 or 1."""
        return all(r <= self.tol for r in self.residual) and all(v in (0, 1) for v in self.rounded().values())

    @property
    def is_sign_flipped(self) -> bool:
        """Residuals small, coefficients in ``{-1, 0}``, at least one ``-1``."""
        vals = list(self.rounded().values())
        return all(r <= self.tol for r in self.residual) and all(v in (-1, 0) for v in vals) and -1 in vals

    def inferred_pairs(self, value: int = 1) -> list:
        """Pairs ``(i, j)`` whose coefficient rounds to ``value``."""
        return sorted(p for p, v in self.rounded().items() if v == value)

    def table(self, fmt: str = "github") -> str:
        from tabulate import tabulate

        names = self.block_names
        rows = []
        for i, row in enumerate(self.coef):
            rows.append([f"{names[i]} (i={i + 1})"] + ["" if a is None else f"{a:+.4f}" for a in row] + [f"{self.residual[i]:.2e}"])
        head = ["block i \\ fresh j"] + [f"{n} (j={j + 1})" for j, n in enumerate(names)] + ["residual"]
        return tabulate(rows, headers=head, tablefmt=fmt, disable_numparse=True)

    def to_dict(self) -> dict:
        return {"coef": self.coef, "residual": self.residual, "block_names": self.block_names, "tol": self.tol}


def freshness_fit(user: UserStep, states: Sequence[Mapping], eta: float, tol: float = 0.05,
                  factors: Sequence[float] | None = None, route: CurvatureRoute | None = None) -> FreshnessFit:
    """Fit the step's ``eta^2`` term by ``a_ij H_ij g_j`` (see :class:`FreshnessFit`).

    With per-block step factors ``f_i`` (block ``i`` steps with ``eta_i = f_i
    eta``) a scheme ``S`` satisfies ``theta_i^{k+1} = theta_i - eta f_i g_i +
    eta^2 f_i sum_{j in S(i)} f_j H_ij g_j + O(eta^3)``, so the columns are
    ``f_i H_ij (f_j g_j)`` and a pattern still has ``a_ij`` in ``{0, 1}``.

    Args:
        user: the step and its task.
        states: the points (float64).
        eta: the smaller of the two step sizes used (the other is ``2 eta``).
        tol: integer-closeness threshold.
        factors: ``f_i`` per block (default all 1).
        route: how the curvature products are taken (:class:`CurvatureRoute`).

    Cost: per state, two user steps, one gradient and one batch of ``N`` HVPs.
    """
    task = user.task
    route = CurvatureRoute(task.loss) if route is None else route
    fac = [1.0] * task.n_blocks if factors is None else [float(f) for f in factors]
    keys = block_keys(task)
    n = task.n_blocks
    # per block i: rows of design (list over states of [ (u_j)_i ]) and targets
    design = [[[] for _ in range(n)] for _ in range(n)]
    target = [[] for _ in range(n)]
    for st in states:
        _, g = grad(task.loss, st)
        fg = _scale_blocks(task, g, fac)
        f = {}
        for h in (2.0 * eta, eta):
            u = _call_step(user.step, st, h, user.name)
            jc = tree.axpy(-h, fg, st)
            f[h] = tree.scale(tree.sub(u, jc), 1.0 / h**2)
        fr = tree.sub(tree.scale(f[eta], 2.0), f[2.0 * eta])  # Richardson: O(eta) error removed
        cols = route.batch(st, [tree.restrict(fg, ks) for ks in keys])
        for i in range(n):
            target[i].append(torch.cat([fr[k].reshape(-1) for k in keys[i]]))
            for j in range(n):
                design[i][j].append(fac[i] * torch.cat([cols[j][k].reshape(-1) for k in keys[i]]))
    coef = [[None] * n for _ in range(n)]
    resid = []
    for i in range(n):
        y = torch.cat(target[i]).to(torch.float64).cpu()
        others = [j for j in range(n) if j != i]
        xs = {j: torch.cat(design[i][j]).to(torch.float64).cpu() for j in others}
        scale = max([float(y.norm())] + [float(x.norm()) for x in xs.values()] + [1e-300])
        live = [j for j in others if float(xs[j].norm()) > 1e-9 * scale]
        if live:
            X = torch.stack([xs[j] for j in live], dim=1)
            sol = torch.linalg.lstsq(X, y.unsqueeze(1), driver="gelsd").solution.squeeze(1)
            fitted = X @ sol
            for j, a in zip(live, sol.tolist()):
                coef[i][j] = float(a)
        else:
            fitted = torch.zeros_like(y)
        resid.append(float((y - fitted).norm()) / scale)
    return FreshnessFit(coef, resid, task.block_names, tol)


def _scale_blocks(task: Task, v: Mapping, factors: Sequence[float]) -> dict:
    """``f_i v_i`` block by block (``v`` keyed like the parameters)."""
    out = {}
    for b, f in zip(task.block_names, factors):
        for k in task.blocks[b]:
            out[k] = v[k] if f == 1.0 else v[k] * f
    return out


def _reference(task: Task, params: Mapping, pattern: DelayPattern, lr: float, factors: Sequence[float] | None,
               spec=None, opt_state=None) -> dict:
    """The exact step of ``pattern`` with block step sizes ``lr f_i`` (plain :func:`scheme_step` when all are 1),
    with optimizer ``spec`` from ``opt_state`` when given (:func:`crosscurv.numeric.optimizers.optimizer_scheme_step`)."""
    if spec is not None and spec.stateful:
        return optimizer_scheme_step(task, params, pattern, lr, spec, state=opt_state,
                                     factors=None if factors is None else list(factors))[0]
    if factors is None or all(f == 1.0 for f in factors):
        return scheme_step(task, params, pattern, lr)
    return optimizer_scheme_step(task, params, pattern, lr, "sgd", factors=list(factors))[0]


@dataclass
class StepFactors:
    """Per-block step factors ``f_i`` of a step: block ``i`` moves by ``-eta f_i g_i`` to first order.

    Read from the first-order term (Lemma 1 with block step sizes ``eta_i =
    f_i eta``: ``U(theta, eta) = theta - eta F g + O(eta^2)``, ``F =
    diag(f_i I)``): per block, ``c_i = (theta_i - U_i(theta, eta)) / eta``
    Richardson-extrapolated over ``eta`` and ``2 eta`` (``2 c(eta) - c(2
    eta) = f_i g_i + O(eta^2)``), and ``f_i`` fitted by least squares over
    the states, ``f_i = sum_s <c_i, g_i> / sum_s ||g_i||^2``.  A fitted value
    within ``1e-3`` (relative) of a fraction ``p/q`` with ``q <= 12`` is read
    as that fraction.

    Example (FedAvg over ``C`` clients): client ``c`` takes ``u_c <- u_c - eta
    grad_u L_c`` and ``v_c <- v - eta grad_v L_c``; the server keeps the mean
    ``v <- (1/C) sum_c v_c``.  Against the mean objective ``L = (1/C) sum_c
    L_c``, ``grad_{u_c} L = grad_u L_c / C`` and ``grad_v L = (1/C) sum_c
    grad_v L_c``, so ``u_c <- u_c - (C eta) grad_{u_c} L`` and ``v <- v - eta
    grad_v L``: the JC step with factors ``personal = C, shared = 1``.

    Attributes:
        factors: ``f_i`` per block (block order).
        raw: the fitted values before rounding.
        residual: per block, ``||c_i - f_i g_i|| / ||c_i||`` (max over states).
        source: ``"--block-lr"`` or ``"inferred"``.
    """

    factors: list
    raw: list
    residual: list
    source: str = "inferred"

    @property
    def plain(self) -> bool:
        return all(f == 1.0 for f in self.factors)

    def text(self, names: Sequence[str]) -> str:
        return ", ".join(f"{n}={f:g}" for n, f in zip(names, self.factors))

    def to_dict(self) -> dict:
        return {"factors": self.factors, "raw": self.raw, "residual": self.residual, "source": self.source}


def _nice(f: float, rel: float = 1e-3, max_den: int = 12) -> float | None:
    from fractions import Fraction

    r = Fraction(f).limit_denominator(max_den)
    return float(r) if r > 0 and abs(f - float(r)) <= rel * abs(f) else None


def infer_step_factors(task: Task, states: Sequence[Mapping], etas: Sequence[float], user_outs) -> StepFactors:
    """Fit the per-block step factors of the step's first-order term (see :class:`StepFactors`)."""
    keys = block_keys(task)
    h = etas[-1]
    num = [0.0] * task.n_blocks
    den = [0.0] * task.n_blocks
    per_state = []
    for si, st in enumerate(states):
        g = grad(task.loss, st)[1]
        c1 = tree.scale(tree.sub(st, user_outs[si][-1]), 1.0 / h)
        c2 = tree.scale(tree.sub(st, user_outs[si][-2]), 1.0 / etas[-2])
        c = tree.sub(tree.scale(c1, 2.0), c2) if abs(etas[-2] - 2.0 * h) <= 1e-12 * h else c1
        per_state.append((g, c))
        for i, ks in enumerate(keys):
            num[i] += sum(float((c[k] * g[k]).sum()) for k in ks)
            den[i] += sum(float((g[k] * g[k]).sum()) for k in ks)
    raw = [num[i] / den[i] if den[i] > 0 else 1.0 for i in range(task.n_blocks)]
    resid = [0.0] * task.n_blocks
    for g, c in per_state:
        for i, ks in enumerate(keys):
            cn = math.sqrt(sum(float((c[k] ** 2).sum()) for k in ks))
            rn = math.sqrt(sum(float(((c[k] - raw[i] * g[k]) ** 2).sum()) for k in ks))
            resid[i] = max(resid[i], rn / cn if cn > 0 else 0.0)
    facs = []
    for f in raw:
        nf = _nice(f) if f > 0 else None
        facs.append(nf if nf is not None else f)
    return StepFactors(facs, raw, resid, "inferred")


# ---------------------------------------------------------------------------
# Identification
# ---------------------------------------------------------------------------
@dataclass
class CandidateResult:
    """The step against one candidate on the whole grid.

    Attributes:
        candidate: the :class:`Candidate`.
        etas: the step sizes (largest first).
        errors: ``max_s ||U(theta_s, eta) - R(theta_s, eta)||`` per ``eta``.
        rel_errors: ``max_s`` of that error over ``||R(theta_s, eta) - theta_s||``.
        within: per ``eta``, whether every state is within the match tolerance.
        study: observed order of ``errors`` in ``eta`` over the points above
            the match tolerance (:class:`crosscurv.numeric.orders.OrderStudy`).
    """

    candidate: Candidate
    etas: list
    errors: list
    rel_errors: list
    within: list
    study: OrderStudy

    @property
    def matches(self) -> bool:
        return all(self.within)

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def order(self) -> float:
        """Fitted order of the difference (``nan`` when it is at round-off everywhere)."""
        return self.study.slope

    def describe(self) -> str:
        if self.matches:
            return "matches (round-off at every eta)"
        o = self.order
        if not math.isfinite(o):
            return "differs (order undetermined: fewer than 2 points above round-off)"
        return f"differs at O(eta^{round(o)}) (observed order {o:.2f})"

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "roles": list(self.candidate.roles),
            "pattern": self.candidate.pattern.to_dict(),
            "etas": self.etas,
            "errors": self.errors,
            "rel_errors": self.rel_errors,
            "within_tolerance": self.within,
            "matches": self.matches,
            "observed_order": self.order if math.isfinite(self.order) else None,
            "rates": [r if math.isfinite(r) else None for r in self.study.rates],
        }


@dataclass
class StepReport:
    """Outcome of :func:`identify_step`.

    Attributes:
        name: the step's label; task: the task; declared: declared pattern or ``None``.
        etas, seeds, perturb, rtol, atol_eps: the grid and the match tolerance
            (``||U - R|| <= rtol ||R - theta|| + atol_eps * eps64 * ||theta||``).
        results: one :class:`CandidateResult` per candidate.
        fit: the :class:`FreshnessFit` (``None`` when not computed).
        deterministic: whether two calls with the same input agreed.
        nondeterminism: the difference of those two calls (relative to the step).
        notes: further findings, one sentence each.
        factors: the per-block step factors every candidate uses
            (:class:`StepFactors`, from ``block_lr`` or inferred), or ``None``.
        route: the :class:`CurvatureRoute` of the curvature products (``None`` if none were taken).
    """

    name: str
    task: Task
    declared: DelayPattern | None
    etas: list
    seeds: list
    perturb: float
    rtol: float
    atol_eps: float
    results: list
    fit: FreshnessFit | None = None
    deterministic: bool = True
    nondeterminism: float = 0.0
    notes: list = field(default_factory=list)
    factors: StepFactors | None = None
    route: CurvatureRoute | None = None
    optimizer: str = "sgd"

    @property
    def factors_label(self) -> str:
        """``" with step factors personal=2, shared=1"`` when the candidates use factors other than 1, else ``""``."""
        if self.factors is None or self.factors.plain:
            return ""
        return " with step factors " + self.factors.text(self.task.block_names)

    @property
    def matches(self) -> list:
        """Labels of the candidates matched to round-off."""
        return [r.label for r in self.results if r.matches]

    def result(self, label: str) -> CandidateResult:
        for r in self.results:
            if r.label == label:
                return r
        raise KeyError(label)

    @property
    def declared_label(self) -> str | None:
        return None if self.declared is None else _pattern_label(self.task, self.declared)

    @property
    def nearest(self) -> CandidateResult:
        """The candidate with the smallest error at the smallest ``eta`` (ties: higher order)."""
        return min(self.results, key=lambda r: (r.errors[-1], -(r.order if math.isfinite(r.order) else 99)))

    @property
    def ok(self) -> bool:
        """Matches the declared pattern (or, with none declared, some candidate) and is deterministic."""
        if not self.deterministic:
            return False
        if self.declared is not None:
            return self.declared_label in self.matches
        return bool(self.matches)

    def verdict(self) -> str:
        """One sentence: what the step is."""
        m = self.matches
        dl = self.declared_label
        if not self.deterministic:
            return (f"NOT A FUNCTION OF (params, lr): two identical calls differ by {self.nondeterminism:.2e} of the "
                    "step size, so it performs no fixed scheme (does it keep a gradient from an earlier call, "
                    "i.e. a stale gradient, or draw random numbers?)")
        if m:
            s = "matches " + " and ".join(m) + self.factors_label
            if len(m) > 1:
                s += " (indistinguishable on this task: the couplings between these schemes vanish here)"
            if dl is not None and dl not in m:
                s += f"; it does NOT perform the declared pattern {dl}"
            elif dl is not None:
                s += " (the declared pattern)"
        else:
            near = self.nearest
            s = f"matches none of the candidates{self.factors_label}; nearest is {near.label}, which it {near.describe().replace('differs', 'differs from')}"
            extra = [r for r in self.results if r is not near and ("jc" in r.candidate.roles or "declared" in r.candidate.roles)]
            gs = [r for r in self.results if r is not near and r not in extra and "gs order" in r.candidate.roles]
            if gs:
                extra.append(min(gs, key=lambda r: r.errors[-1]))
            for r in extra:
                s += f"; from {r.label} it {r.describe()}"
            if self.fit is not None and self.fit.is_sign_flipped:
                s += "; its freshness term eta^2 M_S g has the WRONG SIGN"
            elif self.fit is not None and not self.fit.is_pattern_form:
                s += "; its second-order term is that of no delay pattern (not a scheme of Definition 2)"
            if dl is not None:
                s += f"; declared {dl}"
        return s

    @property
    def diagnosis(self) -> str:
        """A short code for what was found.

        ``"declared"`` (matches the declared pattern), ``"match"`` (matches a
        candidate, nothing declared), ``"wrong-order"`` (declared full GS,
        matches GS in another order), ``"jc-instead"`` (declared a sequential
        scheme, matches JC), ``"other-pattern"`` (matches another pattern, e.g.
        the inferred partial one), ``"sign-flip"`` (freshness term of the wrong
        sign), ``"not-a-scheme"`` (second-order term not of delay-pattern
        form), ``"first-order"`` (differs from every candidate at first
        order), ``"nondeterministic"``, or ``"no-match"``.
        """
        if not self.deterministic:
            return "nondeterministic"
        m = self.matches
        dl = self.declared_label
        if m:
            if dl is None:
                return "match"
            if dl in m:
                return "declared"
            if self.declared.is_full_gs() and any(self.result(x).candidate.pattern.is_full_gs() for x in m):
                return "wrong-order"
            if not self.declared.is_jacobi and "jc" in m:
                return "jc-instead"
            return "other-pattern"
        if self.fit is not None and self.fit.is_sign_flipped:
            return "sign-flip"
        finite = [r.order for r in self.results if math.isfinite(r.order)]
        if finite and max(finite) < 1.5:
            return "first-order"
        if self.fit is not None and not self.fit.is_pattern_form:
            return "not-a-scheme"
        return "no-match"

    def table(self, fmt: str = "github") -> str:
        """Candidates with their largest relative error, error at the smallest eta, and observed order."""
        from tabulate import tabulate

        rows = []
        for r in self.results:
            tag = r.label + (" (declared)" if "declared" in r.candidate.roles else "") + (" (inferred)" if "inferred" in r.candidate.roles else "")
            rows.append(
                [
                    tag,
                    f"{max(r.rel_errors):.2e}",
                    f"{r.rel_errors[-1]:.2e}",
                    "" if not math.isfinite(r.order) else f"{r.order:.2f}",
                    "MATCH" if r.matches else "differs",
                ]
            )
        head = ["candidate", "max rel. error", f"rel. error at eta={self.etas[-1]:.3g}", "order of difference", "verdict"]
        return tabulate(rows, headers=head, tablefmt=fmt, disable_numparse=True)

    def text(self, verbose: bool = False) -> str:
        """The full human-readable report."""
        t = self.task
        lines = [
            f"step: {self.name}",
            f"task: {t.name} ({t.n_blocks} blocks: {', '.join(t.block_names)}; {t.num_params()} parameters; float64)",
            f"states: {len(self.seeds)} seeded (seeds {', '.join(map(str, self.seeds))}, perturbation {self.perturb:g}); "
            f"eta = {self.etas[0]:.4g} * 2^-k, k = 0..{len(self.etas) - 1}",
            f"match tolerance: ||step - reference|| <= {self.rtol:g} ||reference - theta|| + {self.atol_eps:g} eps ||theta|| at every state and eta",
            f"declared pattern: {self.declared_label or 'none'}",
        ]
        if self.factors is not None:
            how = "given by --block-lr" if self.factors.source != "inferred" else "inferred from the first-order term"
            lines.append(f"step factors ({how}): {self.factors.text(t.block_names)}")
        if self.route is not None:
            lines.append(self.route.describe())
        lines += [
            "",
            self.table(),
            "",
        ]
        if self.fit is not None:
            lines += [
                "second-order term fitted as sum_j a_ij H_ij g_j (a pattern S has a_ij = 1 for (i,j) in S, 0 otherwise):",
                self.fit.table(),
                "",
            ]
        if verbose:
            for r in self.results:
                lines += [f"{r.label}: error ||step - reference|| (max over states) against eta", r.study.table(), ""]
        for n in self.notes:
            lines.append("note: " + n)
        lines.append("verdict: " + self.verdict())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "task": self.task.name,
            "blocks": self.task.block_names,
            "declared": self.declared_label,
            "etas": self.etas,
            "seeds": self.seeds,
            "perturb": self.perturb,
            "rtol": self.rtol,
            "atol_eps": self.atol_eps,
            "matches": self.matches,
            "nearest": self.nearest.label,
            "ok": self.ok,
            "diagnosis": self.diagnosis,
            "deterministic": self.deterministic,
            "verdict": self.verdict(),
            "candidates": [r.to_dict() for r in self.results],
            "fit": None if self.fit is None else self.fit.to_dict(),
            "notes": list(self.notes),
            "optimizer": self.optimizer,
            "factors": None if self.factors is None else self.factors.to_dict(),
            "curvature_route": None if self.route is None else self.route.to_dict(),
        }


def _compare(user_outs, refs, states, etas, rtol, atol_eps) -> tuple[list, list, list, list]:
    """Per ``eta``: max error, max relative error, all-within flag, and the largest tolerance over states."""
    errors, rels, within, tols = [], [], [], []
    for ei in range(len(etas)):
        e_max, r_max, t_max, ok = 0.0, 0.0, 0.0, True
        for si, st in enumerate(states):
            u, r = user_outs[si][ei], refs[si][ei]
            err = float(tree.norm(tree.sub(u, r)))
            stepn = float(tree.norm(tree.sub(r, st)))
            thr = rtol * stepn + atol_eps * EPS64 * float(tree.norm(st))
            e_max = max(e_max, err)
            t_max = max(t_max, thr)
            r_max = max(r_max, err / stepn if stepn > 0 else (0.0 if err == 0 else math.inf))
            ok = ok and err <= thr
        errors.append(e_max)
        rels.append(r_max)
        within.append(ok)
        tols.append(t_max)
    return errors, rels, within, tols


def _evaluate(cand: Candidate, user: UserStep, states, etas, user_outs, rtol, atol_eps, factors=None,
              spec=None, opt_states=None) -> CandidateResult:
    refs = [[_reference(user.task, st, cand.pattern, h, factors, spec, None if opt_states is None else opt_states[si])
             for h in etas] for si, st in enumerate(states)]
    errors, rels, within, tols = _compare(user_outs, refs, states, etas, rtol, atol_eps)
    kept = [(h, e) for h, e, w in zip(etas, errors, within) if not w]
    dropped = [(h, e) for h, e, w in zip(etas, errors, within) if w]
    study = observe_order([h for h, _ in kept], [e for _, e in kept])
    # points at round-off carry no order information: dropped (and listed), never fitted
    study.dropped = dropped
    study.floor = max((t for t, w in zip(tols, within) if w), default=0.0)
    return CandidateResult(cand, list(etas), errors, rels, within, study)


@computes_with_threads
def identify_step(
    user: UserStep,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    perturb: float = 0.5,
    eta0: float | None = None,
    n_etas: int = 5,
    rtol: float = 1e-9,
    atol_eps: float = 64.0,
    max_all_orders: int = 4,
    fit: bool = True,
    block_lr: str | Mapping | None = None,
    infer_factors: bool = True,
    optimizer=None,
) -> StepReport:
    """Which scheme does ``user.step`` perform?  (See the module docstring.)

    Args:
        user: the :class:`UserStep` (task in float64).
        seeds: seeds of the states (:func:`seeded_states`).
        perturb: perturbation size of the states, relative to each tensor's RMS.
        eta0: largest step size (default :func:`default_eta0`).
        n_etas: number of step sizes ``eta0 * 2^-k``, ``k = 0..n_etas-1`` (>= 3).
        rtol, atol_eps: the match tolerance, per state and ``eta``:
            ``||U - R|| <= rtol * ||R - theta|| + atol_eps * eps64 * ||theta||``
            (round-off relative to the step size, plus the round-off of
            storing ``theta - eta g`` itself).
        max_all_orders: try every GS order up to this many blocks.
        fit: also fit the second-order term (:func:`freshness_fit`) and try
            the pattern it suggests as a candidate.
        block_lr: per-block step factors ``"NAME=FACTOR,..."`` or ``{name:
            factor}`` (``crosscurv run --block-lr``): block ``i`` of every
            candidate steps with ``eta f_i``.
        infer_factors: with no ``block_lr``, read the factors from the
            step's first-order term (:func:`infer_step_factors`) and use them
            when they differ between blocks.
        optimizer: ``"momentum:BETA"`` or ``"adam[:B1,B2,EPS]"``
            (:func:`crosscurv.numeric.optimizers.parse_optimizer`): the step is called
            as ``step(params, lr, state)`` with a seeded optimizer state
            (:func:`seeded_optimizer_states`, heavy ball's buffer or Adam's
            moments at step 3) and compared with the optimizer-aware scheme
            steps of :func:`crosscurv.numeric.optimizers.optimizer_scheme_step` (block
            ``i``'s fresh gradient feeds its move and its state).  The
            factors are not inferred and the second-order fit is skipped
            (the fit's form is that of plain gradient steps).

    Returns:
        a :class:`StepReport`.  Curvature products (the default ``eta0`` and
        the fit) fall back to central differences of gradients when the model
        has no second derivatives (:class:`CurvatureRoute`).
    """
    if n_etas < 3:
        raise ValidationInputError(f"need at least 3 step sizes to observe an order, got {n_etas}")
    task = user.task
    given = None
    if block_lr is not None:
        fs = block_factors(task, block_lr)
        given = StepFactors(fs, list(fs), [0.0] * task.n_blocks, "--block-lr")
    states = seeded_states(task, seeds, perturb)
    spec = parse_optimizer(optimizer)
    opt_states = seeded_optimizer_states(task, spec, states, seeds) if spec.stateful else None

    def ost(si):
        return None if opt_states is None else opt_states[si]

    route = CurvatureRoute(task.loss)
    if eta0 is None:
        eta0 = default_eta0(task, states, route=route)
    if not (eta0 > 0 and math.isfinite(eta0)):
        raise ValidationInputError(f"eta0 must be a positive finite number, got {eta0!r}")
    etas = [eta0 * 2.0**-k for k in range(n_etas)]
    user_outs = [[_call_step(user.step, st, h, user.name, ost(si)) for h in etas] for si, st in enumerate(states)]

    # determinism: the same input again
    again = _call_step(user.step, states[0], etas[0], user.name, ost(0))
    jc0 = scheme_step(task, states[0], jacobi(task.n_blocks), etas[0])
    stepn = float(tree.norm(tree.sub(jc0, states[0]))) or 1.0
    nondet = float(tree.norm(tree.sub(again, user_outs[0][0]))) / stepn
    deterministic = nondet <= rtol

    factors, notes = given, []
    if factors is None and infer_factors and deterministic and not spec.stateful:
        factors, notes = _inferred(task, states, etas, user_outs)
    fl = None if factors is None else factors.factors
    cands = candidate_patterns(task, user.pattern, max_all_orders)
    results = [_evaluate(c, user, states, etas, user_outs, rtol, atol_eps, fl, spec, opt_states) for c in cands]
    report = StepReport(user.name, task, user.pattern, etas, list(seeds), perturb, rtol, atol_eps, results,
                        deterministic=deterministic, nondeterminism=nondet, factors=factors)
    report.notes.extend(notes)
    report.optimizer = spec.describe()
    if spec.stateful:
        report.notes.append(f"optimizer {spec.describe()}: the step got a seeded state ({', '.join(STATE_BUFFERS[spec.name])}) "
                            "and is compared with the optimizer-aware scheme steps; no second-order fit")
    if not deterministic:
        report.notes.append(
            "two calls with the same (params, lr) returned different results: the step keeps state between "
            "calls (for example a gradient cached from an earlier call: a stale gradient)"
        )
    if fit and task.n_blocks > 1 and deterministic and not spec.stateful:
        report.fit = freshness_fit(user, states, etas[-1], factors=fl, route=route)
        _use_fit(report, user, states, etas, user_outs, cands)
    if route.products or route.rough:
        report.route = route
    if route.name == "central-differences" and report.fit is not None and route.max_rel_error > 0.05:
        report.notes.append(
            f"a curvature product by differences of gradients is uncertain (estimated relative error "
            f"{route.max_rel_error:.1e}, e.g. a ReLU kink or float32 arithmetic inside the model within the "
            "difference step): the second-order fit may be off; the matches above need gradients only")
    _explain(report)
    return report


def _factor_list(report: StepReport):
    return None if report.factors is None else report.factors.factors


def _inferred(task: Task, states, etas, user_outs) -> tuple[StepFactors | None, list]:
    """Inferred factors when they differ between blocks (else ``None``), and notes."""
    if task.n_blocks < 2:
        sf = infer_step_factors(task, states, etas, user_outs)
        return None, _uniform_note(sf)
    sf = infer_step_factors(task, states, etas, user_outs)
    clean = max(sf.residual) <= 1e-3
    fs = sf.factors
    differ = any(abs(f - fs[0]) > 1e-3 * abs(fs[0]) for f in fs)
    if clean and differ:
        return sf, []
    if not clean:
        return None, []
    return None, _uniform_note(sf)


def _uniform_note(sf: StepFactors) -> list:
    if max(sf.residual) > 1e-3:
        return []
    f = sf.factors[0]
    if abs(f - 1.0) <= 1e-3:
        return []
    return [f"the step moves every block {f:.6g} times as far as lr says (its first-order term is -{f:.6g} eta g): "
            "a learning-rate scaling, not a scheme at this lr"]


def _use_fit(report: StepReport, user: UserStep, states, etas, user_outs, cands) -> None:
    task, ft = user.task, report.fit
    names = task.block_names

    def pairs_text(pairs):
        return ", ".join(f"{names[i]}<-{names[j]}" for i, j in pairs)

    if ft.is_pattern_form:
        pairs = ft.inferred_pairs(1)
        try:
            pat = DelayPattern(task.n_blocks, frozenset(pairs), "inferred")
        except PatternError as exc:
            report.notes.append(f"the second-order term has delay-pattern form but its pairs form no acyclic pattern ({exc})")
            return
        known = [c for c in cands if c.pattern.pairs == pat.pairs]
        if known:
            if "inferred" not in known[0].roles:
                known[0].roles.append("inferred")
        else:
            cand = Candidate(_pattern_label(task, pat), pat, ["inferred"])
            report.results.append(_evaluate(cand, user, states, etas, user_outs, report.rtol, report.atol_eps,
                                            _factor_list(report)))
    elif ft.is_sign_flipped:
        report.notes.append(
            "the freshness term has the WRONG SIGN for pairs "
            + pairs_text(ft.inferred_pairs(-1))
            + ": the step's second-order term is -sum H_ij g_j where a sequential scheme has +sum H_ij g_j "
            "(e.g. the fresh state built as theta_j + eta g_j instead of theta_j - eta g_j)"
        )
    else:
        worst = max(ft.residual)
        report.notes.append(
            "the step's second-order term is not of delay-pattern form "
            f"(largest fit residual {worst:.2f}; coefficients not all 0 or 1): it is no scheme of Definition 2 "
            "(e.g. fresh weights combined with stale activations or adjoints)"
        )


def _explain(report: StepReport) -> None:
    if report.matches:
        return
    finite = [r.order for r in report.results if math.isfinite(r.order)]
    if finite and max(finite) < 1.5:
        report.notes.append(
            "the step differs from every candidate at first order in eta: its gradient is not the gradient at "
            "the current point (a stale gradient from another point, a wrong learning-rate scaling, or a wrong sign)"
        )
