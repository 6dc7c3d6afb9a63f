"""PoolragSparseEmbedding: the core's sparse vectors as LlamaIndex's sparse embedding dicts and in
the shape of its Qdrant ``sparse_doc_fn`` / ``sparse_query_fn``, and hybrid retrieval over a real
Qdrant (local mode) finding the document that only the sparse leg can find (Milvus:
test_milvus_sparse_poolrag.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.sparse_embeddings.poolrag import PoolragSparseEmbedding
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient, models

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTypeError, InvalidTextError
from poolrag.frameworks.sparse_encoding import QueryIdf
from poolrag.sparse import BM25Encoder, BM25Stats, SparseVector
from poolrag.testing.rare_term_corpus import QUERY, RARE, TEXTS, dense_misses_rare_document

DOC = PoolingParams(input_type="document", truncate_prompt_tokens=-1)
QUERY_PARAMS = PoolingParams(input_type="query", truncate_prompt_tokens=-1)


def as_lists(vectors: list[SparseVector]) -> tuple[list[list[int]], list[list[float]]]:
    return [v.indices.tolist() for v in vectors], [v.values.tolist() for v in vectors]


def test_bm25_lists_are_the_core_encoders(minilm_engine: Engine, minilm_path: Path) -> None:
    core = BM25Encoder(minilm_engine.tokenizer)
    lengths = [sum(c.values()) for c in core.term_counts(TEXTS)]
    avg = sum(lengths) / len(lengths)
    sparse = PoolragSparseEmbedding(model_name=str(minilm_path))
    assert sparse.encode_documents(TEXTS) == as_lists(core.encode_documents(TEXTS, avg))
    assert sparse.encode_queries([QUERY]) == as_lists(core.encode_queries([QUERY]))
    # Without a store-side IDF, queries carry IDF from the documents encoded so far.
    counting = PoolragSparseEmbedding(engine=minilm_engine, query_idf="documents", avg_doc_length=avg)
    assert counting.encode_documents(TEXTS) == as_lists(core.encode_documents(TEXTS, avg))
    stats = BM25Stats.from_term_counts(core.term_counts(TEXTS))
    assert counting.encode_queries([QUERY]) == as_lists(core.encode_queries([QUERY], stats))


def test_an_empty_text_is_refused_as_every_poolrag_door_refuses_it(minilm_engine: Engine) -> None:
    sparse = PoolragSparseEmbedding(engine=minilm_engine, query_idf="documents")
    assert sparse.query_idf is QueryIdf.DOCUMENTS
    with pytest.raises(InvalidTextError, match=r"texts\[0\] is empty"):
        sparse.get_text_embedding("")
    with pytest.raises(InvalidTextError, match=r"queries\[0\] is empty"):
        sparse.encode_queries(["  "])


def test_a_bad_text_is_named_by_its_place_in_the_list_not_in_its_slice(minilm_engine: Engine) -> None:
    """LlamaIndex cuts the list into ``embed_batch_size`` slices: the blank text at place 6 was named
    ``texts[2]`` of its slice, and a bare string gave one vector per character."""
    sparse = PoolragSparseEmbedding(engine=minilm_engine, embed_batch_size=4)
    texts = [*TEXTS[:6], " ", TEXTS[6]]
    with pytest.raises(InvalidTextError, match=r"^texts\[6\] is empty"):
        sparse.get_text_embedding_batch(texts)
    with pytest.raises(InvalidTextError, match=r"^texts\[6\] is empty"):
        asyncio.run(sparse.aget_text_embedding_batch(texts))
    with pytest.raises(InputTypeError, match="got one string"):
        sparse.get_text_embedding_batch("ocean")  # type: ignore[arg-type]


def test_documents_idf_before_any_document_warns_once(minilm_engine: Engine, caplog) -> None:
    """The ingest-once, query-later split: a query process has encoded no documents, so every term
    weighs the same (a rare part number as much as 'capital'); it said nothing."""
    fresh = PoolragSparseEmbedding(engine=minilm_engine, query_idf="documents", avg_doc_length=5.0)
    with caplog.at_level("WARNING", logger="poolrag.frameworks.sparse_encoding"):
        fresh.encode_queries([QUERY])
        fresh.encode_queries([QUERY])
    assert caplog.text.count("has encoded no documents") == 1


def test_learned_lists_are_the_engines(splade_engine: Engine, splade_url: str) -> None:
    expected_docs = as_lists(splade_engine.sparse_embed(TEXTS, DOC))
    expected_query = as_lists(splade_engine.sparse_embed([QUERY], QUERY_PARAMS))
    for sparse in (
        PoolragSparseEmbedding(source="model", engine=splade_engine),
        PoolragSparseEmbedding(source="model", base_url=splade_url),
    ):
        assert sparse.encode_documents(TEXTS) == expected_docs
        assert sparse.encode_queries([QUERY]) == expected_query
        as_dicts = [dict(zip(i, v, strict=True)) for i, v in zip(*expected_docs, strict=True)]
        assert sparse.get_text_embedding_batch(TEXTS) == as_dicts
        assert asyncio.run(sparse.aget_text_embedding_batch(TEXTS)) == as_dicts
        query_indices, query_values = expected_query
        assert asyncio.run(sparse.aget_query_embedding(QUERY)) == dict(
            zip(query_indices[0], query_values[0], strict=True)
        )


def test_a_dense_model_is_refused_as_a_sparse_source(minilm_engine: Engine) -> None:
    with pytest.raises(ValueError, match="sparse_embed"):
        PoolragSparseEmbedding(source="model", engine=minilm_engine)


def test_qdrant_hybrid_finds_what_only_the_sparse_leg_finds(minilm_engine: Engine) -> None:
    assert dense_misses_rare_document(minilm_engine)
    client = QdrantClient(location=":memory:")
    # BM25 document vectors hold term frequencies only: the collection's sparse field applies IDF.
    client.create_collection(
        "hybrid",
        vectors_config={"text-dense": models.VectorParams(size=384, distance=models.Distance.COSINE)},
        sparse_vectors_config={"text-sparse-new": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    sparse = PoolragSparseEmbedding(engine=minilm_engine)
    store = QdrantVectorStore(
        "hybrid",
        client=client,
        enable_hybrid=True,
        sparse_doc_fn=sparse.encode_documents,
        sparse_query_fn=sparse.encode_queries,
    )
    index = VectorStoreIndex(
        [TextNode(text=t) for t in TEXTS],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=PoolragEmbedding(engine=minilm_engine),
    )
    retriever = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=3, sparse_top_k=3)
    assert retriever.retrieve(QUERY)[0].node.get_content() == RARE
    points, _ = client.scroll("hybrid", limit=100, with_vectors=True, with_payload=False)
    stored = sorted((p.vector["text-sparse-new"].indices, p.vector["text-sparse-new"].values) for p in points)
    expected_indices, expected_values = sparse.encode_documents(TEXTS)  # the pinned length: same vectors
    assert stored == sorted(zip(expected_indices, expected_values, strict=True))


def test_a_hybrid_collection_poolrag_ingest_filled_is_read_as_documented(
    minilm_engine: Engine, minilm_path: Path, tmp_path: Path
) -> None:
    """docs/integrations.md: LlamaIndex's Qdrant store reads a ``poolrag ingest --hybrid`` collection
    in hybrid mode with the vectors' names and this class's functions. ``sparse_query_fn`` alone, as
    the page said before, stops the store's construction: without ``sparse_doc_fn`` it loads
    FastEmbed for documents, which is not installed (ImportError). The sparse leg ranks as poolrag's
    own search does: same ids, texts and scores."""
    from poolrag.cli import main
    from poolrag.retrieval import Retriever
    from poolrag.stores import open_store

    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"{i}.txt").write_text(text)
    where = str(tmp_path / "qdrant")
    assert main(["ingest", str(folder), "--model", str(minilm_path), "--store", "qdrant", "--path", where,
                 "--collection", "demo", "--hybrid", "-q"]) == 0  # fmt: skip
    sparse = PoolragSparseEmbedding(engine=minilm_engine)
    client = QdrantClient(path=where)
    try:
        store = QdrantVectorStore(
            client=client,
            collection_name="demo",
            dense_vector_name="dense",
            enable_hybrid=True,
            sparse_vector_name="sparse",
            sparse_doc_fn=sparse.encode_documents,
            sparse_query_fn=sparse.encode_queries,
        )
        index = VectorStoreIndex.from_vector_store(store, embed_model=PoolragEmbedding(engine=minilm_engine))
        hybrid = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=3, sparse_top_k=3)
        assert hybrid.retrieve(QUERY)[0].node.get_content() == RARE
        lexical = index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=3, sparse_top_k=3)
        found = [(n.node.node_id, n.node.get_content(), round(n.score, 5)) for n in lexical.retrieve(QUERY)]
    finally:
        client.close()
    with open_store("qdrant", "demo", path=where) as own:
        core = Retriever(own, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        expected = [(r.id, r.text, round(r.score, 5)) for r in core.search(QUERY, 3, mode="sparse")]
    assert found == expected and found[0][1] == RARE


def test_a_batch_call_is_one_instrumentation_span(minilm_engine: Engine) -> None:
    """The checked batch calls are spanned once, as LlamaIndex's own are, not as two nested spans of
    the same name (the override is spanned by LlamaIndex's DispatcherSpanMixin, the base it calls too)."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    sparse = PoolragSparseEmbedding(engine=minilm_engine, embed_batch_size=2)
    spans = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(spans)
    try:
        sparse.get_text_embedding_batch(TEXTS[:3])
        asyncio.run(sparse.aget_text_embedding_batch(TEXTS[:3]))
    finally:
        root.span_handlers.remove(spans)
    names = [span.id_.split("-")[0] for span in spans.completed_spans]
    assert names == [
        "PoolragSparseEmbedding.get_text_embedding_batch",
        "PoolragSparseEmbedding.aget_text_embedding_batch",
    ]
