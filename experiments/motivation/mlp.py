"""Panel (a): layer-wise updates of an MLP on MNIST by back-propagation (paper, App. "Layer-Wise
Updates").

``z_l = W_l h_{l-1} + b_l``, ``h_l = relu(z_l)`` (``l < N``), softmax cross-entropy on ``z_N``; one
block ``theta_l = (W_l, b_l)`` per layer. With the preactivation errors ``delta_N = (softmax(z_N) -
y) / m`` and ``delta_l = (delta_{l+1} W_{l+1}) * relu'(z_l)`` the gradients are ``g_{W_l} =
delta_l^T h_{l-1}``, ``g_{b_l} = sum delta_l`` (eqs. of the appendix, the ``1/m`` folded into
``delta_N``). Three practical steps, each applying the optimiser (plain SGD with per-tensor clipping
``Pi_tau``) to one layer at a time from the output down:

* :func:`step_jc` -- one forward, one backward at ``theta^t``: JC;
* :func:`step_inplace` -- the paper's "GS-like" implementation: one backward recursion that
  propagates ``delta`` through the *updated* ``W_l^{t+1}`` while keeping the forward states ``z^t,
  h^t`` and the output residual of ``theta^t``;
* :func:`step_exact_gs` -- exact GS output to input: before layer ``l`` the forward states above
  ``l`` and the adjoints are recomputed at the mixed state (``h_{l-1}^t`` reused, since no layer
  below ``l`` has changed).

Parameters are keyed like :class:`crosscurv.experiments.tasks.models.mlp.MLP` (``layer{l}.weight``,
``layer{l}.bias``) and initialised by it (Xavier-normal weights, zero biases).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from crosscurv.numeric import Task

from ...numeric.optimizers import functional_optimizer
from .panel import Panel, derive_seed, seeded

__all__ = ["logits", "minibatch_loss", "step_jc", "step_inplace", "step_exact_gs", "MLPPanel",
           "mlp_params", "mlp_task", "gs_order"]

def _n_layers(p) -> int:
    return sum(1 for k in p if k.endswith(".weight"))

def _W(p, l):
    return p[f"layer{l}.weight"]

def _b(p, l):
    return p[f"layer{l}.bias"]

def logits(p, x, start: int = 1, h0=None):
    """Forward from layer ``start`` (input ``h0``, default ``x``); returns ``(hs, zs)`` dicts by
    layer.
    """
    n = _n_layers(p)
    h = x if h0 is None else h0
    hs, zs = {start - 1: h}, {}
    for l in range(start, n + 1):
        z = h @ _W(p, l).T + _b(p, l)
        zs[l] = z
        h = torch.relu(z) if l < n else z
        hs[l] = h
    return hs, zs

def minibatch_loss(p, x, y) -> torch.Tensor:
    """Mean softmax cross-entropy ``L_B(theta)`` on the minibatch ``(x, y)``."""
    _, zs = logits(p, x)
    return F.cross_entropy(zs[_n_layers(p)], y)

def _residual(zN, y):
    """``delta_N = (softmax(z_N) - onehot(y)) / m``: derivative of the mean loss in ``z_N``."""
    return (torch.softmax(zN, dim=1) - F.one_hot(y, zN.shape[1]).to(zN.dtype)) / zN.shape[0]

def _layer_update(p, l, delta, h_prev, opt, state):
    grads = {f"layer{l}.weight": delta.T @ h_prev, f"layer{l}.bias": delta.sum(dim=0)}
    return opt.update(p, grads, state)

def step_jc(p, x, y, opt, state):
    """JC: all layer gradients at ``theta^t``, then every layer updated. Returns ``(new, state,
    loss)``."""
    n = _n_layers(p)
    hs, zs = logits(p, x)
    loss = F.cross_entropy(zs[n], y)
    delta = _residual(zs[n], y)
    new = dict(p)
    for l in range(n, 0, -1):
        new, state = _layer_update(new, l, delta, hs[l - 1], opt, state)
        if l > 1:
            delta = (delta @ _W(p, l)) * (zs[l - 1] > 0).to(delta.dtype)  # old weights
    return new, state, loss.detach()

def step_inplace(p, x, y, opt, state):
    """'GS-like' in-place back-propagation: updated weights in the backward recursion, stale states
    and residual."""
    n = _n_layers(p)
    hs, zs = logits(p, x)
    loss = F.cross_entropy(zs[n], y)
    delta = _residual(zs[n], y)  # residual at theta^t, never recomputed
    new = dict(p)
    for l in range(n, 0, -1):
        # layer l now holds theta_l^{t+1}
        new, state = _layer_update(new, l, delta, hs[l - 1], opt, state)
        if l > 1:
            # UPDATED W_l, stale z_{l-1}
            delta = (delta @ _W(new, l)) * (zs[l - 1] > 0).to(delta.dtype)
    return new, state, loss.detach()

def step_exact_gs(p, x, y, opt, state):
    """Exact GS, output to input: forward above ``l`` and adjoints recomputed at each mixed state.
    """
    n = _n_layers(p)
    hs0, zs0 = logits(p, x)
    loss = F.cross_entropy(zs0[n], y)
    new = dict(p)
    for l in range(n, 0, -1):
        if l == n:
            zs = zs0
        else:
            _, zs = logits(new, x, start=l + 1, h0=hs0[l])  # layers l+1..N hold their new values
            zs = {**{j: zs0[j] for j in range(1, l + 1)}, **zs}
        delta = _residual(zs[n], y)
        for j in range(n, l, -1):
            delta = (delta @ _W(new, j)) * (zs[j - 1] > 0).to(delta.dtype)
        new, state = _layer_update(new, l, delta, hs0[l - 1], opt, state)
    return new, state, loss.detach()

def gs_order(n: int) -> str:
    """The pattern spec of GS output to input: ``gs:layerN,...,layer1``."""
    return "gs:" + ",".join(f"layer{l}" for l in range(n, 0, -1))

def mlp_params(widths, seed: int, dtype=torch.float32, device="cpu") -> dict:
    """Initial parameters of :class:`crosscurv.experiments.tasks.models.mlp.MLP` (Xavier-normal,
    zero biases) under ``seed``."""
    from crosscurv.experiments.tasks.models.mlp import MLP

    with seeded(seed):
        model = MLP(widths)
    return {k: v.detach().to(device=device, dtype=dtype).clone() for k,
            v in model.named_parameters()}

def mlp_task(params, x, y, name="mlp-minibatch") -> Task:
    """The deterministic minibatch objective as a :class:`crosscurv.numeric.Task` (blocks input to
    output, GS declared output to input)."""
    from crosscurv.experiments.tasks.models.mlp import mlp_blocks

    n = _n_layers(params)
    return Task(dict(params), lambda p: minibatch_loss(p, x, y), mlp_blocks(n), name, {}, gs_order(
        n))

class MLPPanel(Panel):
    """Panel (a): GS-like in-place back-propagation (seq) vs JC (sim), plus exact GS."""

    name = "mlp"
    seq_label = "GS-like (in-place backprop)"
    sim_label = "JC"
    gs_label = "exact GS"
    step_unit = "step"

    def __init__(self, settings: dict, seed: int, *, device="cpu", dtype=torch.float32,
                 data_path=None, model_path=None):
        from crosscurv.experiments.tasks.data import load_mnist

        self.s, self.seed = settings, seed
        n = settings["examples"] if data_path is None else settings["examples_full"]
        data = load_mnist(n, path=data_path, dtype=dtype, device=device)
        self.x, self.y = data.x, data.y
        ne = min(settings["eval_examples"], len(data))
        # balanced_indices interleaves classes: the head is balanced
        self.eval_idx = torch.arange(ne, device=device)
        self.opt = functional_optimizer(**settings["optimizer"])
        self.batch = settings["batch"]
        self.steps_per_epoch = len(data) // self.batch  # last incomplete batch dropped
        # the paper preset counts epochs (the number of steps then depends on the data used)
        spe = self.steps_per_epoch
        self.n_steps = settings["steps"] if settings.get("epochs") is None else settings[
            "epochs"] * spe
        self.eval_every = settings["eval_every"] or spe
        self.probe_every = settings["probe_every"] if settings["probe_every"] is not None else spe
        p0 = mlp_params(settings["widths"], seed, dtype, device)
        self.runs = {"seq": dict(p0), "sim": dict(p0), "gs": dict(p0)}
        self.states = {r: self.opt.init_state(p0) for r in self.runs}
        self._perm = (None, None)
        self.info = {
            "data_source": data.source,
            "examples": len(data),
            "eval_examples": ne,
            "model": f"MLP {'-'.join(map(str, settings['widths']))}, ReLU, softmax cross-entropy, "
                     "Xavier-normal weights, zero biases",
            "optimizer": self.opt.describe(),
            "batch": self.batch,
            "steps_per_epoch": self.steps_per_epoch,
            "sequential": "in-place back-propagation (updated W in the backward recursion, forward "
                          "states and residual of theta^t)",
            "simultaneous": "JC back-propagation (all gradients at theta^t)",
            "third_run": "exact GS output to input (forward and adjoints recomputed at each "
                         "mixed state)",
            "shuffle": "a new permutation per epoch from a generator seeded by (seed, epoch); "
                       "same for every run",
        }

    def _batch(self, k: int):
        epoch, pos = divmod(k - 1, self.steps_per_epoch)
        if self._perm[0] != epoch:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, 1, epoch))
            self._perm = (epoch, torch.randperm(len(self.y), generator=gen).to(self.y.device))
        idx = self._perm[1][pos * self.batch:(pos + 1) * self.batch]
        return epoch, self.x[idx], self.y[idx]

    def step(self, k: int) -> dict:
        epoch, x, y = self._batch(k)
        fns = {"seq": step_inplace, "sim": step_jc, "gs": step_exact_gs}
        losses = {}
        with torch.no_grad():
            for r, fn in fns.items():
                self.runs[r], self.states[r], losses[r] = fn(self.runs[r], x, y, self.opt,
                                                             self.states[r])
        row = {"k": k, "epoch": epoch + (k - epoch * self.steps_per_epoch) / self.steps_per_epoch,
               "loss_seq": float(losses["seq"]), "loss_sim": float(losses["sim"]), "loss_gs": float(
               losses["gs"])}
        row["diff"] = row["loss_seq"] - row["loss_sim"]
        if k % self.eval_every == 0 or k == self.n_steps:
            xe, ye = self.x[self.eval_idx], self.y[self.eval_idx]
            with torch.no_grad():
                ev = {r: float(minibatch_loss(self.runs[r], xe, ye)) for r in self.runs}
            row.update(eval_seq=ev["seq"], eval_sim=ev["sim"], eval_gs=ev["gs"], eval_diff=ev[
                "seq"] - ev["sim"])
        else:
            row.update(eval_seq=float("nan"), eval_sim=float("nan"), eval_gs=float("nan"),
                       eval_diff=float("nan"))
        return row

    def probe(self, k: int) -> dict:
        from .criterion import probe_point, to_float64

        _, x, y = self._batch(k)
        x = to_float64(x)
        p, st = to_float64(self.runs["sim"]), to_float64(self.states["sim"])
        task = mlp_task(p, x, y)

        def run(fn):
            return lambda q: fn(q, x, y, self.opt, st)[0]

        return probe_point(task, p, self.opt.lr, self.opt, st, run(step_inplace), run(step_jc), run(
            step_exact_gs))

    def state_dict(self) -> dict:
        return {"runs": self.runs, "states": self.states}

    def load_state_dict(self, state: dict) -> None:
        self.runs, self.states = state["runs"], state["states"]
