"""The hybrid default of a BM25 collection follows its recorded languages: BM25 leads
(``OUT_OF_LANGUAGE_FUSION``) only when both the model's and the collection's languages are known and
the model does not cover the collection's; anything unknown keeps ``DEFAULT_FUSION``. The record is
checked on read: a malformed one is refused with the collection and the field named, and a
retriever refuses it at the hybrid search that would use it."""

from __future__ import annotations

import dataclasses

import pytest

from poolrag.errors import InvalidInputError
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.sparse.words import LANGUAGES
from poolrag.stores.base import CollectionSpec
from poolrag.stores.hybrid import DEFAULT_FUSION, check_fusion
from poolrag.stores.language_prior import (
    LANGUAGE_CODES,
    LANGUAGES_RECORD_KEY,
    OUT_OF_LANGUAGE_FUSION,
    LanguageRecord,
    collection_default_fusion,
    recorded_languages,
)

BM25 = {"avg_doc_length": 12.0, "k1": 1.2, "b": 0.75, "analyzer": {"name": "wordpiece"}}


def _spec(languages: object = None) -> CollectionSpec:
    record = dict(BM25) if languages is None else {**BM25, LANGUAGES_RECORD_KEY: languages}
    return CollectionSpec("docs", 8, "model", 8, sparse="bm25", model_options={BM25_RECORD_KEY: record})


@pytest.mark.parametrize(
    ("model", "language", "fusion"),
    [
        (("en",), "italian", OUT_OF_LANGUAGE_FUSION),
        (("de", "en"), "spanish", OUT_OF_LANGUAGE_FUSION),
        (("en",), "english", DEFAULT_FUSION),
        (("de", "en"), "german", DEFAULT_FUSION),
        ((), "italian", DEFAULT_FUSION),  # the card names no language: unknown
        (("en",), None, DEFAULT_FUSION),  # the collection's language was not declared
    ],
)
def test_bm25_leads_only_where_the_model_does_not_cover_the_collections_language(
    model: tuple[str, ...], language: str | None, fusion: object
) -> None:
    record = LanguageRecord.declared(model, language)
    spec = _spec(record.to_metadata())
    assert recorded_languages(spec) == record
    assert collection_default_fusion(spec) == fusion


def test_a_collection_without_the_record_keeps_the_default() -> None:
    assert collection_default_fusion(_spec()) == DEFAULT_FUSION
    dense_only = CollectionSpec("dense", 8, "model", 8)
    assert collection_default_fusion(dense_only) == DEFAULT_FUSION


def test_the_out_of_language_fusion_is_one_of_the_stores_rules_leaning_on_bm25() -> None:
    assert check_fusion(OUT_OF_LANGUAGE_FUSION) == OUT_OF_LANGUAGE_FUSION
    assert OUT_OF_LANGUAGE_FUSION[0] == "minmax" and OUT_OF_LANGUAGE_FUSION[1] > 0.5


def test_every_analyzer_language_has_a_code() -> None:
    assert set(LANGUAGE_CODES) == set(LANGUAGES)
    with pytest.raises(InvalidInputError, match="unknown collection language 'klingon'"):
        LanguageRecord.declared(("en",), "klingon")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"model": "en", "collection": "it"}, "model must be a list"),
        ({"model": ["en", "../x"], "collection": "it"}, "model must be a list"),
        ({"model": ["en"], "collection": 3}, "collection must be an ISO 639 code"),
        ({"model": ["en"], "collection": "italian"}, "collection must be an ISO 639 code"),
        ({"model": ["en"]}, "record must be an object"),
        ({"model": ["en"], "collection": "it", "module": "os"}, "record must be an object"),
        (["en", "it"], "record must be an object"),
    ],
)
def test_a_bad_record_is_refused_naming_the_collection_and_field(bad: object, field: str) -> None:
    message = f"collection 'docs' has a bad BM25 languages record: {field}"
    with pytest.raises(InvalidInputError, match=message):
        collection_default_fusion(_spec(bad))


def test_a_replaced_record_is_read_afresh() -> None:
    spec = _spec(LanguageRecord(("en",), "it").to_metadata())
    assert collection_default_fusion(spec) == OUT_OF_LANGUAGE_FUSION
    options = {BM25_RECORD_KEY: {**BM25, LANGUAGES_RECORD_KEY: {"model": ["en"], "collection": "en"}}}
    assert collection_default_fusion(dataclasses.replace(spec, model_options=options)) == DEFAULT_FUSION
