"""The two stages of a RAG chain against one ``poolrag serve`` running both models: the embedder
and the reranker each name theirs with ``model_name=`` (sent as the request's ``model``)."""

from __future__ import annotations

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
