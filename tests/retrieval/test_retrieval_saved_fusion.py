"""Retriever's hybrid search reads the collection's saved retrieval record: with no fusion named it
fuses by the record's rule, legs as deep as the record says (never shallower than the hits wanted);
a named fusion or prefetch wins; a bad record is refused at the search that would use it, and dense
and sparse searches, which read no record, keep working (in memory and with the Matryoshka funnel).
A bare cross-encoder takes the reranker share the record holds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_retrieval_hybrid import QUERIES, fill

from poolrag import Engine
from poolrag.retrieval import CrossEncoderReranker, Retriever
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT
from poolrag.sparse import BM25Encoder
from poolrag.stores import InMemoryStore
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.retrieval_record import RetrievalRecord, RetrievalRecordError, save_record

SAVED = RetrievalRecord(("weighted", 0.9), 6)


@pytest.fixture(scope="module")
def bm25(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


def _ranking(results) -> list[tuple[str, float]]:
    return [(r.id, round(r.score, 9)) for r in results]


@pytest.mark.parametrize("dimension", [384, 64])
def test_hybrid_search_fuses_by_the_saved_record_unless_told_otherwise(
    dimension: int, minilm_engine, bm25: BM25Encoder
) -> None:
    store = InMemoryStore("saved")
    fill(store, minilm_engine, bm25, dimension)
    before = Retriever(store, minilm_engine, sparse_encoder=bm25)
    assert before.saved is None
    default = {q: _ranking(before.search(q, 3, mode="hybrid")) for q in QUERIES}
    for query in QUERIES:
        assert default[query] == _ranking(before.search(query, 3, mode="hybrid", fusion=DEFAULT_FUSION))

    save_record(store, SAVED)
    retriever = Retriever(store, minilm_engine, sparse_encoder=bm25)
    assert retriever.saved == SAVED
    for query in QUERIES:
        tuned = _ranking(retriever.search(query, 3, mode="hybrid"))
        assert tuned == _ranking(retriever.search(query, 3, mode="hybrid", fusion=SAVED.fusion, prefetch=6))
        # A named fusion wins, and reads nothing else from the record (legs as deep as the hits).
        assert _ranking(retriever.search(query, 3, mode="hybrid", fusion=DEFAULT_FUSION)) == default[query]
        # A named prefetch wins over the saved one.
        assert _ranking(retriever.search(query, 3, mode="hybrid", prefetch=3)) == _ranking(
            retriever.search(query, 3, mode="hybrid", fusion=SAVED.fusion, prefetch=3)
        )
        # Asking for more hits than the saved depth deepens the legs to match.
        assert len(retriever.search(query, 8, mode="hybrid")) == 8
    assert any(_ranking(retriever.search(q, 3, mode="hybrid")) != default[q] for q in QUERIES)


def test_a_bad_record_is_refused_where_it_would_be_used(minilm_engine, bm25: BM25Encoder) -> None:
    store = InMemoryStore("bad")
    fill(store, minilm_engine, bm25)
    spec = store.read_spec()
    bad = {**SAVED.to_metadata(), "fusion": "weighted", "sparse_weight": None}
    store.update_spec(dataclasses.replace(spec, retrieval=bad))
    retriever = Retriever(store, minilm_engine, sparse_encoder=bm25)
    with pytest.raises(RetrievalRecordError, match="bad saved retrieval record: sparse_weight must be"):
        retriever.search(QUERIES[0], 3, mode="hybrid")
    assert len(retriever.search(QUERIES[0], 3, mode="dense")) == 3
    assert len(retriever.search(QUERIES[0], 3, mode="sparse")) > 0
    assert len(retriever.search(QUERIES[0], 3, mode="hybrid", fusion="rrf")) == 3


@pytest.mark.real_weights
def test_a_bare_cross_encoder_takes_the_saved_share_and_a_configured_one_keeps_its_own(
    minilm_engine, bm25: BM25Encoder, assets: Path
) -> None:
    cross = Engine(assets / "ms-marco-MiniLM-L-12-v2")
    store = InMemoryStore("shares")
    fill(store, minilm_engine, bm25)
    assert Retriever(store, minilm_engine, reranker=cross).reranker.weight == DEFAULT_RERANK_WEIGHT
    save_record(store, RetrievalRecord(("minmax", 0.2), 10, rerank_weight=0.75))
    assert Retriever(store, minilm_engine, reranker=cross).reranker.weight == 0.75
    configured = CrossEncoderReranker(cross, weight=0.25)
    assert Retriever(store, minilm_engine, reranker=configured).reranker.weight == 0.25
    # a second stage chosen and the share left open (``search --second-stage replace`` without
    # --rerank-weight) takes the saved share as a bare model does; it used to fall back to 0.5
    open_share = CrossEncoderReranker(cross, second_stage="replace", weight=None)
    taken = Retriever(store, minilm_engine, reranker=open_share).reranker
    assert (taken.weight, taken.second_stage) == (0.75, "replace")
