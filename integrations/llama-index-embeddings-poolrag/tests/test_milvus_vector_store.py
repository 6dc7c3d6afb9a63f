"""LlamaIndex's own MilvusVectorStore on a Milvus Lite file, embedded by PoolragEmbedding: the Milvus
store LlamaIndex users already run (it pins pymilvus 2.6), in the environment that holds
poolrag[milvus] too, ranks each query's document first with the engine's vectors and scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.vector_stores.milvus import MilvusVectorStore

from poolrag import Engine
from poolrag.testing.partner_fixtures import DOC, QUERY
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS


def test_llamaindex_milvus_store_finds_each_querys_document(minilm_engine: Engine, tmp_path: Path) -> None:
    store = MilvusVectorStore(
        uri=str(tmp_path / "llamaindex.db"), collection_name="rag", dim=384, overwrite=True
    )
    nodes = [
        TextNode(id_=f"doc-{i}", text=text, metadata=meta)
        for i, (text, meta) in enumerate(zip(TEXTS, METADATAS, strict=True))
    ]
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=PoolragEmbedding(engine=minilm_engine),
    )
    # what LlamaIndex embeds of a node: its text under its metadata
    documents = minilm_engine.embed_array([n.get_content(MetadataMode.EMBED) for n in nodes], DOC)
    retriever = index.as_retriever(similarity_top_k=3)
    for query, expected in QUERIES.items():
        hits = retriever.retrieve(query)
        assert hits[0].node.node_id == f"doc-{expected}", (query, [h.node.get_content() for h in hits])
        # Milvus' inner product of the engine's query and document vectors, in the engine's order
        cosine = documents @ minilm_engine.embed_array([query], QUERY)[0]
        ranked = [f"doc-{i}" for i in np.argsort(-cosine)[:3]]
        assert [h.node.node_id for h in hits] == ranked
        assert [h.score for h in hits] == pytest.approx(sorted(cosine, reverse=True)[:3], abs=1e-5)

    biology = index.as_retriever(
        similarity_top_k=3, filters=MetadataFilters(filters=[ExactMatchFilter(key="topic", value="biology")])
    )
    found = [h.node.node_id for h in biology.retrieve("What is the capital of France?")]
    assert sorted(found) == ["doc-2", "doc-3"]

    rows = store.client.query("rag", filter="", output_fields=["embedding"], limit=100)
    assert len(rows) == len(TEXTS)
    stored = {row["id"]: np.asarray(row["embedding"], dtype=np.float32) for row in rows}
    for i, vector in enumerate(documents):
        np.testing.assert_allclose(stored[f"doc-{i}"], vector, atol=1e-6)
