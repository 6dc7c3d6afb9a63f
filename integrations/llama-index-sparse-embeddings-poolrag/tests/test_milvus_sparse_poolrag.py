"""PoolragMilvusSparseEmbeddingFunction: the core's BM25 vectors as the sparse embedding function of
LlamaIndex's Milvus store, and hybrid retrieval over a real Milvus Lite file finding the document
that only the sparse leg can find."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import TextNode
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.sparse_embeddings.poolrag import PoolragMilvusSparseEmbeddingFunction
from llama_index.vector_stores.milvus import MilvusVectorStore

from poolrag import Engine
from poolrag.sparse import BM25Encoder, BM25Stats
from poolrag.testing.rare_term_corpus import QUERY, RARE, TEXTS, dense_misses_rare_document


def hybrid_index(
    engine: Engine, sparse: PoolragMilvusSparseEmbeddingFunction, texts: list[str], folder: Path
) -> tuple[MilvusVectorStore, BaseRetriever]:
    """``texts`` indexed in a Milvus Lite collection "hybrid" (dense and sparse), and its hybrid
    retriever of the top 3."""
    store = MilvusVectorStore(
        uri=str(folder / "milvus.db"),
        collection_name="hybrid",
        dim=384,
        overwrite=True,
        enable_sparse=True,
        sparse_embedding_function=sparse,
        hybrid_ranker="RRFRanker",
    )
    index = VectorStoreIndex(
        [TextNode(text=t) for t in texts],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=PoolragEmbedding(engine=engine),
    )
    return store, index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=3)


def test_milvus_hybrid_finds_what_only_the_sparse_leg_finds(minilm_engine: Engine, tmp_path: Path) -> None:
    assert dense_misses_rare_document(minilm_engine)
    core = BM25Encoder(minilm_engine.tokenizer)
    counts = core.term_counts(TEXTS)
    avg = sum(sum(c.values()) for c in counts) / len(counts)
    sparse = PoolragMilvusSparseEmbeddingFunction(engine=minilm_engine, avg_doc_length=avg)
    store, retriever = hybrid_index(minilm_engine, sparse, TEXTS, tmp_path)
    assert retriever.retrieve(QUERY)[0].node.get_content() == RARE
    # The store encoded node by node; the vectors are the core encoder's over the whole corpus.
    expected = [v.to_dict() for v in core.encode_documents(TEXTS, avg)]
    assert [sparse.encode_documents([t])[0] for t in TEXTS] == expected
    stats = BM25Stats.from_term_counts(counts * 2)  # the store's pass and the check above
    assert sparse.encode_queries([QUERY]) == [v.to_dict() for v in core.encode_queries([QUERY], stats)]
    rows = store.client.query("hybrid", filter="", output_fields=["text", "sparse_embedding"], limit=100)
    stored = {row["text"]: row["sparse_embedding"] for row in rows}
    for text, vector in zip(TEXTS, expected, strict=True):
        assert stored[text].keys() == vector.keys()
        assert list(stored[text].values()) == pytest.approx(list(vector.values()), rel=1e-6)


def test_a_node_without_terms_is_stored_beside_the_others(minilm_engine: Engine, tmp_path: Path) -> None:
    """A node of punctuation only has no BM25 term; Milvus refuses an empty sparse row (and the
    insert with it), so it is stored with the marker row poolrag's own Milvus store writes."""
    sparse = PoolragMilvusSparseEmbeddingFunction(engine=minilm_engine, avg_doc_length=8.0)
    texts = [*TEXTS, "* * * --- !!!"]
    store, retriever = hybrid_index(minilm_engine, sparse, texts, tmp_path)
    assert retriever.retrieve(QUERY)[0].node.get_content() == RARE
    rows = store.client.query("hybrid", filter="", output_fields=["text", "sparse_embedding"], limit=100)
    stored = {row["text"]: row["sparse_embedding"] for row in rows}
    assert stored.keys() == set(texts)
    (marker,) = stored[texts[-1]].items()
    assert marker[0] not in minilm_engine.tokenizer.get_vocab().values() and marker[1] < 1e-20
    assert sparse.encode_queries(["!!!"]) == [{}]  # a query without terms stays empty: nothing found
