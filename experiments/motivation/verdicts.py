"""``validate-step`` on deterministic versions of each panel's practical steps.

Each factory below returns ``(task, step, declared_pattern)`` in float64, the contract of
``crosscurv validate-step`` (so each can also be run as ``crosscurv validate-step
crosscurv.experiments.motivation.verdicts:mlp_inplace``). "Deterministic" means: one fixed minibatch
(the task's objective), no dropout, no clipping, a fresh optimiser at every call (so ``step(params,
lr)`` is a function of its arguments), and the panel's own step code.

* ``mlp_*``: the three back-propagation steps of :mod:`.mlp` (plain SGD,
  no clipping) on 32 MNIST examples, widths of the smoke preset;
* ``fl_*``: one FedSim local step and one FedAlt local step with
  ``tau_v = tau_u = 1`` (the paper's reduction to two-block GS), and
  FedAlt with two personal and two shared steps on the same minibatch; SGD with
  momentum 0.9 (a fresh buffer: the first step has no momentum term) and
  weight decay 1e-4, whose penalty ``wd/2 ||theta||^2`` is part of the task's
  objective; a width-2 ResNet-18 on 2 CIFAR-10 images;
* ``lora_*``: the simultaneous and alternating steps of :mod:`.lora` with
  plain SGD, and the alternating step with Adam (a fresh state: its first step);
  a small random T5 (2 layers, d_model 32) on 2 sentences of 24 bytes.
"""

from __future__ import annotations

import torch

from ...numeric.optimizers import functional_optimizer

__all__ = ["FACTORIES", "identify", "verdict_rows"]

_W = (784, 32, 24, 16, 16, 16, 16, 16, 10)


def _mlp(kind: str):
    from crosscurv.experiments.tasks.data import load_mnist

    from . import mlp

    data = load_mnist(32, dtype=torch.float64)
    params = mlp.mlp_params(_W, 0, torch.float64)
    task = mlp.mlp_task(params, data.x, data.y, "mlp-deterministic")
    fn = {"jc": mlp.step_jc, "inplace": mlp.step_inplace, "exact_gs": mlp.step_exact_gs}[kind]

    def step(p, lr):
        opt = functional_optimizer("sgd", lr)
        return fn(p, data.x, data.y, opt, opt.init_state(p))[0]

    return task, step, ("jc" if kind == "jc" else task.default_pattern)


def mlp_jc():
    """JC back-propagation (declares ``jc``)."""
    return _mlp("jc")


def mlp_inplace():
    """The paper's "GS-like" in-place back-propagation (declares GS output to input)."""
    return _mlp("inplace")


def mlp_exact_gs():
    """Exact GS back-propagation (declares GS output to input)."""
    return _mlp("exact_gs")


_WD = 1e-4


def _fl(kind: str):
    from crosscurv.experiments.tasks.data import load_cifar10
    from crosscurv.experiments.tasks.models.resnet import FederatedResNet18

    from . import fl
    from .panel import seeded

    data = load_cifar10(2, dtype=torch.float64)
    x, y = data.x.contiguous(), data.y
    with seeded(0):
        model = FederatedResNet18(1, 2)
    fl.plain_convolutions(model)
    model = model.to(torch.float64).eval()
    for q in model.parameters():
        q.requires_grad_(False)
    named = {k: q.detach().clone() for k, q in model.named_parameters()}
    u = {k: t for k, t in named.items() if k.startswith("shared.")}
    v = {k: t for k, t in named.items() if k.startswith("client0.")}
    task = fl.client_task(model, u, v, x, y, _WD)
    uk, vk = list(u), list(v)

    def step(p, lr):
        opt = functional_optimizer("sgd", lr, momentum=0.9, weight_decay=_WD)
        uu, vv = {k: p[k] for k in uk}, {k: p[k] for k in vk}
        if kind == "fedsim":
            uu, vv, _, _ = fl.local_sim_step(model, uu, vv, x, y, opt, opt.init_state(None))
            return {**vv, **uu}
        n = 1 if kind == "fedalt" else 2
        st = opt.init_state(None)
        for _ in range(n):  # personal phase, u fixed
            _, _, g = fl._grads(model, uu, vv, x, y, "v")
            vv, st = opt.update(vv, g, st)
        st = opt.init_state(None)
        for _ in range(n):  # shared phase, v^+ fixed
            _, g, _ = fl._grads(model, uu, vv, x, y, "u")
            uu, st = opt.update(uu, g, st)
        return {**vv, **uu}

    return task, step, ("jc" if kind == "fedsim" else "gs:personal,shared")


def fl_fedsim():
    """One FedSim local step (declares ``jc``)."""
    return _fl("fedsim")


def fl_fedalt():
    """FedAlt with one personal and one shared local step (declares ``gs:personal,shared``)."""
    return _fl("fedalt")


def fl_fedalt_two_steps():
    """FedAlt with two personal and two shared local steps on the same minibatch (declares GS)."""
    return _fl("fedalt2")


def _lora(kind: str):
    from crosscurv.numeric import Task

    from . import lora

    s = {"t5": {"d_model": 32, "d_kv": 8, "num_heads": 4, "d_ff": 64, "num_layers": 2}, "rank": 8,
         "alpha": 16, "dropout": 0.1, "examples": 2, "examples_full": 2, "seq_len": 24}
    lm, params, blocks, _ = lora.lora_model(s, 0, dtype=torch.float64)
    idx = torch.arange(2)
    task = Task(params, lambda q: lm.loss(q, idx), blocks, "lora-deterministic", {}, "gs")

    def step(p, lr):
        opt = functional_optimizer("adam" if kind == "alternating_adam" else "sgd", lr)
        fn = lora.step_simultaneous if kind == "simultaneous" else lora.step_alternating
        return fn(lm, p, blocks, idx, opt, opt.init_state(p))[0]

    return task, step, ("jc" if kind == "simultaneous" else "gs:B,A")


def lora_simultaneous():
    """Simultaneous factor step, plain SGD (declares ``jc``)."""
    return _lora("simultaneous")


def lora_alternating():
    """Alternating B-then-A step with a fresh forward, plain SGD (declares ``gs:B,A``)."""
    return _lora("alternating")


def lora_alternating_adam():
    """The alternating step with Adam's first update (declares ``gs:B,A``)."""
    return _lora("alternating_adam")


#: per panel: ``(label, factory)`` in report order
FACTORIES = {
    "mlp": [("JC back-propagation", mlp_jc), ("in-place back-propagation ('GS-like')", mlp_inplace),
            ("exact GS back-propagation", mlp_exact_gs)],
    "fl": [("FedSim local step", fl_fedsim), ("FedAlt, tau_v = tau_u = 1", fl_fedalt),
           ("FedAlt, tau_v = tau_u = 2 (same minibatch)", fl_fedalt_two_steps)],
    "lora": [("simultaneous, SGD", lora_simultaneous), ("alternating B then A, SGD",
                                                        lora_alternating),
             ("alternating B then A, Adam (first step)", lora_alternating_adam)],
}


def _identify():
    try:  # the public name, where the numeric package exports it
        from crosscurv.numeric import as_user_step, identify_step
    except ImportError:
        from crosscurv.numeric.validation import as_user_step, identify_step
    return as_user_step, identify_step


def identify(panel: str) -> list:
    """``[{"label", "factory", "declared", "verdict", "diagnosis", "matches", "table", "report"}]``
    for ``panel``."""
    as_user_step, identify_step = _identify()
    out = []
    for label, factory in FACTORIES[panel]:
        user = as_user_step(factory(), name=factory.__name__)
        rep = identify_step(user)
        out.append({"label": label,
                    "factory": f"crosscurv.experiments.motivation.verdicts:{factory.__name__}",
                    "declared": rep.declared_label, "verdict": rep.verdict(),
                    "diagnosis": rep.diagnosis, "matches": rep.matches, "table": rep.table(),
                    "report": rep.to_dict()})
    return out


def verdict_rows(results: list) -> list:
    """Short rows ``[label, declared, matches, diagnosis]`` for a summary table."""
    return [[r["label"], r["declared"] or "", ", ".join(r["matches"]) or "none", r["diagnosis"]]
            for r in results]
