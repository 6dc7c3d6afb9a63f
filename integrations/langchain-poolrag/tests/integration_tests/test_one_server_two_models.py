"""The two stages of a RAG chain against one ``poolrag serve`` running both models: the embedder
and the reranker each name theirs with ``model_name=`` (sent as the request's ``model``)."""

from __future__ import annotations

import asyncio

import numpy as np
from langchain_core.documents import Document
from langchain_poolrag import PoolragEmbeddings, PoolragReranker

from poolrag import Engine, PoolingParams
from poolrag.testing.rag_corpus import TEXTS

QUERY = "Which organelle produces energy in cells?"


def test_embedder_and_reranker_reach_their_own_model(
    embedder_and_reranker_url: str, minilm_engine: Engine, cross_encoder_engine: Engine
) -> None:
    embeddings = PoolragEmbeddings(base_url=embedder_and_reranker_url, model_name="minilm")
    np.testing.assert_allclose(
        embeddings.embed_documents(TEXTS[:4]), minilm_engine.embed_array(TEXTS[:4]), atol=1e-6
    )
    reranker = PoolragReranker(base_url=embedder_and_reranker_url, model_name="reranker", top_n=3)
    documents = [Document(page_content=text, id=str(i)) for i, text in enumerate(TEXTS)]
    ranked = reranker.compress_documents(documents, QUERY)
    params = PoolingParams(truncate_prompt_tokens=-1)
    scores = np.asarray([out.outputs.score for out in cross_encoder_engine.score(QUERY, TEXTS, params)])
    assert [doc.id for doc in ranked] == [str(i) for i in np.argsort(-scores, kind="stable")[:3]]


def test_a_server_with_small_request_limits_takes_a_rag_apps_batches(
    minilm_engine: Engine, cross_encoder_engine: Engine
) -> None:
    """An operator's small --max-inputs and --max-request-chars: the client splits at the first
    (the model card says it) and halves a request the second refuses (413), so 80 chunks embed and
    60 documents rerank as in process, sync and async."""
    from poolrag.server import ServerSettings
    from poolrag.server.app import create_models_app
    from poolrag.testing.live_server import LiveServer

    small = {"max_inputs": 8, "max_request_chars": 1500, "api_key": "sekret"}
    models = [
        (minilm_engine, ServerSettings(served_model_names=("minilm",), **small)),
        (cross_encoder_engine, ServerSettings(served_model_names=("reranker",), **small)),
    ]
    chunks = [f"{i}: {TEXTS[i % len(TEXTS)]} " * 3 for i in range(80)]  # 8 of them: over 1,500 chars
    with LiveServer(create_models_app(models)) as live:
        embeddings = PoolragEmbeddings(base_url=live.url, api_key="sekret", model_name="minilm")
        local = minilm_engine.embed_array(chunks)
        np.testing.assert_allclose(embeddings.embed_documents(chunks), local, atol=1e-6)
        np.testing.assert_allclose(asyncio.run(embeddings.aembed_documents(chunks)), local, atol=1e-6)
        reranker = PoolragReranker(base_url=live.url, api_key="sekret", model_name="reranker", top_n=3)
        documents = [Document(page_content=text, id=str(i)) for i, text in enumerate(chunks[:60])]
        params = PoolingParams(truncate_prompt_tokens=-1)
        scores = np.asarray([o.outputs.score for o in cross_encoder_engine.score(QUERY, chunks[:60], params)])
        expected = [str(i) for i in np.argsort(-scores, kind="stable")[:3]]
        assert [doc.id for doc in reranker.compress_documents(documents, QUERY)] == expected
