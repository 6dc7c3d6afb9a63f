"""End to end in LlamaIndex: a VectorStoreIndex over Qdrant (local mode) built with PoolragEmbedding
as ``Settings.embed_model``, queried through a query engine whose postprocessor is PoolragRerank
(``MockLLM`` answers); and the ColBERT retriever in a RetrieverQueryEngine. Every step is checked
against the engine's own vectors and scores, in process and through servers."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.postprocessor.poolrag_rerank import PoolragRerank
from llama_index.retrievers.poolrag import PoolragColBERTRetriever
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from poolrag import Engine, PoolingParams
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
CANDIDATES = 5
QUERY = "Which programming language is easy to read?"


@pytest.fixture
def llama_settings(llama_index_settings: None) -> None:
    """A mock LLM in the process-global Settings (restored after the test by ``llama_index_settings``)."""
    Settings.llm = MockLLM()


def corpus_documents() -> list[Document]:
    # Metadata is kept out of the embedded and reranked text so the checks below can use TEXTS.
    return [
        Document(
            text=t,
            metadata=dict(m),
            excluded_embed_metadata_keys=list(m),
            excluded_llm_metadata_keys=list(m),
        )
        for t, m in zip(TEXTS, METADATAS, strict=True)
    ]


def cosine_top(engine: Engine, query: str, k: int) -> list[str]:
    docs = engine.embed_array(TEXTS, PoolingParams(input_type="document"))
    q = engine.embed_array([query], PoolingParams(input_type="query"))[0]
    return [TEXTS[i] for i in np.argsort(-(docs @ q), kind="stable")[:k]]


def rerank_order(engine: Engine, query: str, nodes: list[NodeWithScore], top_n: int) -> list[str]:
    """PoolragRerank's default: the cross-encoder's own order of the retrieved nodes."""
    texts = [n.node.get_content() for n in nodes]
    scores = np.asarray([out.outputs.score for out in engine.score(query, texts)])
    return [texts[i] for i in np.argsort(-scores, kind="stable")[:top_n]]


@pytest.fixture
def adapters(model_sources: tuple[dict, dict]) -> tuple[PoolragEmbedding, PoolragRerank]:
    """In process and through servers (``model_sources`` runs each test both ways)."""
    embedder, reranker = model_sources
    return PoolragEmbedding(**embedder), PoolragRerank(**reranker, top_n=2)


def test_vector_store_index_over_qdrant_with_a_reranking_query_engine(
    llama_settings: None,
    adapters: tuple[PoolragEmbedding, PoolragRerank],
    minilm_engine: Engine,
    cross_encoder_engine: Engine,
) -> None:
    embed_model, rerank = adapters
    Settings.embed_model = embed_model
    client = QdrantClient(location=":memory:")
    store = QdrantVectorStore(client=client, collection_name="rag")
    index = VectorStoreIndex.from_documents(
        corpus_documents(), storage_context=StorageContext.from_defaults(vector_store=store)
    )

    points, _ = client.scroll("rag", limit=100, with_vectors=True, with_payload=True)
    stored = {p.payload["doc_id"]: np.asarray(p.vector, dtype=np.float32) for p in points}
    assert len(stored) == len(TEXTS)
    nodes = index.as_retriever(similarity_top_k=len(TEXTS)).retrieve(QUERY)
    by_text = {n.node.get_content(metadata_mode=MetadataMode.EMBED): stored[n.node.ref_doc_id] for n in nodes}
    np.testing.assert_allclose(
        np.stack([by_text[t] for t in TEXTS]),
        minilm_engine.embed_array(TEXTS, PoolingParams(input_type="document")),
        atol=1e-6,
    )

    retrieved = index.as_retriever(similarity_top_k=CANDIDATES).retrieve(QUERY)
    candidates = [n.node.get_content() for n in retrieved]
    assert candidates == cosine_top(minilm_engine, QUERY, CANDIDATES)

    engine = index.as_query_engine(similarity_top_k=CANDIDATES, node_postprocessors=[rerank])
    response = engine.query(QUERY)
    assert [n.node.get_content() for n in response.source_nodes] == rerank_order(
        cross_encoder_engine, QUERY, retrieved, 2
    )
    assert response.source_nodes[0].node.get_content() == TEXTS[QUERIES[QUERY]]
    scored = [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in response.source_nodes]
    own = [out.outputs.score for out in cross_encoder_engine.score(QUERY, scored)]  # what it scored
    np.testing.assert_allclose([n.score for n in response.source_nodes], own, atol=1e-6)
    assert response.source_nodes[0].node.metadata["topic"] == "computing"
    assert str(response)  # MockLLM answered from the reranked context


def test_colbert_retriever_and_reranker_in_a_retriever_query_engine(
    llama_settings: None, colbert_engine: Engine, cross_encoder_engine: Engine
) -> None:
    retriever = PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=CANDIDATES)
    retriever.add_nodes([TextNode(text=t, metadata=dict(m)) for t, m in zip(TEXTS, METADATAS, strict=True)])
    engine = RetrieverQueryEngine.from_args(
        retriever,
        llm=MockLLM(),
        node_postprocessors=[
            PoolragRerank(engine=cross_encoder_engine, top_n=2, metadata_mode=MetadataMode.NONE)
        ],
    )
    response = engine.query(QUERY)
    assert [n.node.get_content() for n in response.source_nodes] == rerank_order(
        cross_encoder_engine, QUERY, retriever.retrieve(QUERY), 2
    )
    assert response.source_nodes[0].node.get_content() == TEXTS[QUERIES[QUERY]]
