"""ms-marco-MiniLM-L-12-v2: a transformers cross-encoder folder (BertForSequenceClassification)."""

from __future__ import annotations

from pathlib import Path

from poolrag_test_assets.hf_folder import (
    check_against_model,
    copy_tokenizer,
    save_weights,
    write_bert_config,
    write_readme,
)
from poolrag_test_assets.onnx_graph import load_graph, onnx_state_dict
from poolrag_test_assets.sources import Source


def build_reranker(src: Path, out: Path, source: Source) -> None:
    """ms-marco-MiniLM-L-12-v2 as a ``BertForSequenceClassification`` cross-encoder (one logit)."""
    from transformers import BertForSequenceClassification

    graph = load_graph(src / source.onnx_file)
    state = onnx_state_dict(graph)
    config = write_bert_config(
        out, state, "bert.", graph, architectures=["BertForSequenceClassification"], num_labels=1
    )
    check_against_model(BertForSequenceClassification, config, state, allow_missing=r"$^")
    save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    write_readme(
        out,
        "ms-marco-MiniLM-L-12-v2 (poolrag test asset)",
        source,
        """
Layout: a plain transformers `BertForSequenceClassification` with `num_labels` 1: the logit is the
relevance score of a (query, passage) pair. The package ships no `config.json` for this model;
sizes were read from the weight shapes and the ONNX graph (heads, LayerNorm epsilon).
""",
    )
