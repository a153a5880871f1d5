"""LoRA on a T5 pretrained by the committed recipe: the batch, the cache, the factory."""

from __future__ import annotations

import json

import pytest
import torch

from crosscurv.experiments.tasks import lora_pretrained as lp

#: the recipe at a size and length a test affords (the committed one: minutes)
TINY = {**lp.RECIPE, "t5": {"d_model": 16, "d_kv": 4, "num_heads": 2, "d_ff": 32, "num_layers": 1},
        "batch": 4, "steps": 3}


def test_span_batch_masks_one_span_and_targets_it():
    gen = torch.Generator().manual_seed(0)
    seqs = [list(range(10, 30)), list(range(40, 47))]  # 20 and 7 bytes: spans of 3 and 1
    b = lp._span_batch(seqs, gen, sentinel=99, eos=1)
    for i, seq in enumerate(seqs):
        inp = b["input_ids"][i][b["attention_mask"][i] == 1].tolist()
        lab = [t for t in b["labels"][i].tolist() if t != -100]
        span = lab[1:-1]
        assert lab[0] == 99 and lab[-1] == 1 and len(span) == (3 if i == 0 else 1)
        cut = inp.index(99)
        assert inp[:cut] + span + inp[cut + 1:-1] == seq and inp[-1] == 1
        # decoder input: the labels shifted right after the start id 0
        assert b["decoder_input_ids"][i, 0] == 0
        assert b["decoder_input_ids"][i, 1:len(lab)].tolist() == lab[:-1]


def test_pretraining_is_deterministic_cached_and_feeds_the_lora_task(tmp_path, monkeypatch):
    a, b = lp.pretrain(tmp_path / "a", TINY), lp.pretrain(tmp_path / "b", TINY)
    assert a["weights_sha256"] == b["weights_sha256"]  # the same bits twice on this machine
    assert json.loads((tmp_path / "a" / "recipe.json").read_text())["recipe"] == TINY
    other = lp.pretrain(tmp_path / "c", {**TINY, "seed": 1})
    assert other["weights_sha256"] != a["weights_sha256"]
    monkeypatch.setenv("CROSSCURV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(lp, "RECIPE", TINY)
    folder = lp.ensure_pretrained()
    assert folder == lp.cache_folder() and (folder / "recipe.json").is_file()
    calls = []
    monkeypatch.setattr(lp, "pretrain", lambda *a, **k: calls.append(a))
    assert lp.ensure_pretrained() == folder and calls == []  # cached: not trained again
    task, settings = lp.lora_pretrained(seed=0, preset="smoke")
    assert settings["pretrain_recipe"] == folder.name
    assert str(folder) in task.info["model_source"]
    loss = task.loss(task.params)
    assert loss.ndim == 0 and torch.isfinite(loss)
    # LoRA's B = 0 at the start: the loss is the pretrained T5's alone, not a random T5's
    from crosscurv.experiments.tasks import build_task

    rnd, _ = build_task("lora", "smoke", seed=0)
    assert float(rnd.loss(rnd.params)) != pytest.approx(float(loss))
