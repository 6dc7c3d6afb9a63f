"""The chunker's token ids go to the engine as token prompts: the same model input, so the same
vectors, without tokenising every chunk a second time; models where that is not exact keep text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.ingest import DenseEncoder, Document, TokenChunker
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

TEXT = "\n\n".join(
    f"Part {i}. Glaciers carve valleys over thousands of years; their meltwater feeds rivers, naïve "
    f"visitors underestimate crevasses, and ice cores record {i * 7} centuries of climate."
    for i in range(12)
)


def _chunks(engine: Engine, max_tokens: int = 40):
    return TokenChunker(engine.tokenizer, max_tokens=max_tokens, overlap=6).split(Document("g.md", TEXT))


def test_token_prompts_are_the_text_paths_input_and_give_the_same_vectors(minilm_engine) -> None:
    chunks = _chunks(minilm_engine)
    encoder = DenseEncoder(CachedEmbedder(minilm_engine, None))
    prompts = encoder.token_prompts([c.token_ids for c in chunks])
    assert prompts is not None
    for chunk, prompt in zip(chunks, prompts, strict=True):
        assert prompt["prompt_token_ids"] == minilm_engine.tokenizer(chunk.text)["input_ids"]
    texts = [c.text for c in chunks]
    by_tokens = np.stack(encoder.encode(texts, [c.token_ids for c in chunks]))
    by_text = minilm_engine.embed_array(texts, PoolingParams(input_type="document"))
    assert by_tokens.shape == (len(chunks), 384)
    np.testing.assert_array_equal(by_tokens, by_text)


def test_the_cache_is_keyed_by_text_whichever_input_computed_the_vector(minilm_engine, tmp_path) -> None:
    chunks = _chunks(minilm_engine)
    texts = [c.text for c in chunks]
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        first = DenseEncoder(CachedEmbedder(minilm_engine, cache))
        computed = np.stack(first.encode(texts, [c.token_ids for c in chunks]))
        assert first.computed == len(chunks)
        again = DenseEncoder(CachedEmbedder(minilm_engine, cache))
        np.testing.assert_array_equal(np.stack(again.encode(texts)), computed)  # text path: all hits
        assert again.computed == 0 and again.embedder.hits == len(chunks)


def test_a_model_with_a_document_prompt_keeps_the_text_path(minilm_path: Path, tmp_path: Path) -> None:
    folder = build_encoder(tmp_path / "prompted", "bert", minilm_path)
    write_sentence_transformers(folder, normalize=True, prompts={"query": "query: ", "document": "passage: "})
    engine = Engine(folder)
    chunks = _chunks(engine)
    encoder = DenseEncoder(CachedEmbedder(engine, None))
    assert encoder.token_prompts([c.token_ids for c in chunks]) is None  # ids lack "passage: "
    texts = [c.text for c in chunks]
    vectors = np.stack(encoder.encode(texts, [c.token_ids for c in chunks]))
    np.testing.assert_array_equal(vectors, engine.embed_array(texts, PoolingParams(input_type="document")))
    bare = engine.embed_array([{"prompt_token_ids": engine.tokenizer(t)["input_ids"]} for t in texts])
    assert not np.allclose(vectors, bare)  # the prompt changes the vectors: token prompts would be wrong


@pytest.mark.parametrize("ids", [[], [101, 2023, 102]])
def test_framing_adds_the_tokenizers_special_tokens(minilm_engine, ids: list[int]) -> None:
    processor = internals.processor(minilm_engine)
    cls, sep = minilm_engine.tokenizer.cls_token_id, minilm_engine.tokenizer.sep_token_id
    assert processor.frame_ids(ids, "document") == [cls, *ids, sep]


@pytest.mark.parametrize(
    "settings",
    [
        PoolingParams(prompt="Represent this passage for retrieval: "),
        PoolingParams(prompt_name="classification"),
        PoolingParams(truncate_prompt_tokens=6),
    ],
    ids=["prompt", "prompt_name", "truncate_prompt_tokens"],
)
def test_an_embedders_own_input_settings_keep_the_text_path(
    minilm_path: Path, tmp_path: Path, settings: PoolingParams
) -> None:
    """A prompt or a cut the caller gave the embedder shapes the model input the text path makes; the
    chunker's bare ids lack it, so they must not go instead (the vectors, and the cache entries keyed
    on those settings, would be those of the text without them)."""
    folder = build_encoder(tmp_path / "named", "bert", minilm_path)
    write_sentence_transformers(folder, prompts={"classification": "Classify the topic: "})
    engine = Engine(folder)
    chunks = _chunks(engine)
    texts = [c.text for c in chunks]
    expected = engine.embed_array(texts, settings.with_updates(input_type="document"))
    bare = engine.embed_array(texts, PoolingParams(input_type="document"))
    assert not np.allclose(expected, bare, atol=1e-4)  # the setting changes these vectors
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        encoder = DenseEncoder(CachedEmbedder(engine, cache, pooling_params=settings))
        stored = np.stack(encoder.encode(texts, [c.token_ids for c in chunks]))
        np.testing.assert_allclose(stored, expected, atol=1e-6)
        later = CachedEmbedder(engine, cache, pooling_params=settings).embed_documents(texts)
        np.testing.assert_allclose(later, expected, atol=1e-6)  # what the cache now answers
