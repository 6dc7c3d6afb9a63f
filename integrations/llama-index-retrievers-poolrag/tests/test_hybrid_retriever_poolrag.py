"""PoolragHybridRetriever over a collection that ``poolrag eval --tune --save`` tuned in real Qdrant local
mode (this package's environment has no poolrag Milvus store, see pyproject.toml): without a fusion it
ranks exactly as the core retriever does with the saved fusion passed explicitly, which differs from
the default's ranking on this set; a fusion given to the retriever wins; a bad record is refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from llama_index.core.indices.query.query_transform import HyDEQueryTransform
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from llama_index.retrievers.poolrag import PoolragHybridRetriever

from poolrag.errors import InputTooLongError, InvalidInputError
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store
from poolrag.stores.base import METADATA_KEY
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.retrieval_record import RetrievalRecordError, saved_record
from poolrag.testing.partner_fixtures import loop_turns_until_done
from poolrag.testing.rare_term_beir import tune_and_save

QUERIES = ["Which warehouse ships part", "Which team is", "pump controller part"]
K = 3


def _ranking(pairs) -> list[tuple[str, float]]:
    return [(str(i), round(float(s), 6)) for i, s in pairs]


def test_the_retriever_fuses_as_the_saved_record_says_unless_told_otherwise(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        record = saved_record(store.read_spec())
        assert record is not None and record.fusion != DEFAULT_FUSION
        core = Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=K)
        pinned = PoolragHybridRetriever(
            engine=minilm_engine, store=store, similarity_top_k=K, fusion=DEFAULT_FUSION
        )
        differs = False
        for query in QUERIES:
            tuned = core.search(query, K, mode="hybrid", fusion=record.fusion, prefetch=record.prefetch)
            expected = _ranking((r.id, r.score) for r in tuned)
            got = retriever.retrieve(query)
            assert _ranking((n.node.node_id, n.score) for n in got) == expected
            assert [n.node.get_content() for n in got] == [r.text for r in tuned]
            located = [(n.node.start_char_idx, n.node.end_char_idx) for n in got]  # type: ignore[attr-defined]
            assert located == [(r.start, r.end) for r in tuned] and all(end for _, end in located)
            default = _ranking(
                (r.id, r.score) for r in core.search(query, K, mode="hybrid", fusion=DEFAULT_FUSION)
            )
            assert _ranking((n.node.node_id, n.score) for n in pinned.retrieve(query)) == default
            differs = differs or default != expected
        assert differs
        # Filters reach both legs: only chunks of the catalogue remain.
        kind = MetadataFilters(filters=[MetadataFilter(key="kind", value="catalogue")])
        filtered = PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=K, filters=kind)
        nodes = filtered.retrieve(QUERIES[1])
        assert nodes and all(n.node.metadata["kind"] == "catalogue" for n in nodes)
    finally:
        store.close()


def test_aretrieve_equals_retrieve_and_leaves_the_loop_free(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=K)
        for query in QUERIES:
            turns, got = asyncio.run(loop_turns_until_done(retriever.aretrieve(query)))
            assert turns >= 1 and len(got) == K
            expected = _ranking((n.node.node_id, n.score) for n in retriever.retrieve(query))
            assert _ranking((n.node.node_id, n.score) for n in got) == expected
    finally:
        store.close()


def test_a_bad_saved_record_is_refused_when_the_retriever_is_built(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        spec = json.loads(store.read_spec().to_metadata())
        spec["retrieval"]["fusion"] = "importlib"
        store._client.update_collection(collection, metadata={METADATA_KEY: json.dumps(spec)})
        store.close()
        store = open_store("qdrant", collection, **where)
        with pytest.raises(RetrievalRecordError, match="bad saved retrieval record: fusion must be one of"):
            PoolragHybridRetriever(engine=minilm_engine, store=store)
    finally:
        store.close()


def test_a_long_query_is_cut_unless_told_not_to_and_a_bad_top_k_is_named(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    """``truncate_prompt_tokens`` (-1 by default, as the other adapters) reaches the query's dense leg;
    a ``similarity_top_k`` set after building is checked at the search, by its name."""
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    long_query = "Which warehouse ships part " * (minilm_engine.max_model_len // 2)
    try:
        assert len(minilm_engine.tokenize(long_query)) > minilm_engine.max_model_len
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=K)
        assert len(retriever.retrieve(long_query)) == K
        strict = PoolragHybridRetriever(
            engine=minilm_engine, store=store, similarity_top_k=K, truncate_prompt_tokens=None
        )
        with pytest.raises(InputTooLongError):
            strict.retrieve(long_query)
        # similarity_top_k is named as the user set it, also when set as an attribute after building
        with pytest.raises(InvalidInputError, match="similarity_top_k must be a positive integer, not None"):
            PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=None)  # type: ignore[arg-type]
        retriever.similarity_top_k = 0
        with pytest.raises(InvalidInputError, match=r"^similarity_top_k must be a positive integer, not 0"):
            retriever.retrieve("Which team is")
        with pytest.raises(InvalidInputError, match=r"^similarity_top_k must be a positive integer, not 0"):
            asyncio.run(retriever.aretrieve("Which team is"))
    finally:
        store.close()


def test_the_dense_leg_reads_a_query_bundles_embedding_or_hyde_strings_as_llama_index_does(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    """LlamaIndex's vector retrievers embed a bundle's ``embedding`` if set, else the mean of its
    ``custom_embedding_strs`` (where HyDE puts its hypothetical answer); the sparse leg reads the text."""
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, similarity_top_k=K)
        core, query, other = retriever.retriever, QUERIES[1], QUERIES[2]
        plain = _ranking((n.node.node_id, n.score) for n in retriever.retrieve(query))
        hyde = HyDEQueryTransform(llm=MockLLM(max_tokens=8))(QueryBundle(query))
        assert hyde.query_str == query and len(hyde.custom_embedding_strs) == 2
        mean = core.embedder.embed(hyde.custom_embedding_strs, input_type="query").mean(0)
        bundles = {
            "embedding": (QueryBundle(query, embedding=core.embedder.embed_query(other).tolist()), None),
            "hyde": (hyde, mean),
        }
        for name, (bundle, vector) in bundles.items():
            vector = bundle.embedding if vector is None else vector
            searched = core.search(query, K, mode="hybrid", query_vector=vector)
            expected = _ranking((r.id, r.score) for r in searched)
            got = _ranking((n.node.node_id, n.score) for n in retriever.retrieve(bundle))
            assert got == expected != plain, name
            agot = asyncio.run(retriever.aretrieve(bundle))
            assert _ranking((n.node.node_id, n.score) for n in agot) == expected, name
        with pytest.raises(InvalidInputError, match="query_vector must be one finite vector of 384"):
            retriever.retrieve(QueryBundle(query, embedding=[0.5] * 10))
    finally:
        store.close()
