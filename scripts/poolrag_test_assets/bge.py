"""bge-small-en-v1.5: a sentence-transformers embedder folder (CLS pooling, Normalize)."""

from __future__ import annotations

import json
from pathlib import Path

from poolrag_test_assets.hf_folder import (
    check_against_model,
    copy_tokenizer,
    library_versions,
    save_weights,
    write_json,
    write_readme,
)
from poolrag_test_assets.onnx_graph import load_graph, onnx_state_dict
from poolrag_test_assets.sources import Source


def build_bge(src: Path, out: Path, source: Source) -> None:
    """bge-small-en-v1.5 as a full sentence-transformers folder (CLS pooling, then Normalize)."""
    from transformers import BertConfig, BertModel

    state = onnx_state_dict(load_graph(src / source.onnx_file))
    shipped = json.loads((src / "config.json").read_text(encoding="utf-8"))
    shipped.pop("_name_or_path", None)
    shipped["architectures"] = ["BertModel"]
    config = BertConfig(**shipped)
    # The export stops at last_hidden_state, so the unused BERT pooler is simply absent.
    check_against_model(BertModel, config, state, allow_missing=r"^pooler\.")
    config.save_pretrained(out)
    save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    write_json(
        out / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": config.hidden_size,
            "pooling_mode_cls_token": True,
            "pooling_mode_mean_tokens": False,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    (out / "2_Normalize").mkdir()
    write_json(out / "sentence_bert_config.json", {"max_seq_length": 512, "do_lower_case": True})
    write_json(
        out / "config_sentence_transformers.json",
        {
            "__version__": library_versions(),
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    write_readme(
        out,
        "bge-small-en-v1.5 (poolrag test asset)",
        source,
        """
Layout: a sentence-transformers folder, like the upstream repository: `Transformer` ->
`Pooling` (CLS token) -> `Normalize`, cosine similarity, `max_seq_length` 512. The ONNX export
ends at `last_hidden_state`, so `BertModel`'s pooler weights are absent (transformers initialises
them randomly on load; CLS pooling does not use them).
""",
    )
