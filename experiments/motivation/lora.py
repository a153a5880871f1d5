"""Panel (c): LoRA on T5, simultaneous vs alternating factor updates (paper, App. "Simultaneous and
Alternating").

``Y = (W_0 + s B A) Z`` with ``s = alpha / r`` on ``q`` and ``v`` of the encoder self-, decoder
self- and decoder cross-attention (:mod:`crosscurv.experiments.tasks.models.t5lora`, peft), ``r =
8``, ``alpha = 16``, adapter dropout 0.1 on the adapter branch's input, ``A ~ N(0, 2/d_in)``, ``B =
0``. Text-to-text sentiment classification (``"sentiment classification: "`` prefix, targets
``negative`` / ``positive``). Two blocks: all ``B``, all ``A``.

* simultaneous (JC): one forward/backward at ``(A^t, B^t)`` gives both gradients; one optimiser
  update of both;
* alternating (GS, order ``B, A``): ``B``'s gradient and update first, then a *fresh forward pass*
  at ``(A^t, B^{t+1})`` for ``A``'s gradient and update.

Optimiser: the paper does not state it; this panel uses Adam (``torch.optim.Adam`` defaults, no
weight decay), the usual choice for LoRA fine-tuning, with one moment estimate per factor tensor.
Adapter dropout draws its masks from a generator seeded by ``(seed, step)``; the alternating step's
second pass reuses the first pass's masks, so the two schemes differ only in freshness.
"""

from __future__ import annotations

import copy

import torch

from crosscurv.numeric import Task

from ...numeric.optimizers import functional_optimizer
from .panel import Panel, derive_seed, seeded

__all__ = ["LoRAPanel", "lora_model", "step_simultaneous", "step_alternating"]


def _dropouts(model) -> list:
    return [m for n, m in model.named_modules() if n.endswith("lora_dropout.default")]


class LoRAModel:
    """The peft model with a pure minibatch loss ``loss(params, batch, dropout_seed=None)``."""

    def __init__(self, model, batch: dict):
        self.model, self.batch = model, batch
        self.drop = _dropouts(model)

    def loss(self, p: dict, idx, dropout_seed=None) -> torch.Tensor:
        from crosscurv.experiments.tasks.models import t5lora

        b = {k: v[idx] for k, v in self.batch.items()}
        if dropout_seed is None:
            return t5lora.seq2seq_loss(self.model, p, b)
        for m in self.drop:
            m.train(True)
        try:
            with seeded(dropout_seed):
                return t5lora.seq2seq_loss(self.model, p, b)
        finally:
            for m in self.drop:
                m.train(False)

    def grads(self, p: dict, keys, idx, dropout_seed=None):
        """``(loss, {key: gradient})`` with respect to ``keys`` (the others held fixed)."""
        q = {k: v.detach().requires_grad_(k in keys) for k, v in p.items()}
        with torch.enable_grad():
            loss = self.loss(q, idx, dropout_seed)
            gs = torch.autograd.grad(loss, [q[k] for k in keys])
        return loss.detach(), {k: g.detach() for k, g in zip(keys, gs)}


def step_simultaneous(lm: LoRAModel, p, blocks, idx, opt, state, dropout_seed=None):
    """JC: both factor gradients from one pass at ``(A^t, B^t)``, then one update. Returns ``(new,
    state, loss)``."""
    keys = blocks["B"] + blocks["A"]
    loss, g = lm.grads(p, keys, idx, dropout_seed)
    new, state = opt.update(p, g, state)
    return new, state, loss


def step_alternating(lm: LoRAModel, p, blocks, idx, opt, state, dropout_seed=None):
    """GS ``B, A``: update ``B``, then a fresh forward/backward at ``(A^t, B^{t+1})`` for ``A``."""
    loss, gB = lm.grads(p, blocks["B"], idx, dropout_seed)
    p, state = opt.update(p, gB, state)
    # fresh network evaluation, same dropout masks
    _, gA = lm.grads(p, blocks["A"], idx, dropout_seed)
    p, state = opt.update(p, gA, state)
    return p, state, loss


def lora_model(settings: dict, seed: int, *, dtype=torch.float32, device="cpu", data_path=None,
               model_path=None):
    """``(LoRAModel, params, blocks, info)`` of the panel's settings."""
    from crosscurv.experiments.tasks.data import LABEL_WORDS, load_sst2
    from crosscurv.experiments.tasks.models import t5lora

    data = load_sst2(settings["examples"] if data_path is None else settings["examples_full"],
                     path=data_path)
    with seeded(seed):
        if model_path is None:
            base, tokenizer, model_source = t5lora.random_t5(t5lora.T5Size(**settings["t5"]))
        else:
            base, tokenizer, model_source = t5lora.pretrained_t5(model_path)
    model = t5lora.add_lora(base, r=settings["rank"], alpha=settings["alpha"], dropout=settings[
        "dropout"],
                            generator=torch.Generator().manual_seed(seed))
    model = model.to(device=device, dtype=dtype).eval()
    batch = t5lora.encode_examples(tokenizer, data.sentences, data.labels, seq_len=settings[
        "seq_len"],
                                   label_words=LABEL_WORDS)
    target_len = batch.pop("target_len")
    batch = {k: v.to(device) for k, v in batch.items()}
    names = [n for n, q in model.named_parameters() if q.requires_grad]
    params = {n: model.get_parameter(n).detach().clone() for n in names}
    for q in model.parameters():
        q.requires_grad_(False)
    blocks = t5lora.lora_blocks(names)
    info = {
        "data_source": data.source,
        "model_source": model_source,
        "examples": len(data),
        "model": f"T5 + LoRA (r={settings['rank']}, alpha={settings['alpha']}, adapter dropout "
                 f"{settings['dropout']}, bias none) on q/v of encoder self-, decoder self- and "
                 f"decoder cross-attention ({len(names) // 2} modules); A ~ N(0, 2/d_in), B = 0",
        "trainable_params": sum(v.numel() for v in params.values()),
        "seq_len": settings["seq_len"],
        "target_len": int(target_len),
    }
    return LoRAModel(model, batch), params, blocks, info


class LoRAPanel(Panel):
    """Panel (c): alternating B-then-A (seq) vs simultaneous (sim) factor updates."""

    name = "lora"
    seq_label = "alternating (B then A)"
    sim_label = "simultaneous"
    step_unit = "step"

    def __init__(self, settings: dict, seed: int, *, device="cpu", dtype=torch.float32,
                 data_path=None, model_path=None):
        self.s, self.seed = settings, seed
        self.lm, p0, self.blocks, info = lora_model(settings, seed, dtype=dtype, device=device,
                                                    data_path=data_path, model_path=model_path)
        self.n = int(self.lm.batch["input_ids"].shape[0])
        self.opt = functional_optimizer(**settings["optimizer"])
        self.batch = settings["batch"]
        self.steps_per_epoch = max(1, self.n // self.batch)
        self.n_steps = settings["steps"]
        self.eval_every = settings["eval_every"]
        self.probe_every = settings["probe_every"]
        self.runs = {"seq": dict(p0), "sim": dict(p0)}
        self.states = {r: self.opt.init_state(p0) for r in self.runs}
        self._perm = (None, None)
        self._lm64 = None
        self.info = {**info, "optimizer": self.opt.describe()
                     + " (the paper states none; chosen here)",
                     "batch": self.batch, "steps_per_epoch": self.steps_per_epoch,
                     "dropout_masks": "seeded by (seed, step); the alternating step's fresh pass "
                                      "reuses them",
                     "evaluation": "mean target-token cross-entropy on all training examples, no "
                                   "dropout"}

    def _idx(self, k: int):
        epoch, pos = divmod(k - 1, self.steps_per_epoch)
        if self._perm[0] != epoch:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, 4, epoch))
            self._perm = (epoch, torch.randperm(self.n, generator=gen))
        return epoch, self._perm[1][pos * self.batch:(pos + 1) * self.batch]

    def step(self, k: int) -> dict:
        epoch, idx = self._idx(k)
        ds = derive_seed(self.seed, 5, k)
        losses = {}
        for r, fn in (("seq", step_alternating), ("sim", step_simultaneous)):
            self.runs[r], self.states[r], losses[r] = fn(self.lm, self.runs[r], self.blocks, idx,
                                                         self.opt, self.states[r], ds)
        nan = float("nan")
        row = {"k": k, "epoch": epoch + (k - epoch * self.steps_per_epoch) / self.steps_per_epoch,
               "loss_seq": float(losses["seq"]), "loss_sim": float(losses["sim"]), "loss_gs": nan}
        row["diff"] = row["loss_seq"] - row["loss_sim"]
        if k % self.eval_every == 0 or k == self.n_steps:
            everything = torch.arange(self.n)
            with torch.no_grad():
                ev = {r: float(self.lm.loss(self.runs[r], everything)) for r in self.runs}
            row.update(eval_seq=ev["seq"], eval_sim=ev["sim"], eval_gs=nan, eval_diff=ev["seq"]
                       - ev["sim"])
        else:
            row.update(eval_seq=nan, eval_sim=nan, eval_gs=nan, eval_diff=nan)
        return row

    def probe(self, k: int) -> dict:
        from .criterion import probe_point, to_float64

        if self._lm64 is None:
            self._lm64 = LoRAModel(copy.deepcopy(self.lm.model).to(torch.float64), self.lm.batch)
        lm = self._lm64
        _, idx = self._idx(k)
        p, st = to_float64(self.runs["sim"]), to_float64(self.states["sim"])
        task = Task(dict(p), lambda q: lm.loss(q, idx), dict(self.blocks), "lora-minibatch", {},
                    "gs")
        return probe_point(task, p, self.opt.lr, self.opt, st,
                           lambda q: step_alternating(lm, q, self.blocks, idx, self.opt, st)[0],
                           lambda q: step_simultaneous(lm, q, self.blocks, idx, self.opt, st)[0])

    def state_dict(self) -> dict:
        return {"runs": self.runs, "states": self.states}

    def load_state_dict(self, state: dict) -> None:
        self.runs, self.states = state["runs"], state["states"]
