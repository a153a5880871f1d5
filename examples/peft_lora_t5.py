"""LoRA on a small random T5 with peft and torch.optim.SGD: simultaneous, alternating, and a stale
gradient.

Ordinary training code (no crosscurv code inside the updates); the factory wraps it with
:func:`crosscurv.numeric.step_from_training_code`, which loads the parameters, sets the optimizers'
``lr`` for each call and copies the result. The model keeps Hugging Face's default attention
(``sdpa``), which has no second derivatives on the CPU: the report says the curvature was taken by
differences of gradients.  Blocks: all ``lora_B`` matrices, then all ``lora_A`` matrices.

* :func:`simultaneous` -- one forward/backward, one ``opt.step()``: JC;
* :func:`alternating` -- B steps, then a *fresh forward pass* for A's gradient: GS in block order
  (B, A);
* :func:`stale_alternating` -- "alternating" in name and order (``opt_B.step()`` then
  ``opt_A.step()``), but A steps with the gradient of the first backward, taken before B changed:
  JC, not the declared GS.

    crosscurv validate-step examples/peft_lora_t5.py:alternating crosscurv validate-step
    examples/peft_lora_t5.py:stale_alternating
"""

from __future__ import annotations

import torch

from crosscurv.numeric import step_from_training_code

BLOCKS = {"B": "*lora_B*", "A": "*lora_A*"}
#: Model sizes: "tiny" for the tests, "t5-small" (T5-small's shape, random weights) for
#: benchmarks/bench_validate_step.py.
SIZES = {
    "tiny": {},
    "t5-small": dict(d_model=512, d_ff=2048, layers=6, heads=8, rank=8, vocab=32128, seq=16),
}


def build(d_model: int = 8, d_ff: int = 16, layers: int = 1, heads: int = 2, rank: int = 2,
          vocab: int = 16, batch_size: int = 2, seq: int = 5, seed: int = 0):
    """A random T5 (no download) with LoRA adapters on the attention's q and v, and one fixed batch.
    """
    from peft import LoraConfig, get_peft_model
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=vocab, d_model=d_model, d_kv=d_model // heads, d_ff=d_ff,
                      num_layers=layers, num_decoder_layers=layers, num_heads=heads,
                      dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    base = T5ForConditionalGeneration(config)
    model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q", "v"],
                                            lora_dropout=0.0))
    model = model.double()
    with torch.no_grad():  # peft starts B at 0, where the factors do not interact yet
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.5)
    gen = torch.Generator().manual_seed(seed)
    batch = dict(input_ids=torch.randint(1, vocab, (batch_size, seq), generator=gen),
                 labels=torch.randint(1, vocab, (batch_size, seq - 2), generator=gen))
    return model, batch


def _lora(model, which):
    return [p for n, p in model.named_parameters() if f"lora_{which}" in n]


def simultaneous():
    model, batch = build()

    def train_step(model, opt):
        opt.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        opt.step()

    def optimizers(model):
        return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)

    return step_from_training_code(model, train_step, lambda m: m(**batch).loss, BLOCKS,
                                   optimizers=optimizers, pattern="jc",
                                   name="peft LoRA, simultaneous")


def _two_optimizers(model):
    return {"B": torch.optim.SGD(_lora(model, "B"), lr=0.1), "A": torch.optim.SGD(_lora(model,
        "A"), lr=0.1)}


def alternating(size: str = "tiny"):
    model, batch = build(**SIZES[size])

    def train_step(model, opts):
        opts["B"].zero_grad()
        model(**batch).loss.backward()
        opts["B"].step()
        opts["A"].zero_grad()
        model(**batch).loss.backward()  # fresh forward pass at (A, new B)
        opts["A"].step()

    return step_from_training_code(model, train_step, lambda m: m(**batch).loss, BLOCKS,
                                   optimizers=_two_optimizers, pattern="gs:B,A",
                                   name="peft LoRA, alternating")


def stale_alternating():
    model, batch = build()

    def train_step(model, opts):
        for o in opts.values():
            o.zero_grad()
        model(**batch).loss.backward()
        opts["B"].step()
        opts["A"].step()  # BUG: A's gradient was computed before B changed

    return step_from_training_code(model, train_step, lambda m: m(**batch).loss, BLOCKS,
                                   optimizers=_two_optimizers, pattern="gs:B,A",
                                   name="peft LoRA, stale A gradient")
