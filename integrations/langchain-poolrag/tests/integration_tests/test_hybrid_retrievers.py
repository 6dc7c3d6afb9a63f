"""PoolragHybridRetriever over collections that ``poolrag eval --tune --save`` tuned, in real Qdrant local
mode and Milvus Lite: without a fusion it ranks exactly as the core retriever does with the saved
fusion passed explicitly (which differs from the default's ranking on this set); a fusion given to
the retriever or to the call wins; a bad saved record is refused when the retriever is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_poolrag import PoolragHybridRetriever

from poolrag.errors import InputTooLongError
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store
from poolrag.stores.base import METADATA_KEY
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.retrieval_record import saved_record
from poolrag.testing.partner_fixtures import loop_turns_until_done
from poolrag.testing.rare_term_beir import tune_and_save

QUERIES = ["Which warehouse ships part", "Which team is", "pump controller part"]
K = 3


def _ranking(pairs) -> list[tuple[str, float]]:
    return [(str(i), round(float(s), 6)) for i, s in pairs]


@pytest.mark.parametrize("kind", ["qdrant", "milvus"])
def test_the_retriever_fuses_as_the_saved_record_says_unless_told_otherwise(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save(kind, tmp_path, minilm_path)
    store = open_store(kind, collection, **where)
    try:
        record = saved_record(store.read_spec())
        assert record is not None and record.fusion != DEFAULT_FUSION
        core = Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, k=K)
        pinned = PoolragHybridRetriever(engine=minilm_engine, store=store, k=K, fusion=DEFAULT_FUSION)
        differs = False
        for query in QUERIES:
            tuned = core.search(query, K, mode="hybrid", fusion=record.fusion, prefetch=record.prefetch)
            default = core.search(query, K, mode="hybrid", fusion=DEFAULT_FUSION)  # no record read at all
            got = retriever.invoke(query)
            expected = _ranking((r.id, r.score) for r in tuned)
            assert _ranking((d.id, d.metadata["score"]) for d in got) == expected
            assert [d.page_content for d in got] == [r.text for r in tuned]
            # where each ingested chunk lies in its document, as `poolrag search --json` gives it
            assert [(d.metadata["start"], d.metadata["end"]) for d in got] == [
                (r.start, r.end) for r in tuned
            ]
            assert all(type(d.metadata["chunk_index"]) is int and d.metadata["end"] > 0 for d in got)
            explicit = _ranking((d.id, d.metadata["score"]) for d in pinned.invoke(query))
            assert explicit == _ranking((r.id, r.score) for r in default)
            per_call = retriever.invoke(query, fusion=list(DEFAULT_FUSION))
            assert _ranking((d.id, d.metadata["score"]) for d in per_call) == explicit
            differs = differs or explicit != expected
        assert differs
    finally:
        store.close()


async def test_async_calls_take_the_per_call_arguments_and_leave_the_loop_free(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        retriever = PoolragHybridRetriever(engine=minilm_engine, store=store, k=K)
        for query in QUERIES:
            per_call = {"k": 2, "fusion": list(DEFAULT_FUSION)}
            sync = retriever.invoke(query, **per_call)
            turns, got = await loop_turns_until_done(retriever.ainvoke(query, **per_call))
            assert turns >= 1 and len(got) == 2
            assert _ranking((d.id, d.metadata["score"]) for d in got) == _ranking(
                (d.id, d.metadata["score"]) for d in sync
            )
    finally:
        store.close()


def test_a_bad_saved_record_is_refused_when_the_retriever_is_built(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    try:
        spec = json.loads(store.read_spec().to_metadata())
        spec["retrieval"]["prefetch"] = -4
        store._client.update_collection(collection, metadata={METADATA_KEY: json.dumps(spec)})
        store.close()
        store = open_store("qdrant", collection, **where)
        # pydantic wraps what a validator raises in its ValidationError (a ValueError), message kept
        with pytest.raises(ValueError, match="bad saved retrieval record: prefetch must be"):
            PoolragHybridRetriever(engine=minilm_engine, store=store)
        with pytest.raises(ValueError, match="fusion must be"):
            PoolragHybridRetriever(engine=minilm_engine, store=store, fusion=("minmax", 2.0))
    finally:
        store.close()


def test_a_query_longer_than_the_model_is_cut_as_every_adapter_cuts_unless_told_not_to(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    """``truncate_prompt_tokens`` (a field of every adapter, -1 by default) reaches the query's dense leg."""
    collection, where = tune_and_save("qdrant", tmp_path, minilm_path)
    store = open_store("qdrant", collection, **where)
    long_query = "Which warehouse ships part " * (minilm_engine.max_model_len // 2)
    try:
        assert len(minilm_engine.tokenize(long_query)) > minilm_engine.max_model_len
        assert len(PoolragHybridRetriever(engine=minilm_engine, store=store, k=K).invoke(long_query)) == K
        strict = PoolragHybridRetriever(engine=minilm_engine, store=store, k=K, truncate_prompt_tokens=None)
        with pytest.raises(InputTooLongError):
            strict.invoke(long_query)
    finally:
        store.close()
