"""Tiny random decoder models and an offline BPE tokenizer, plus the transformers references.

Each family gets a 2-layer, 32-wide config of its real architecture. The tokenizer is a
byte-level BPE trained in-process on a few sentences, with the special tokens the LLM reranker
templates use (``<|im_start|>``, ``<think>``...), the words they answer with (yes/no, Yes/No) and
the math-shepherd step tag ``ки`` as single tokens. References pad on the side the test asks for
(LEFT with position ids counted from the first real token, as generation does; RIGHT; or NONE:
one sequence at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HIDDEN = 32
SPECIALS = ["<pad>", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
WORDS = ["yes", "no", "Yes", "No", "ки"]
PAD, BOS, EOS = 0, 1, 2
SIDES = ("left", "right", None)

CORPUS = [
    "The giant panda is a bear species endemic to China.",
    "What is a panda? A panda eats bamboo in the mountains.",
    "Paris is the capital of France and its largest city.",
    "Relevance: 0 for not relevant, 1 for relevant. query: document: instruction:",
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided.",
    "Given a web search query, retrieve relevant passages that answer the query.",
    "Step 1: add two and three. Step 2: multiply by four + check - the answer is twenty.",
    "A: B: Given a query A and a passage B, determine whether the passage contains an answer.",
]

TEXTS = [
    "hi",
    "What is a panda?",
    " ".join(["The giant panda is a bear species endemic to China."] * 12),
    "Paris is the capital of France.",
]

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gpt2")


def build_tokenizer(
    folder: Path, *, add_bos: bool = True, add_eos: bool = False, pad_token: str = "<pad>"
) -> transformers.PreTrainedTokenizerFast:
    """Train a byte-level BPE and save it as a fast tokenizer in ``folder``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.add_tokens(WORDS)
    single = ("<s> " if add_bos else "") + "$A" + (" </s>" if add_eos else "")
    pair = ("<s> " if add_bos else "") + "$A $B" + (" </s>" if add_eos else "")
    used = [t for t in ("<s>", "</s>") if t in single]
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(t, tok.token_to_id(t)) for t in used]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token=pad_token,
        model_input_names=["input_ids", "attention_mask"],
    )
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    return fast


def tiny_config(
    family: str, vocab_size: int, pad_id: int = PAD, **extra: object
) -> transformers.PretrainedConfig:
    ids = dict(vocab_size=vocab_size, pad_token_id=pad_id, bos_token_id=BOS, eos_token_id=EOS)
    if family == "gpt2":
        return transformers.GPT2Config(
            n_embd=HIDDEN, n_layer=2, n_head=4, n_positions=1024, initializer_range=0.2, **ids, **extra
        )
    common = dict(
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.2,
        **ids,
    )
    common.update(extra)
    if family == "llama":
        return transformers.LlamaConfig(**({"tie_word_embeddings": False} | common))
    if family == "mistral":
        return transformers.MistralConfig(**({"sliding_window": None, "tie_word_embeddings": False} | common))
    if family == "qwen2":
        return transformers.Qwen2Config(**({"tie_word_embeddings": True} | common))
    if family == "qwen3":
        return transformers.Qwen3Config(**({"head_dim": 8, "tie_word_embeddings": True} | common))
    if family == "gemma":
        return transformers.GemmaConfig(head_dim=8, **common)
    if family == "olmo2":  # a decoder poolrag never listed: told from transformers' own tables
        return transformers.Olmo2Config(tie_word_embeddings=False, **common)
    if family == "gemma2":
        return transformers.Gemma2Config(
            head_dim=8, query_pre_attn_scalar=8, sliding_window=256, final_logit_softcapping=30.0, **common
        )
    raise ValueError(family)


def build(
    folder: Path,
    family: str,
    auto_class: type,
    *,
    tokenizer_kwargs: dict | None = None,
    pad_id: int = PAD,
    seed: int = 0,
    **config_extra: object,
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerFast]:
    """A random ``auto_class`` model of ``family`` saved with its tokenizer in ``folder``.

    The tokenizer returned is the one ``AutoTokenizer`` makes of the finished folder: for some
    model types (qwen2) transformers swaps in its own pre-tokenizer, and references must tokenise
    exactly as the engine does.
    """
    tokenizer = build_tokenizer(folder, **(tokenizer_kwargs or {}))
    torch.manual_seed(seed)
    config = tiny_config(family, len(tokenizer), pad_id=pad_id, **config_extra)
    model = auto_class.from_config(config).eval()
    model.save_pretrained(folder)
    return model, transformers.AutoTokenizer.from_pretrained(folder)


# -- references ---------------------------------------------------------------------------------
def padded(seqs: Sequence[Sequence[int]], pad_id: int, side: str) -> dict[str, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    positions = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        n = len(seq)
        cols = slice(width - n, width) if side == "left" else slice(0, n)
        ids[row, cols] = torch.tensor(seq)
        mask[row, cols] = 1
        positions[row, cols] = torch.arange(n)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}


def _last_index(batch: dict[str, torch.Tensor], side: str) -> torch.Tensor:
    if side == "left":
        return torch.full((batch["input_ids"].shape[0],), batch["input_ids"].shape[1] - 1)
    return batch["attention_mask"].sum(1) - 1


@torch.no_grad()
def run_padded(model: torch.nn.Module, seqs: Sequence[Sequence[int]], pad_id: int, side: str | None, pick):
    """Run ``model`` on ``seqs`` padded on ``side`` (None: one at a time); ``pick(output, batch, last)``
    extracts one result row per sequence."""
    if side is None:
        rows = [run_padded(model, [s], pad_id, "right", pick)[0] for s in seqs]
        return np.stack(rows)
    batch = padded(seqs, pad_id, side)
    output = model(**batch)
    return pick(output, batch, _last_index(batch, side))


def ref_last_hidden(model, seqs, pad_id, side):
    def pick(out, batch, last):
        return out.last_hidden_state[torch.arange(len(last)), last].float().numpy()

    return run_padded(model, seqs, pad_id, side, pick)


def ref_token_logits(model, seqs, pad_id, side, columns):
    """Full-vocabulary LM logits at the last real token, restricted to ``columns`` afterwards."""

    def pick(out, batch, last):
        return out.logits[torch.arange(len(last)), last][:, list(columns)].float().numpy()

    return run_padded(model, seqs, pad_id, side, pick)


def ref_sequence_logits(model, seqs, pad_id, side):
    """``*ForSequenceClassification`` logits, the row chosen by transformers itself."""

    def pick(out, batch, last):
        return out.logits.float().numpy()

    return run_padded(model, seqs, pad_id, side, pick)


def normalize(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def build_jamba_classifier(folder: Path) -> tuple[transformers.PreTrainedModel, object]:
    """A tiny JambaForSequenceClassification (attention + Mamba + MoE layers, 3 labels) saved to
    ``folder``; returns the model and its tokenizer."""
    tokenizer = build_tokenizer(folder)
    torch.manual_seed(0)
    config = transformers.JambaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=2,
        num_experts_per_tok=1,
        mamba_d_state=4,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=8,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        num_labels=3,
        initializer_range=0.2,
    )
    model = transformers.JambaForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    return model, transformers.AutoTokenizer.from_pretrained(folder)
