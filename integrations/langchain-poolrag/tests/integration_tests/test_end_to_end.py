"""End to end in LangChain: PoolragEmbeddings fill real vector stores (Qdrant local mode, Milvus
Lite), their retrievers fetch candidates, PoolragReranker reorders them; every step is checked
against the engine's own vectors and scores, in process and through a server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_milvus import Milvus
from langchain_poolrag import PoolragEmbeddings, PoolragReranker
from langchain_qdrant import QdrantVectorStore

from poolrag import Engine, PoolingParams
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS

IDS = [f"00000000-0000-0000-0000-{i:012d}" for i in range(len(TEXTS))]  # Qdrant wants UUIDs
CANDIDATES = 5
QUERY = "Which organelle produces energy in cells?"


def corpus_documents() -> list[Document]:
    return [Document(page_content=t, metadata=dict(m)) for t, m in zip(TEXTS, METADATAS, strict=True)]


def expected_candidates(engine: Engine, query: str) -> list[str]:
    """The CANDIDATES texts nearest to the query by cosine of the engine's own vectors."""
    docs = engine.embed_array(TEXTS, PoolingParams(input_type="document"))
    q = engine.embed_array([query], PoolingParams(input_type="query"))[0]
    return [TEXTS[i] for i in np.argsort(-(docs @ q), kind="stable")[:CANDIDATES]]


def reranked(engine: Engine, query: str, texts: list[str], top_n: int) -> list[str]:
    """The reranker's default: the cross-encoder's own order of the candidates."""
    scores = np.asarray([out.outputs.score for out in engine.score(query, texts)])
    return [texts[i] for i in np.argsort(-scores, kind="stable")[:top_n]]


@pytest.fixture
def adapters(model_sources: tuple[dict, dict]) -> tuple[PoolragEmbeddings, PoolragReranker]:
    """In process and through servers (``model_sources`` runs each test both ways)."""
    embedder, reranker = model_sources
    return PoolragEmbeddings(**embedder), PoolragReranker(**reranker, top_n=2)


def test_qdrant_retrieve_then_rerank(
    adapters: tuple[PoolragEmbeddings, PoolragReranker], minilm_engine: Engine, cross_encoder_engine: Engine
) -> None:
    embeddings, reranker = adapters
    store = QdrantVectorStore.from_documents(
        corpus_documents(), embeddings, ids=IDS, location=":memory:", collection_name="rag"
    )
    stored = store.client.retrieve("rag", IDS, with_vectors=True)
    np.testing.assert_allclose(
        np.asarray([p.vector for p in stored], dtype=np.float32),
        minilm_engine.embed_array(TEXTS, PoolingParams(input_type="document")),
        atol=1e-6,
    )

    base = store.as_retriever(search_kwargs={"k": CANDIDATES})
    candidates = [doc.page_content for doc in base.invoke(QUERY)]
    assert candidates == expected_candidates(minilm_engine, QUERY)

    chain = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=base)
    result = chain.invoke(QUERY)
    assert [doc.page_content for doc in result] == reranked(cross_encoder_engine, QUERY, candidates, 2)
    assert result[0].page_content == TEXTS[QUERIES[QUERY]]
    assert result[0].metadata["topic"] == "biology" and result[0].metadata["relevance_score"] > 0.5


def test_milvus_lite_retrieve_then_rerank(
    minilm_engine: Engine, cross_encoder_engine: Engine, tmp_path: Path
) -> None:
    store = Milvus.from_documents(
        corpus_documents(),
        PoolragEmbeddings(engine=minilm_engine),
        connection_args={"uri": str(tmp_path / "milvus.db")},
        collection_name="rag",
        index_params={"index_type": "FLAT", "metric_type": "COSINE"},
        drop_old=True,
    )
    rows = store.client.query("rag", filter="pk >= 0", output_fields=["text", "vector"])
    by_text = {row["text"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}
    np.testing.assert_allclose(
        np.stack([by_text[t] for t in TEXTS]),
        minilm_engine.embed_array(TEXTS, PoolingParams(input_type="document")),
        atol=1e-6,
    )

    query = "What is the capital of France?"
    base = store.as_retriever(search_kwargs={"k": CANDIDATES})
    candidates = [doc.page_content for doc in base.invoke(query)]
    assert candidates == expected_candidates(minilm_engine, query)

    chain = ContextualCompressionRetriever(
        base_compressor=PoolragReranker(engine=cross_encoder_engine, top_n=3), base_retriever=base
    )
    result = chain.invoke(query)
    assert [doc.page_content for doc in result] == reranked(cross_encoder_engine, query, candidates, 3)
    assert result[0].page_content == TEXTS[QUERIES[query]]


def test_a_collection_poolrag_ingest_filled_is_read_as_documented(
    minilm_engine: Engine, minilm_path: Path, tmp_path: Path
) -> None:
    """docs/integrations.md: a ``poolrag ingest --hybrid`` collection read by langchain-milvus (text,
    fields as metadata, the sparse field among them; relevance scores the cosine's, told the metric)
    and langchain-qdrant (``vector_name="dense"``, its sparse mode ranking as ``--mode sparse`` does,
    ``content_payload_key="text"``: text and scores), each giving what ``poolrag search`` gives."""
    from langchain_poolrag import PoolragSparseEmbeddings
    from langchain_qdrant import RetrievalMode
    from qdrant_client import QdrantClient

    from poolrag.cli import main
    from poolrag.retrieval import Retriever
    from poolrag.sparse import BM25Encoder
    from poolrag.stores import open_store

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in (0, 2, 4):
        (folder / f"{i}.md").write_text(f"# Topic {i}\n\n{TEXTS[i]}\n")
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    targets = {"milvus": ["--uri", str(tmp_path / "m.db")], "qdrant": ["--path", str(tmp_path / "q")]}
    expected = {}
    for kind, where in targets.items():
        args = ["ingest", str(folder), "--model", str(minilm_path), "--store", kind, *where]
        assert main([*args, "--collection", "demo", "--hybrid", "-q"]) == 0
        with open_store(kind, "demo", **{where[0][2:]: where[1]}) as own:
            expected[kind] = [
                (r.text, r.payload, round(r.score, 4)) for r in Retriever(own, minilm_engine).search(QUERY, 2)
            ]
    milvus = Milvus(
        embedding_function=embeddings,
        collection_name="demo",
        connection_args={"uri": str(tmp_path / "m.db")},
        primary_field="id",
        enable_dynamic_field=True,
        index_params={"metric_type": "COSINE"},  # else its relevance scores take cosines for L2
    )
    relevance = [s for _, s in milvus.similarity_search_with_relevance_scores(QUERY, k=2)]
    assert relevance == pytest.approx([(1 + s) / 2 for _, _, s in expected["milvus"]], abs=1e-4)
    found = [
        (d.page_content, d.metadata, round(s, 4)) for d, s in milvus.similarity_search_with_score(QUERY, k=2)
    ]
    fields = ("source", "start", "end", "chunk_index", "filename", "headings")
    assert [(t, {k: m[k] for k in fields}, s) for t, m, s in found] == [
        (t, {k: p[k] for k in fields}, s) for t, p, s in expected["milvus"]
    ]
    assert TEXTS[2] in found[0][0] and found[0][1]["headings"] == ["Topic 2"]
    assert all(isinstance(m["_poolrag_sparse"], dict) for _, m, _ in found)  # the documented extra
    client = QdrantClient(path=str(tmp_path / "q"))
    try:
        qdrant = QdrantVectorStore(
            client=client,
            collection_name="demo",
            embedding=embeddings,
            vector_name="dense",
            content_payload_key="text",
        )
        found = [(d.page_content, round(s, 4)) for d, s in qdrant.similarity_search_with_score(QUERY, k=2)]
        lexical = QdrantVectorStore(
            client=client,
            collection_name="demo",
            embedding=embeddings,
            sparse_embedding=PoolragSparseEmbeddings(engine=minilm_engine),
            retrieval_mode=RetrievalMode.SPARSE,
            vector_name="dense",
            sparse_vector_name="sparse",
            content_payload_key="text",
        )
        sparse_found = [
            (d.page_content, round(s, 4)) for d, s in lexical.similarity_search_with_score(QUERY, k=2)
        ]
    finally:
        client.close()
    assert found == [(t, s) for t, _, s in expected["qdrant"]] and TEXTS[2] in found[0][0]
    with open_store("qdrant", "demo", path=str(tmp_path / "q")) as own:
        core = Retriever(own, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        assert sparse_found == [(r.text, round(r.score, 4)) for r in core.search(QUERY, 2, mode="sparse")]
