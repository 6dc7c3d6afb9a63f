"""PoolragSparseEmbeddings (Qdrant) and PoolragMilvusSparseEmbedding (Milvus): the core's vectors in
LangChain's shapes, and hybrid search in the real stores (Qdrant local mode, Milvus Lite) finding
the document that only the sparse leg can find."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_milvus import Milvus
from langchain_poolrag import PoolragEmbeddings, PoolragMilvusSparseEmbedding, PoolragSparseEmbeddings
from langchain_qdrant import QdrantVectorStore, RetrievalMode
from pymilvus import Function, FunctionType
from qdrant_client import models

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidTextError
from poolrag.frameworks.sparse_encoding import QueryIdf, SparseSource
from poolrag.sparse import BM25Encoder, BM25Stats, SparseVector
from poolrag.testing.rare_term_corpus import QUERY, RARE, TEXTS, dense_misses_rare_document

DOC = PoolingParams(input_type="document", truncate_prompt_tokens=-1)
QUERY_PARAMS = PoolingParams(input_type="query", truncate_prompt_tokens=-1)


def pinned_length(encoder: BM25Encoder, texts: list[str]) -> float:
    lengths = [sum(c.values()) for c in encoder.term_counts(texts)]
    return sum(lengths) / len(lengths)


def as_core(vector) -> SparseVector:
    return SparseVector(vector.indices, vector.values)


#: reciprocal rank fusion of the dense and sparse legs, as langchain-milvus takes it (its
#: ranker_type="rrf" is deprecated and warns on every search)
RRF = Function(
    name="rrf", input_field_names=[], function_type=FunctionType.RERANK, params={"reranker": "rrf", "k": 60}
)


def hybrid_milvus(engine: Engine, sparse: PoolragMilvusSparseEmbedding, folder: Path) -> Milvus:
    """A Milvus Lite collection "hybrid" of a dense and a sparse field, as the hybrid tests use it."""
    return Milvus(
        embedding_function=[PoolragEmbeddings(engine=engine), sparse],
        vector_field=["dense", "sparse"],
        connection_args={"uri": str(folder / "milvus.db")},
        collection_name="hybrid",
        auto_id=True,
        # Milvus Lite takes no drop_ratio_build, which langchain-milvus sets by default for sparse fields.
        index_params=[
            {"index_type": "AUTOINDEX", "metric_type": "COSINE", "params": {}},
            {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "IP", "params": {}},
        ],
        search_params=[{"metric_type": "COSINE", "params": {}}, {"metric_type": "IP", "params": {}}],
    )


def test_bm25_vectors_are_the_core_encoders(minilm_engine: Engine, minilm_path: Path) -> None:
    sparse = PoolragSparseEmbeddings(model_name=str(minilm_path))  # the tokenizer alone is loaded
    core = BM25Encoder(minilm_engine.tokenizer)
    first = sparse.embed_documents(TEXTS[:4])
    later = sparse.embed_documents(TEXTS[4:])
    avg = pinned_length(core, TEXTS[:4])  # pinned on the first batch, kept for the next
    expected = core.encode_documents(TEXTS[:4], avg) + core.encode_documents(TEXTS[4:], avg)
    assert [as_core(v) for v in first + later] == expected
    assert as_core(sparse.embed_query(QUERY)) == core.encode_queries([QUERY])[0]
    assert set(sparse.embed_query(QUERY).values) == {1.0}  # Qdrant's Modifier.IDF weighs them
    # the docs' hub id finds the same tokenizer offline, as Engine does (the installed copy)
    by_id = PoolragSparseEmbeddings(model_name="sentence-transformers/all-MiniLM-L6-v2")
    assert [as_core(v) for v in by_id.embed_documents(TEXTS[:4])] == expected[:4]


async def test_learned_vectors_are_the_engines(splade_engine: Engine, splade_url: str) -> None:
    expected_docs = splade_engine.sparse_embed(TEXTS, DOC)
    expected_query = splade_engine.sparse_embed([QUERY], QUERY_PARAMS)[0]
    for sparse in (
        PoolragSparseEmbeddings(source="model", engine=splade_engine),
        PoolragSparseEmbeddings(source="model", base_url=splade_url),
    ):
        assert [as_core(v) for v in sparse.embed_documents(TEXTS)] == expected_docs
        assert as_core(sparse.embed_query(QUERY)) == expected_query
        assert [as_core(v) for v in await sparse.aembed_documents(TEXTS)] == expected_docs
        assert as_core(await sparse.aembed_query(QUERY)) == expected_query


def test_an_empty_text_is_refused_as_every_poolrag_door_refuses_it(minilm_engine: Engine) -> None:
    """A blank text got an empty vector (and, first, lowered the pinned average length)."""
    sparse = PoolragSparseEmbeddings(engine=minilm_engine)
    with pytest.raises(InvalidTextError, match=r"texts\[1\] is empty"):
        sparse.embed_documents(["ok", " \n"])
    assert sparse.encoder.avg_doc_length is None  # nothing was pinned on the refused batch
    with pytest.raises(InvalidTextError, match=r"queries\[0\] is empty"):
        sparse.embed_query("")
    milvus = PoolragMilvusSparseEmbedding(engine=minilm_engine)
    with pytest.raises(InvalidTextError, match="is empty"):
        milvus.embed_query("\u200b")


def test_sources_and_idf_given_as_the_docs_write_them_are_the_members(minilm_engine: Engine) -> None:
    sparse = PoolragSparseEmbeddings(engine=minilm_engine, source="bm25", query_idf="documents")
    assert sparse.source is SparseSource.BM25 and sparse.query_idf is QueryIdf.DOCUMENTS
    assert PoolragMilvusSparseEmbedding(engine=minilm_engine, query_idf="store").query_idf is QueryIdf.STORE
    with pytest.raises(ValueError, match="source"):
        PoolragSparseEmbeddings(engine=minilm_engine, source="splade")


def test_a_dense_model_is_refused_as_a_sparse_source(minilm_engine: Engine) -> None:
    with pytest.raises(ValueError, match="sparse_embed"):
        PoolragSparseEmbeddings(source="model", engine=minilm_engine)
    with pytest.raises(ValueError, match="tokenizer"):
        PoolragSparseEmbeddings(base_url="http://127.0.0.1:9")


def test_qdrant_hybrid_finds_what_only_the_sparse_leg_finds(minilm_engine: Engine) -> None:
    assert dense_misses_rare_document(minilm_engine)
    dense = PoolragEmbeddings(engine=minilm_engine)
    sparse = PoolragSparseEmbeddings(engine=minilm_engine)
    store = QdrantVectorStore.from_texts(
        TEXTS,
        dense,
        location=":memory:",
        collection_name="hybrid",
        retrieval_mode=RetrievalMode.HYBRID,
        sparse_embedding=sparse,
        sparse_vector_params={"modifier": models.Modifier.IDF},
    )
    assert store.similarity_search(QUERY, k=3)[0].page_content == RARE
    points, _ = store.client.scroll("hybrid", limit=100, with_vectors=True)
    stored = {p.payload["page_content"]: p.vector[store.sparse_vector_name] for p in points}
    core = BM25Encoder(minilm_engine.tokenizer)
    expected = core.encode_documents(TEXTS, pinned_length(core, TEXTS))  # one batch: pinned on all
    assert [SparseVector(stored[t].indices, stored[t].values) for t in TEXTS] == expected


def test_milvus_hybrid_finds_what_only_the_sparse_leg_finds(minilm_engine: Engine, tmp_path: Path) -> None:
    assert dense_misses_rare_document(minilm_engine)
    sparse = PoolragMilvusSparseEmbedding(engine=minilm_engine)
    store = hybrid_milvus(minilm_engine, sparse, tmp_path)
    store.add_texts(TEXTS)
    assert store.similarity_search(QUERY, k=3, reranker=RRF)[0].page_content == RARE
    # Milvus has no IDF modifier: the query carries IDF from the documents embedded above.
    core = BM25Encoder(minilm_engine.tokenizer)
    stats = BM25Stats.from_term_counts(core.term_counts(TEXTS))
    assert sparse.embed_query(QUERY) == core.encode_queries([QUERY], stats)[0].to_dict()


def test_milvus_stores_a_text_without_terms_beside_the_others(minilm_engine: Engine, tmp_path: Path) -> None:
    """A text of punctuation only has no BM25 term; Milvus refuses an empty sparse row, and with it
    the whole ``add_texts`` batch. It is stored with the marker row poolrag's own store writes, and
    searching for a term finds the documents that hold it, never the marker."""
    sparse = PoolragMilvusSparseEmbedding(engine=minilm_engine)
    store = hybrid_milvus(minilm_engine, sparse, tmp_path)
    texts = [*TEXTS, "* * * --- !!!"]
    assert len(store.add_texts(texts)) == len(texts)
    assert store.similarity_search(QUERY, k=3, reranker=RRF)[0].page_content == RARE
    rows = store.client.query("hybrid", filter="", output_fields=["text", "sparse"], limit=100)
    stored = {row["text"]: row["sparse"] for row in rows}
    core = BM25Encoder(minilm_engine.tokenizer)
    expected = core.encode_documents(texts, pinned_length(core, texts))
    assert len(expected[-1]) == 0
    for text, vector in zip(texts[:-1], expected, strict=False):
        assert stored[text].keys() == vector.to_dict().keys()
    (marker,) = stored[texts[-1]].items()
    assert marker[0] not in core.tokenizer.get_vocab().values() and marker[1] < 1e-20
    assert sparse.embed_query("!!!") == {}  # a query without terms stays empty: Milvus finds nothing
