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


def test_a_collection_poolrag_ingest_filled_is_read_as_documented(
    minilm_engine: Engine, minilm_path: Path, tmp_path: Path
) -> None:
    """docs/integrations.md: LlamaIndex's MilvusVectorStore reads a ``poolrag ingest`` collection
    (a ``--hybrid`` one too: its sparse field does not get in the way) with the field names it
    gives, the collection loaded, and the metadata of the fields named in ``output_fields``;
    text, fields and scores are those ``poolrag search`` gives (the node ids are new ones)."""
    from poolrag.cli import main
    from poolrag.retrieval import Retriever
    from poolrag.stores import open_store

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\n## Capitals\n\n" + TEXTS[0] + "\n")
    (folder / "notes.md").write_text(TEXTS[4] + "\n")
    uri = str(tmp_path / "m.db")
    args = ["ingest", str(folder), "--model", str(minilm_path), "--uri", uri, "--collection", "demo"]
    assert main([*args, "--hybrid", "-q"]) == 0
    query = next(q for q, i in QUERIES.items() if i == 0)
    fields = ["source", "start", "end", "chunk_index", "filename", "headings"]
    with open_store("milvus", "demo", uri=uri) as own:
        expected = [
            (r.text, {f: r.payload.get(f) for f in fields}, round(r.score, 4))
            for r in Retriever(own, minilm_engine).search(query, 2)
        ]
    store = MilvusVectorStore(
        uri=uri,
        collection_name="demo",
        dim=384,
        embedding_field="vector",
        doc_id_field="id",
        text_key="text",
        output_fields=fields,
    )
    store.client.load_collection("demo")
    index = VectorStoreIndex.from_vector_store(store, embed_model=PoolragEmbedding(engine=minilm_engine))
    hits = index.as_retriever(similarity_top_k=2).retrieve(query)
    assert [(h.node.get_content(), h.node.metadata, round(h.score, 4)) for h in hits] == expected
    assert expected[0][1]["headings"] == ["Guide"] and TEXTS[0] in expected[0][0]
    assert len(hits) == 2
