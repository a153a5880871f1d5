"""Panel (b): federated learning with partial model personalisation, FedAlt vs FedSim (paper, App.
"Federated Learning").

The model is ``f(x; u, v_i) = f_shared,u(f_personal,v_i(x))`` with the CIFAR ResNet-18 of
:mod:`crosscurv.experiments.tasks.models.resnet` (personal: stem and stages 1-2; shared: stages 3-4
and the classifier; BatchNorm with fixed statistics, as there).  Client ``i`` holds ``n_i`` examples
from a Dirichlet(``alpha``) split.  Round ``t``: the server samples ``S`` clients uniformly without
replacement and broadcasts ``u^t``; each sampled client runs one local procedure with a fresh
optimiser (SGD, momentum, weight decay):

* FedSim (LocalSim): one epoch of joint updates of ``(u, v_i)``, both partial gradients at the same
  local state: JC in each local step;
* FedAlt (LocalAlt): one personal epoch (``v_i`` only, ``u^t`` fixed), then one shared epoch (``u``
  only, the adapted ``v_i^+`` fixed), each over a newly shuffled loader: the block order ``(v_i,
  u)``.

Then ``u^{t+1} = sum_{i in S_t} n_i / (sum_{j in S_t} n_j) u_i^+`` and ``v_i^{t+1} = v_i^+`` for the
sampled clients (the others keep theirs). Both methods share the initialisation, the split, the
client schedule and the loaders' shuffles.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch.nn import functional as F

from crosscurv.numeric import Task

from ...numeric.optimizers import functional_optimizer
from .panel import Panel, derive_seed, seeded

__all__ = ["dirichlet_split", "FLPanel", "client_task", "local_sim_step", "local_alt_step"]


def dirichlet_split(labels, n_clients: int, alpha: float, seed: int, min_size: int = 1,
                    tries: int = 1000) -> list:
    """Class-wise Dirichlet(``alpha``) partition of example indices over ``n_clients`` clients.

    For each class, proportions ``q ~ Dir(alpha 1_M)`` split that class's (shuffled) examples; draws
    are repeated until every client holds at least ``min_size`` examples. Returns one sorted
    ``int64`` index tensor per client.

    Raises:
        ValueError: no valid split in ``tries`` draws (too few examples for the clients).
    """
    from crosscurv.experiments.tasks.errors import DataError

    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        parts = [[] for _ in range(n_clients)]
        for c in np.unique(labels):
            idx = np.flatnonzero(labels == c)
            rng.shuffle(idx)
            q = rng.dirichlet(alpha * np.ones(n_clients))
            cuts = (np.cumsum(q)[:-1] * len(idx)).astype(int)
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [torch.as_tensor(sorted(p), dtype=torch.int64) for p in parts]
    raise DataError(f"no Dirichlet({alpha}) split of {len(labels)} examples gives each of "
                    f"{n_clients} clients "
                    f"{min_size} example(s): use more data (--data) or fewer clients")


def _batches(n: int, batch: int, seed: int) -> list:
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return [perm[i:i + batch] for i in range(0, n, batch)]  # the last, smaller batch is kept


def client_loss(model, u, v, x, y) -> torch.Tensor:
    """``F_i`` on ``(x, y)``: mean cross-entropy of ``f(x; u, v)`` (``v`` keyed ``client0.*``)."""
    return F.cross_entropy(torch.func.functional_call(model, {**v, **u}, (x,), {"client": 0}), y)


def _grads(model, u, v, x, y, wrt: str):
    """``(loss, g_u, g_v)`` for ``wrt`` in ``"u"``, ``"v"``, ``"both"`` (the other gradient is
    ``{}``).
    """
    uu = {k: t.detach().requires_grad_(wrt in ("u", "both")) for k, t in u.items()}
    vv = {k: t.detach().requires_grad_(wrt in ("v", "both")) for k, t in v.items()}
    leaves = ({} if wrt == "v" else uu) | ({} if wrt == "u" else vv)
    with torch.enable_grad():
        loss = client_loss(model, uu, vv, x, y)
        gs = torch.autograd.grad(loss, list(leaves.values()))
    g = dict(zip(leaves, (t.detach() for t in gs)))
    return loss.detach(), {k: g[k] for k in u if k in g}, {k: g[k] for k in v if k in g}


def local_sim_step(model, u, v, x, y, opt, state):
    """One FedSim local step: both gradients at ``(u, v)``, one optimiser update. Returns ``(u, v,
    state, loss)``."""
    loss, gu, gv = _grads(model, u, v, x, y, "both")
    new, state = opt.update({**u, **v}, {**gu, **gv}, state)
    return {k: new[k] for k in u}, {k: new[k] for k in v}, state, loss


def local_alt_step(model, u, v, x, y, opt, state):
    """The sequential version of one local step: ``v`` first, then ``u``'s gradient at ``(u, v^+)``.
    """
    loss, _, gv = _grads(model, u, v, x, y, "v")
    new, state = opt.update({**u, **v}, gv, state)
    v = {k: new[k] for k in v}
    _, gu, _ = _grads(model, u, v, x, y, "u")
    new, state = opt.update({**u, **v}, gu, state)
    return {k: new[k] for k in u}, v, state, loss


def client_task(model, u, v, x, y, weight_decay: float) -> Task:
    """The deterministic local objective ``F_i(u, v; B) + wd/2 ||(u, v)||^2`` (blocks personal, then
    shared)."""
    def loss(p):
        pen = sum((t * t).sum() for t in p.values())
        return client_loss(model, {k: p[k] for k in u}, {k: p[k] for k in v}, x,
                           y) + 0.5 * weight_decay * pen

    return Task({**v, **u}, loss, {"personal": list(v), "shared": list(u)}, "fl-client", {}, "gs")


def plain_convolutions(model) -> None:
    """Compute every convolution with ``torch.nn.Conv2d``'s own forward (same weights, same
    function).

    The practical training needs first derivatives only; the suite's convolution with a hand-written
    double backward is not needed here, and the probes' products use PyTorch's own double backward.
    """
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d) and type(m) is not torch.nn.Conv2d:
            m.__class__ = torch.nn.Conv2d


class FLPanel(Panel):
    """Panel (b): FedAlt (seq) vs FedSim (sim); one step = one communication round."""

    name = "fl"
    seq_label = "FedAlt"
    sim_label = "FedSim"
    step_unit = "round"

    def __init__(self, settings: dict, seed: int, *, device="cpu", dtype=torch.float32,
                 data_path=None, model_path=None):
        from crosscurv.experiments.tasks.data import load_cifar10
        from crosscurv.experiments.tasks.errors import DataError
        from crosscurv.experiments.tasks.models.resnet import FederatedResNet18

        self.s, self.seed = settings, seed
        if data_path is None and settings.get("needs_data"):
            raise DataError("the paper preset of the fl panel needs the CIFAR-10 training set: "
                            "pass --data with a cifar-10-batches-py folder")
        n = settings["examples"] if data_path is None else settings["examples_full"]
        data = load_cifar10(n, path=data_path, dtype=dtype, device=device)
        # contiguous NCHW: the loader's tensor has channels-last strides, and the CPU convolution
        # backward on such minibatches corrupted the heap (torch 2.13, width 2: "double free")
        self.x, self.y = data.x.contiguous(), data.y
        M = settings["clients"]
        self.clients = [i.to(device) for i in dirichlet_split(data.y.cpu().numpy(), M, settings[
            "alpha"], seed)]
        self.n_i = [len(c) for c in self.clients]
        with seeded(seed):
            model = FederatedResNet18(1, settings["width"])
        plain_convolutions(model)
        self.model = model.to(device=device, dtype=dtype).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        named = {k: p.detach().clone() for k, p in self.model.named_parameters()}
        u0 = {k: t for k, t in named.items() if k.startswith("shared.")}
        v0 = {k: t for k, t in named.items() if k.startswith("client0.")}
        self.runs = {r: {"u": dict(u0), "v": [dict(v0) for _ in range(M)]} for r in ("seq", "sim")}
        self.opt = functional_optimizer(**settings["optimizer"])
        self.n_steps = settings["rounds"]
        self.eval_every = settings["eval_every"]
        self.probe_every = settings["probe_every"]
        self._model64 = None
        self.info = {
            "data_source": data.source,
            "examples": len(data),
            "clients": M,
            "client_sizes": self.n_i,
            "split": f"class-wise Dirichlet({settings['alpha']}) over {M} clients (seeded by the "
                     "run's seed)",
            "sampled_per_round": settings["sampled"],
            "model": f"CIFAR ResNet-18 (width {settings['width']}; personal: stem + stages 1-2, "
                     f"shared: stages 3-4 + classifier), BatchNorm with fixed statistics",
            "optimizer": self.opt.describe()
            + ", a fresh optimiser per client and phase each round",
            "batch": settings["batch"],
            "local": "one epoch (FedSim: joint; FedAlt: one personal epoch, then one shared epoch)",
            "aggregation": "shared part weighted by sample count over the sampled clients; "
                           "personal parts kept locally",
            "evaluation": "federated objective sum_i p_i F_i(u, v_i) over all clients' examples "
                          "(p_i = n_i / n)",
        }

    # -- one round ---------------------------------------------------------------
    def _sampled(self, k: int) -> list:
        gen = torch.Generator().manual_seed(derive_seed(self.seed, 2, k))
        return torch.randperm(len(self.clients), generator=gen)[: self.s["sampled"]].tolist()

    def _loader(self, k: int, i: int, phase: int) -> list:
        idx = self.clients[i]
        return [idx[b.to(idx.device)] for b in _batches(len(idx), self.s["batch"], derive_seed(
            self.seed, 3, k, i, phase))]

    def _local(self, r: str, k: int, i: int, u, v):
        opt, losses = self.opt, []
        if r == "sim":
            st = opt.init_state(None)
            for b in self._loader(k, i, 0):
                u, v, st, loss = local_sim_step(self.model, u, v, self.x[b], self.y[b], opt, st)
                losses.append(float(loss))
            return u, v, losses
        st = opt.init_state(None)
        for b in self._loader(k, i, 0):  # personal phase, u^t fixed
            loss, _, gv = _grads(self.model, u, v, self.x[b], self.y[b], "v")
            new, st = opt.update(v, gv, st)
            v = new
            losses.append(float(loss))
        st = opt.init_state(None)
        for b in self._loader(k, i, 1):  # shared phase, v_i^+ fixed, a newly shuffled loader
            loss, gu, _ = _grads(self.model, u, v, self.x[b], self.y[b], "u")
            new, st = opt.update(u, gu, st)
            u = new
            losses.append(float(loss))
        return u, v, losses

    def objective(self, u, V) -> float:
        """``F(u, V) = sum_i p_i F_i(u, v_i)`` over (up to ``eval_per_client`` of) every client's
        examples."""
        total, n = 0.0, sum(self.n_i)
        with torch.no_grad():
            for i, idx in enumerate(self.clients):
                idx = idx[: self.s["eval_per_client"]]
                total += self.n_i[i] / n * float(client_loss(self.model, u, V[i], self.x[idx],
                                                             self.y[idx]))
        return total

    def step(self, k: int) -> dict:
        sampled = self._sampled(k)
        row = {"k": k, "epoch": float(k)}
        w = torch.tensor([self.n_i[i] for i in sampled], dtype=torch.float64)
        w = (w / w.sum()).tolist()
        for r in ("seq", "sim"):
            run, losses, new_u = self.runs[r], [], None
            for wi, i in zip(w, sampled):
                u_i, v_i, li = self._local(r, k, i, run["u"], run["v"][i])
                run["v"][i] = v_i
                losses += li
                new_u = {kk: wi * t for kk, t in u_i.items()} if new_u is None else {kk: new_u[kk]
                    + wi * t for kk, t in u_i.items()}
            run["u"] = new_u
            row[f"loss_{r}"] = sum(losses) / len(losses)
        row["loss_gs"] = float("nan")
        row["diff"] = row["loss_seq"] - row["loss_sim"]
        nan = float("nan")
        if k % self.eval_every == 0 or k == self.n_steps:
            es, em = self.objective(self.runs["seq"]["u"], self.runs["seq"]["v"]), self.objective(
                self.runs["sim"]["u"], self.runs["sim"]["v"])
            row.update(eval_seq=es, eval_sim=em, eval_gs=nan, eval_diff=es - em)
        else:
            row.update(eval_seq=nan, eval_sim=nan, eval_gs=nan, eval_diff=nan)
        return row

    # -- the criterion at a local step of the FedSim run ---------------------------------
    def probe(self, k: int) -> dict:
        """At round ``k``'s first sampled client, at the last local step of its FedSim epoch
        (momentum buffer built up)."""
        from .criterion import probe_point, to_float64

        if self._model64 is None:
            self._model64 = copy.deepcopy(self.model).to(torch.float64)
        m64 = self._model64
        i = self._sampled(k)[0]
        u, v = to_float64(self.runs["sim"]["u"]), to_float64(self.runs["sim"]["v"][i])
        x64 = to_float64(self.x)
        loader = self._loader(k, i, 0)
        st = self.opt.init_state(None)
        for b in loader[:-1]:
            u, v, st, _ = local_sim_step(m64, u, v, x64[b], self.y[b], self.opt, st)
        b = loader[-1]
        xb, yb = x64[b], self.y[b]
        wd = self.opt.weight_decay
        task = client_task(m64, u, v, xb, yb, wd)
        uk, vk = list(u), list(v)

        def seq(p):
            uu, vv, _, _ = local_alt_step(m64, {q: p[q] for q in uk}, {q: p[q] for q in vk}, xb, yb,
                                          self.opt, st)
            return {**vv, **uu}

        def sim(p):
            uu, vv, _, _ = local_sim_step(m64, {q: p[q] for q in uk}, {q: p[q] for q in vk}, xb, yb,
                                          self.opt, st)
            return {**vv, **uu}

        params = task.params
        return probe_point(task, params, self.opt.lr, self.opt, st, seq, sim,
                           extra_grad=lambda g: {q: g[q] - wd * params[q] for q in g})

    def state_dict(self) -> dict:
        return {"runs": self.runs}

    def load_state_dict(self, state: dict) -> None:
        self.runs = state["runs"]
