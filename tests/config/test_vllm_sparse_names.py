"""Issue 30, item 7: "vLLM's architecture spellings `BertSpladeSparseEmbeddingModel` and
`BgeM3EmbeddingModel` are 'unknown'". vLLM users name them through ``hf_overrides``; poolrag runs
them as its SPLADE and BGE-M3 families, with the same vectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.config.registry import ModelKind, Role, lookup_architecture
from poolrag.errors import ModelLoadError
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import SENTENCES, build_bge_m3, build_encoder, build_splade

SPLADE = {"architectures": ["BertSpladeSparseEmbeddingModel"]}
BGE_M3 = {"architectures": ["BgeM3EmbeddingModel"]}


@pytest.mark.parametrize("name", ["BertSpladeSparseEmbeddingModel", "BgeM3EmbeddingModel"])
def test_the_names_are_known(name: str) -> None:
    assert lookup_architecture(name) is Role.BACKBONE


def test_bert_splade_sparse_embedding_model_is_splade(tmp_path: Path, minilm_path: Path) -> None:
    from sentence_transformers import SparseEncoder

    folder = build_splade(tmp_path / "st", minilm_path)  # max pooling of log(1 + relu(logits))
    bare = shutil.copytree(folder, tmp_path / "bare", ignore=shutil.ignore_patterns("modules.json"))
    assert internals.model_kind(Engine(bare)) is ModelKind.EMBEDDING  # a bare masked-LM folder embeds
    engine = Engine(bare, hf_overrides=SPLADE)
    assert internals.model_kind(engine) is ModelKind.SPLADE and engine.supported_tasks == ("sparse_embed",)
    reference = SparseEncoder(str(folder), device="cpu").encode(SENTENCES[:3], convert_to_tensor=True)
    for vector, expected in zip(
        engine.sparse_embed(SENTENCES[:3]), reference.to_dense().numpy(), strict=True
    ):
        np.testing.assert_array_equal(vector.indices, np.flatnonzero(expected))
        np.testing.assert_allclose(vector.values, expected[np.flatnonzero(expected)], atol=1e-5)


def test_bert_splade_sparse_embedding_model_pools_as_vllm_without_the_configs_cls_and_sep(
    tmp_path: Path, minilm_path: Path
) -> None:
    """vLLM's ``SPLADESparsePooler`` under that name leaves out a first token that is the config's
    ``cls_token_id`` and a last that is its ``sep_token_id``; a config naming neither (BERT's
    own) keeps both, as above."""
    import torch
    import transformers

    folder = build_splade(tmp_path / "st", minilm_path)
    bare = shutil.copytree(folder, tmp_path / "bare", ignore=shutil.ignore_patterns("modules.json"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(bare)
    ends = {"cls_token_id": tokenizer.cls_token_id, "sep_token_id": tokenizer.sep_token_id}
    engine = Engine(bare, hf_overrides=SPLADE | ends)
    model = transformers.AutoModelForMaskedLM.from_pretrained(bare).eval()
    for text, vector in zip(SENTENCES[:3], engine.sparse_embed(SENTENCES[:3]), strict=True):
        with torch.no_grad():
            logits = model(**tokenizer(text, return_tensors="pt")).logits[0]
        expected = torch.log1p(torch.relu(logits[1:-1])).amax(0).numpy()
        np.testing.assert_array_equal(vector.indices, np.flatnonzero(expected))
        np.testing.assert_allclose(vector.values, expected[np.flatnonzero(expected)], atol=1e-5)
    (nothing_else,) = engine.sparse_embed(
        [{"prompt_token_ids": [tokenizer.cls_token_id, tokenizer.sep_token_id]}]
    )
    assert len(nothing_else) == 0


def test_bge_m3_embedding_model_is_the_bge_m3_family(tmp_path: Path, minilm_path: Path) -> None:
    folder = build_bge_m3(tmp_path / "m3", minilm_path)
    plain, named = Engine(folder), Engine(folder, hf_overrides=BGE_M3)
    assert internals.model_kind(named) is ModelKind.BGE_M3
    np.testing.assert_allclose(named.embed_array(SENTENCES), plain.embed_array(SENTENCES), atol=1e-6)
    for ours, theirs in zip(
        named.sparse_embed(SENTENCES[:2]), plain.sparse_embed(SENTENCES[:2]), strict=True
    ):
        np.testing.assert_array_equal(ours.indices, theirs.indices)


def test_bge_m3_embedding_model_without_its_heads_is_refused(tmp_path: Path, minilm_path: Path) -> None:
    folder = build_encoder(tmp_path / "xlmr", "xlm-roberta", minilm_path)
    with pytest.raises(ModelLoadError, match=r"BgeM3EmbeddingModel needs BGE-M3's sparse_linear\.pt"):
        Engine(folder, hf_overrides=BGE_M3)
