"""Tiny random model folders for the server tests, built with transformers around the MiniLM
tokenizer (the model does not care which tokenizer produced its ids).

Random weights are enough here: the server must return exactly what the offline engine returns
for the same model, whatever the numbers are.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
HIDDEN = 32


def _config(**extra: object) -> transformers.BertConfig:
    return transformers.BertConfig(
        vocab_size=30522,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=512,
        pad_token_id=0,
        initializer_range=0.3,  # spread the random outputs so rankings are not near-ties
        **extra,
    )


def _copy_tokenizer(tokenizer_src: Path, dest: Path) -> None:
    for name in TOKENIZER_FILES:
        if (tokenizer_src / name).exists():
            shutil.copy(tokenizer_src / name, dest / name)


def build_sequence_classifier(
    dest: Path, tokenizer_src: Path, labels: list[str], multi_label: bool = False, seed: int = 0
) -> Path:
    """``BertForSequenceClassification``: one label makes a cross-encoder, several a classifier."""
    torch.manual_seed(seed)
    config = _config(
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        problem_type="multi_label_classification" if multi_label else None,
    )
    config.architectures = ["BertForSequenceClassification"]
    transformers.BertForSequenceClassification(config).eval().save_pretrained(dest)
    _copy_tokenizer(tokenizer_src, dest)
    return dest


def build_pylate_colbert(dest: Path, tokenizer_src: Path, dim: int = 16, seed: int = 0) -> Path:
    """A PyLate-layout ColBERT: BERT backbone, a bias-free projection, query/document markers."""
    torch.manual_seed(seed)
    config = _config()
    config.architectures = ["BertModel"]
    transformers.BertModel(config).eval().save_pretrained(dest)
    _copy_tokenizer(tokenizer_src, dest)
    dense = dest / "1_Dense"
    dense.mkdir()
    linear = torch.nn.Linear(HIDDEN, dim, bias=False)
    save_file({"linear.weight": linear.weight.detach().contiguous()}, str(dense / "model.safetensors"))
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": HIDDEN,
                "out_features": dim,
                "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity",
            }
        )
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
    ]
    (dest / "modules.json").write_text(json.dumps(modules))
    (dest / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 180}))
    (dest / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "model_type": "ColBERT",
                "query_prefix": "[unused0]",
                "document_prefix": "[unused1]",
                "query_length": 32,
                "document_length": 180,
                "similarity_fn_name": "MaxSim",
            }
        )
    )
    return dest
