"""LlamaIndex's own ``TextEmbeddingsInference`` (llama-index-embeddings-text-embeddings-inference)
pointed at ``poolrag serve`` as at Text Embeddings Inference: it posts ``{"inputs", "truncate"}`` to
``/embed`` and gets the engine's vectors, long texts cut as it asks (``truncate_text``, default on)."""

from __future__ import annotations

import asyncio

import numpy as np
from llama_index.embeddings.text_embeddings_inference import TextEmbeddingsInference

from poolrag.engine import Engine
from poolrag.params import PoolingParams

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Paris is the capital of France."]
LONG = "The committee reviewed the proposal in great detail before it voted. " * 30  # ~330 tokens


def test_tei_embeddings_are_the_engines(minilm_url: str, minilm_engine: Engine) -> None:
    embed_model = TextEmbeddingsInference(model_name="all-MiniLM-L6-v2", base_url=minilm_url)
    documents = [*TEXTS, LONG]
    expected = minilm_engine.embed_array(documents, PoolingParams(truncate=True))
    got = embed_model.get_text_embedding_batch(documents)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(embed_model.get_query_embedding(TEXTS[0]), expected[0], atol=1e-6, rtol=0)
    awaited = asyncio.run(embed_model.aget_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(awaited, expected[: len(TEXTS)], atol=1e-6, rtol=0)
