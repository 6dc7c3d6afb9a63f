"""Retriever's hybrid search without a named fusion or a saved ``--tune`` record fuses by the
collection's default: BM25 leads (``OUT_OF_LANGUAGE_FUSION``) where the BM25 record says the model
does not cover the collection's language, ``DEFAULT_FUSION`` elsewhere; a saved record and a named
fusion still win, and a malformed languages record is refused at the hybrid search that would use it
while dense and sparse searches keep working."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_retrieval_hybrid import QUERIES, fill

from poolrag.errors import InvalidInputError
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import InMemoryStore
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.language_prior import LANGUAGES_RECORD_KEY, OUT_OF_LANGUAGE_FUSION, LanguageRecord
from poolrag.stores.retrieval_record import RetrievalRecord, save_record


@pytest.fixture(scope="module")
def bm25(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


def declared(store: InMemoryStore, languages: object) -> InMemoryStore:
    spec = store.read_spec()
    record = {"analyzer": {"name": "wordpiece"}, LANGUAGES_RECORD_KEY: languages}
    store.update_spec(dataclasses.replace(spec, model_options={BM25_RECORD_KEY: record}))
    return store


def _ranking(results) -> list[tuple[str, float]]:
    return [(r.id, round(r.score, 9)) for r in results]


@pytest.mark.parametrize(
    ("language", "fusion"), [("italian", OUT_OF_LANGUAGE_FUSION), ("english", DEFAULT_FUSION)]
)
def test_hybrid_search_fuses_by_the_collections_language_default(
    language: str, fusion: object, minilm_engine, bm25: BM25Encoder
) -> None:
    store = InMemoryStore(f"lang_{language}")
    fill(store, minilm_engine, bm25)
    declared(store, LanguageRecord.declared(("en",), language).to_metadata())
    retriever = Retriever(store, minilm_engine, sparse_encoder=bm25)
    found = {q: _ranking(retriever.search(q, 3, mode="hybrid")) for q in QUERIES}
    for query in QUERIES:
        assert found[query] == _ranking(retriever.search(query, 3, mode="hybrid", fusion=fusion))
    if fusion != DEFAULT_FUSION:
        assert any(
            found[q] != _ranking(retriever.search(q, 3, mode="hybrid", fusion=DEFAULT_FUSION))
            for q in QUERIES
        )
    # A saved --tune record still wins over the language default.
    save_record(store, RetrievalRecord(("weighted", 0.2), 6))
    tuned = Retriever(store, minilm_engine, sparse_encoder=bm25)
    for query in QUERIES:
        want = _ranking(tuned.search(query, 3, mode="hybrid", fusion=("weighted", 0.2), prefetch=6))
        assert _ranking(tuned.search(query, 3, mode="hybrid")) == want


def test_a_bad_languages_record_is_refused_where_it_would_be_used(minilm_engine, bm25: BM25Encoder) -> None:
    store = InMemoryStore("lang_bad")
    fill(store, minilm_engine, bm25)
    declared(store, {"model": ["en"], "collection": "../../etc"})
    retriever = Retriever(store, minilm_engine, sparse_encoder=bm25)
    with pytest.raises(
        InvalidInputError, match="'lang_bad' has a bad BM25 languages record: collection must be"
    ):
        retriever.search(QUERIES[0], 3, mode="hybrid")
    assert len(retriever.search(QUERIES[0], 3, mode="dense")) == 3
    assert len(retriever.search(QUERIES[0], 3, mode="sparse")) > 0
    assert len(retriever.search(QUERIES[0], 3, mode="hybrid", fusion="rrf")) == 3
