"""LangChain's ``HuggingFaceEndpointEmbeddings`` (langchain-huggingface) pointed at ``poolrag serve`` as
at Text Embeddings Inference: it calls ``InferenceClient.feature_extraction`` on the server's URL, and
gets the engine's vectors, long texts cut by the server's default as TEI's (issue 45 item 9).

langchain-huggingface 1.2.1 is the last release whose ``model`` takes a server URL (1.2.2 refuses
URLs), so the ``test`` extra pins it."""

from __future__ import annotations

import asyncio

import huggingface_hub.constants
import numpy as np
import pytest
from langchain_huggingface import HuggingFaceEndpointEmbeddings

from poolrag import PoolingParams

from .conftest import Served

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Paris is the capital of France."]
LONG = "The committee reviewed the proposal in great detail before it voted. " * 30  # ~330 tokens


@pytest.fixture(autouse=True)
def _local_calls_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub refuses every request under the suite's HF_HUB_OFFLINE=1, a local server's
    too; these go to 127.0.0.1 only."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def test_endpoint_embeddings_are_the_engines(minilm_server: Served) -> None:
    engine = minilm_server.engine
    embeddings = HuggingFaceEndpointEmbeddings(model=minilm_server.url)
    documents = [*TEXTS, LONG]
    expected = engine.embed_array(documents, PoolingParams(truncate=True))
    np.testing.assert_allclose(embeddings.embed_documents(documents), expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(embeddings.embed_query(TEXTS[0]), expected[0], atol=1e-6, rtol=0)
    awaited = asyncio.run(embeddings.aembed_documents(TEXTS))
    np.testing.assert_allclose(awaited, expected[: len(TEXTS)], atol=1e-6, rtol=0)
