"""``poolrag eval``'s hybrid modes rank with the collection's default fusion: where the BM25 record
says the model does not cover the collection's language, the same list as a hybrid search fused by
``OUT_OF_LANGUAGE_FUSION``, not ``DEFAULT_FUSION``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from retrieval.test_retrieval_hybrid import QUERIES, fill

from poolrag.evaluation.beir import BeirQuery
from poolrag.evaluation.run import Evaluation, documents_of
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import InMemoryStore
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.language_prior import LANGUAGES_RECORD_KEY, OUT_OF_LANGUAGE_FUSION, LanguageRecord


@pytest.fixture(scope="module")
def bm25(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


def test_eval_hybrid_uses_the_language_default(minilm_engine, bm25: BM25Encoder) -> None:
    store = InMemoryStore("eval_lang")
    fill(store, minilm_engine, bm25)
    languages = LanguageRecord.declared(("en",), "spanish").to_metadata()
    record = {"analyzer": {"name": "wordpiece"}, LANGUAGES_RECORD_KEY: languages}
    store.update_spec(dataclasses.replace(store.read_spec(), model_options={BM25_RECORD_KEY: record}))
    retriever = Retriever(store, minilm_engine, sparse_encoder=bm25)
    differs = False
    for i, text in enumerate(QUERIES):
        ranked = documents_of(Evaluation._search(retriever, BeirQuery(str(i), text), "hybrid", 3, None))
        leaning = retriever.search(text, 3, mode="hybrid", fusion=OUT_OF_LANGUAGE_FUSION, candidates=3)
        default = retriever.search(text, 3, mode="hybrid", fusion=DEFAULT_FUSION, candidates=3)
        assert ranked == documents_of(leaning)
        differs |= ranked != documents_of(default)
    assert differs
