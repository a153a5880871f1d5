"""T5 with LoRA adapters on the attention query/value projections (paper, Sec. 5 and App. E.3).

* Model: ``transformers.T5ForConditionalGeneration`` with eager attention (fused kernels have no
  double derivative on the CPU), layer norms accumulating in float64 for a float64 model; seeded
  random weights of a :class:`T5Size` and the ByT5 tokenizer, or ``model_path`` (a local folder or
  the offline Hugging Face cache).
* LoRA (``peft``): ``W_0 + (alpha / r) B A`` on ``q`` and ``v`` of every attention, ``r = 8``,
  ``alpha = 16``, no dropout or bias; re-initialised ``A_ij ~ N(0, 2 / d_in)``, ``B = 0``; base
  weights frozen.
* Text-to-text SST-2: ``"sentiment classification: " + sentence`` -> ``"negative"`` /
  ``"positive"``; loss = mean token cross-entropy over the target tokens.

The trainable parameters are the LoRA factors, keyed by their full peft names, substituted with
:func:`torch.func.functional_call`.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from crosscurv.experiments.tasks.errors import DataError

__all__ = [
    "T5Size",
    "TARGET_MODULES",
    "PROMPT_PREFIX",
    "random_t5",
    "pretrained_t5",
    "add_lora",
    "lora_blocks",
    "encode_examples",
    "seq2seq_loss",
]

#: peft ``target_modules`` regex (full match on module names of the base T5):
#: q and v of encoder self-attention (layer.0), decoder self-attention
#: (layer.0) and decoder cross-attention (layer.1).
TARGET_MODULES = (
    r"(encoder\.block\.\d+\.layer\.0\.SelfAttention"
    r"|decoder\.block\.\d+\.layer\.0\.SelfAttention"
    r"|decoder\.block\.\d+\.layer\.1\.EncDecAttention)\.(q|v)"
)
PROMPT_PREFIX = "sentiment classification: "


@dataclass(frozen=True)
class T5Size:
    """Architecture of a randomly initialised T5 (T5-base: 768, 64, 12, 3072, 12)."""

    d_model: int
    d_kv: int
    num_heads: int
    d_ff: int
    num_layers: int
    vocab_size: int = 384  # the ByT5 tokenizer's 3 specials + 256 bytes + 125 sentinels

    def to_dict(self) -> dict:
        return asdict(self)


def _quiet_transformers():
    """``transformers``, quiet, with its T5 classes importable (or one :class:`DataError` line).

    ``transformers`` imports its model classes lazily; a broken optional dependency (for example a
    ``torchvision`` built for another torch, which ``backpack-for-pytorch`` pulls in) surfaces only
    then, as an error that hides its cause. The cause is named here instead.
    """
    import transformers

    from crosscurv.experiments.tasks.errors import DataError

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        transformers.T5ForConditionalGeneration  # noqa: B018 (triggers the lazy import)
    except Exception as exc:  # the lazy import hides the cause in __cause__/__context__
        root = exc
        while root.__cause__ is not None or root.__context__ is not None:
            root = root.__cause__ or root.__context__
        hint = (" (a torchvision that does not match the installed torch: uninstall it or install "
                "the matching build)" if "torchvision" in str(root) else "")
        raise DataError(f"transformers cannot import its T5 model: {type(root).__name__}: "
                        f"{root}{hint}") from exc
    return transformers


def _full_precision_layer_norms(model) -> None:
    """Make T5's RMS layer norms accumulate in ``promote_types(dtype, float32)`` (``transformers``'
    always use float32, which rounds a float64 model's layer norms to float32 precision), by
    switching each instance's class.
    """
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    class _T5LayerNormPromoted(T5LayerNorm):
        def forward(self, hidden_states):
            acc = torch.promote_types(hidden_states.dtype, torch.float32)
            variance = hidden_states.to(acc).pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            if self.weight.dtype in (torch.float16, torch.bfloat16):
                hidden_states = hidden_states.to(self.weight.dtype)
            return self.weight * hidden_states

    for module in model.modules():
        if type(module) is T5LayerNorm:
            module.__class__ = _T5LayerNormPromoted


def _portable_t5_init(model, generator: torch.Generator | None = None) -> None:
    """Redraw every weight of a ``T5ForConditionalGeneration`` as ``transformers``' T5
    initialisation does (``initializer_factor`` 1), but in float64 and rounded
    (:func:`crosscurv.numeric.portable_random.portable_normal_`), so that every CPU draws the same
    weights.

    Embedding ``N(0, 1)`` (tied with the LM head), attention ``q ~ N(0, 1/(d_model d_kv))``, ``k, v
    ~ N(0, 1/d_model)``, ``o ~ N(0, 1/(heads d_kv))``, relative attention bias ``N(0, 1/d_model)``,
    feed-forward ``wi ~ N(0, 1/d_model)``, ``wo ~ N(0, 1/d_ff)``, layer norms 1. Raises
    ``RuntimeError`` when a parameter is left undrawn (a ``transformers`` version with other
    modules).
    """
    from transformers.models.t5.modeling_t5 import T5Attention, T5DenseActDense, T5LayerNorm

    from crosscurv.numeric.portable_random import portable_normal_

    cfg = model.config
    done: set = set()

    def draw(p, std):
        if id(p) not in done:  # tied weights are drawn once
            portable_normal_(p, 0.0, std, generator)
            done.add(id(p))

    with torch.no_grad():
        draw(model.shared.weight, 1.0)
        for module in model.modules():
            if isinstance(module, T5LayerNorm):
                module.weight.fill_(1.0)
                done.add(id(module.weight))
            elif isinstance(module, T5DenseActDense):
                draw(module.wi.weight, cfg.d_model ** -0.5)
                draw(module.wo.weight, cfg.d_ff ** -0.5)
            elif isinstance(module, T5Attention):
                draw(module.q.weight, (cfg.d_model * cfg.d_kv) ** -0.5)
                draw(module.k.weight, cfg.d_model ** -0.5)
                draw(module.v.weight, cfg.d_model ** -0.5)
                draw(module.o.weight, (cfg.num_heads * cfg.d_kv) ** -0.5)
                if module.has_relative_attention_bias:
                    draw(module.relative_attention_bias.weight, cfg.d_model ** -0.5)
    left = [n for n, p in model.named_parameters() if id(p) not in done]
    if left:
        raise RuntimeError(f"the portable T5 initialisation does not know {left[0]} ({len(left)} "
                           "parameters)")


def random_t5(size: T5Size):
    """A T5 of ``size`` with random weights (global RNG: seed it) and the ByT5 tokenizer.

    The weights follow ``transformers``' T5 initialisation, drawn in float64 and rounded
    (:func:`_portable_t5_init`): the same bits on every CPU.

    Returns:
        ``(model, tokenizer, source)``; ``model`` is in eval mode, dropout 0,
        eager attention, float32.
    """
    transformers = _quiet_transformers()
    cfg = transformers.T5Config(
        vocab_size=size.vocab_size,
        d_model=size.d_model,
        d_kv=size.d_kv,
        num_heads=size.num_heads,
        d_ff=size.d_ff,
        num_layers=size.num_layers,
        num_decoder_layers=size.num_layers,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    cfg._attn_implementation = "eager"
    model = transformers.T5ForConditionalGeneration(cfg)
    _portable_t5_init(model)
    _full_precision_layer_norms(model)
    tokenizer = transformers.ByT5Tokenizer()
    source = (f"random T5 weights (seeded; d_model={size.d_model}, layers={size.num_layers}, "
              f"heads={size.num_heads}, d_ff={size.d_ff}) with the ByT5 byte tokenizer")
    return model.eval(), tokenizer, source


def pretrained_t5(model_path):
    """T5 weights and tokenizer from a local folder or the offline Hugging Face cache.

    Raises:
        DataError: the path does not exist (and is not a cached model name)
            or does not hold a loadable T5 checkpoint.
    """
    transformers = _quiet_transformers()
    p = Path(str(model_path)).expanduser()
    looks_like_path = p.is_absolute() or str(model_path).startswith((".", "~")) or p.exists()
    if looks_like_path and not p.exists():
        raise DataError(f"T5 model path: {p} does not exist")
    target = str(p) if p.exists() else str(model_path)
    try:
        model = transformers.T5ForConditionalGeneration.from_pretrained(
            target, local_files_only=True, attn_implementation="eager", dtype=torch.float32
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(target, local_files_only=True)
    except Exception as exc:  # one line for the CLI
        where = ("local folder" if p.exists() else "name (not a folder here; looked in the "
                                                   "offline Hugging Face cache)")
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot load a T5 model from {target} ({where}): {msg}") from None
    _full_precision_layer_norms(model)
    return (model.eval(), tokenizer, f"pretrained T5 weights from {target} "
        f"({model.config.num_layers} layers, " f"d_model={model.config.d_model})")


def add_lora(model, *, r: int = 8, alpha: int = 16, generator: torch.Generator | None = None,
             dropout: float = 0.0):
    """Wrap ``model`` with LoRA on :data:`TARGET_MODULES` and initialise the factors.

    ``A`` (``r x d_in``) ~ ``N(0, 2 / d_in)`` from ``generator``, ``B`` (``d_out x r``) = 0.
    ``dropout`` is peft's adapter dropout on the adapter branch's input (active only in train mode).
    Returns the peft model (eval mode); its trainable parameters are exactly the factors.
    """
    from peft import LoraConfig, get_peft_model

    from crosscurv.numeric.portable_random import portable_normal_

    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, bias="none",
                     target_modules=TARGET_MODULES)
    with warnings.catch_warnings():  # transformers deprecation chatter from inside peft
        warnings.simplefilter("ignore", FutureWarning)
        peft_model = get_peft_model(model, cfg)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if ".lora_A." in name:
                d_in = p.shape[1]
                portable_normal_(p, 0.0, (2.0 / d_in) ** 0.5, generator)
            elif ".lora_B." in name:
                p.zero_()
    return peft_model.eval()


def lora_blocks(names) -> dict:
    """The paper's two blocks: ``{"B": [all lora_B], "A": [all lora_A]}`` (GS updates B first)."""
    return {
        "B": [n for n in names if ".lora_B." in n],
        "A": [n for n in names if ".lora_A." in n],
    }


def encode_examples(tokenizer, sentences, labels, *, seq_len: int, target_len: int | None = None,
                    label_words=("negative", "positive")) -> dict:
    """Tokenise the text-to-text batch.

    Returns:
        ``{"input_ids", "attention_mask"}`` of shape ``(n, seq_len)``
        (prefix + sentence, truncated/padded), ``"decoder_input_ids"`` and
        ``"labels"`` of shape ``(n, target_len)`` (targets shifted right
        after the decoder start id; ``-100`` at padding), all ``int64``, and
        ``"target_len"`` (the longest encoded target when not given).
    """
    texts = [PROMPT_PREFIX + s for s in sentences]
    enc = tokenizer(texts, max_length=seq_len, truncation=True, padding="max_length",
                    return_tensors="pt")
    targets = [label_words[y] for y in labels]
    if target_len is None:
        target_len = max(len(tokenizer(w).input_ids) for w in label_words)
    tgt = tokenizer(targets, max_length=target_len, truncation=True, padding="max_length",
                    return_tensors="pt")
    ids = tgt.input_ids
    start = torch.full((ids.shape[0], 1), int(_decoder_start(tokenizer)), dtype=ids.dtype)
    decoder_input_ids = torch.cat([start, ids[:, :-1]], dim=1)
    lab = ids.clone()
    lab[tgt.attention_mask == 0] = -100
    return {
        "input_ids": enc.input_ids,
        "attention_mask": enc.attention_mask,
        "decoder_input_ids": decoder_input_ids,
        "labels": lab,
        "target_len": target_len,
    }


def _decoder_start(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def seq2seq_loss(model, params: dict, batch: dict) -> torch.Tensor:
    """Mean target-token cross-entropy of ``model`` with ``params`` substituted (functional_call).
    """
    out = torch.func.functional_call(
        model,
        params,
        (),
        {
            "input_ids": batch["input_ids"],
            "attention_mask": batch["attention_mask"],
            "decoder_input_ids": batch["decoder_input_ids"],
            "use_cache": False,
        },
        strict=False,
    )
    logits = out.logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1),
                           ignore_index=-100)
