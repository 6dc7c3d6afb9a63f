"""BM25 over the word analyzer, on real Milvus Lite and Qdrant local mode: the analyzer is recorded with
the collection, a reopened collection analyses queries with it (no encoder needed), another analyzer
is refused on ingest and on search, and collections from before analyzers keep their word pieces."""

from __future__ import annotations

import dataclasses
import logging
import unicodedata
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.readers import Document
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder, WordAnalyzer
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.sparse.words import term_id
from poolrag.stores import CollectionMismatchError, open_store

KINDS = ["milvus", "qdrant"]
DOCUMENTS = {
    "apt": "Installing packages: apt fetches each archive and unpacks it.",
    "boot": "The boot loader starts the kernel from the first disk.",
    "mail": "Mail is delivered by the local transfer agent.",
}
# Shares only stems with "apt" ("installed" → instal, "package" → packag): no word piece matches.
QUERY = "installed package"


def _open(kind: str, root: Path, collection: str = "docs"):
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}
    return open_store(kind, collection, **where)


def _ingest(
    store,
    engine,
    root: Path,
    analyzer: WordAnalyzer | None,
    old_record: dict | None = None,
    texts: dict[str, str] = DOCUMENTS,
):
    """Ingest ``DOCUMENTS``; ``old_record``: first create the collection with the BM25 record poolrag
    wrote before analyzers were recorded."""
    cache = EmbeddingCache(root / "cache.sqlite")
    sparse = bm25_for_model(engine.tokenizer, engine.facts.model_identity, cache, analyzer)
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(engine, cache)),
        TokenChunker(engine.tokenizer, max_tokens=64, overlap=8),
        checkpoint_dir=root / "ck",
        progress=False,
        sparse_encoder=sparse,
    )
    if old_record is not None:
        store.ensure_collection(
            dataclasses.replace(pipeline.spec, model_options={BM25_RECORD_KEY: old_record})
        )
    documents = [Document(name, text, {"name": name}) for name, text in texts.items()]
    return pipeline.run(documents)


@pytest.mark.parametrize("kind", KINDS)
def test_the_recorded_analyzer_is_used_by_a_reopened_collection(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    analyzer = WordAnalyzer("english")
    store = _open(kind, tmp_path)
    try:
        report = _ingest(store, minilm_engine, tmp_path, analyzer)
        assert report.upserted == 3 and report.sparse_computed == 3
    finally:
        store.close()

    store = _open(kind, tmp_path)  # a new client: everything comes from the collection itself
    try:
        record = store.read_spec().model_options[BM25_RECORD_KEY]
        assert record["analyzer"] == analyzer.record()
        # The stored document vector holds the hashed stems of the document's words.
        (stored,) = store.fetch_sparse([h.id for h in store.search_sparse(_query(analyzer), 1)]).values()
        assert {term_id("instal"), term_id("packag"), term_id("apt")} <= set(stored.indices.tolist())

        retriever = Retriever(store, minilm_engine)  # no sparse encoder: the recorded analyzer serves
        hits = retriever.search(QUERY, 3, mode="sparse")
        assert [h.payload["name"] for h in hits] == ["apt"]
        assert retriever.search(QUERY, 3, mode="hybrid")[0].payload["name"] == "apt"
        # The same encoder named explicitly is accepted; word pieces are refused, not searched.
        Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(None, analyzer=analyzer))
        with pytest.raises(CollectionMismatchError, match=r"words \(english\) analyzer.*uses wordpiece"):
            Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        # Ingesting with another analyzer (or language) into it is refused before anything is written.
        for other in (None, WordAnalyzer("german")):
            with pytest.raises(CollectionMismatchError, match="BM25 terms were made by the words"):
                _ingest(store, minilm_engine, tmp_path, other)
        assert store.count() == 3
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_words_with_marks_and_unspaced_scripts_are_found_by_their_words(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    """Each combining mark ended a word: the query हिन्दी was the terms ह, न, द and ranked a text
    of other words with those letters (हैं नदी दो) first; a decomposed café never matched café;
    a Thai word never matched inside the phrase it is written in."""
    texts = {
        "hindi": "हिन्दी भारत की एक भाषा है।",
        "river": "यहाँ नदी और दो हैं।",
        "cafe": unicodedata.normalize("NFD", "Un café noir, s'il vous plaît."),
        "thai": "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่าง",
        "other": "ฉันชอบกินข้าวผัดมาก",
    }
    store = _open(kind, tmp_path)
    try:
        _ingest(store, minilm_engine, tmp_path, WordAnalyzer(), texts=texts)
        retriever = Retriever(store, minilm_engine)
        for query, name in [("हिन्दी", "hindi"), ("café", "cafe"), ("ภาษาไทย", "thai")]:
            assert retriever.search(query, 1, mode="sparse")[0].payload["name"] == name, query
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_query_without_vowel_marks_finds_text_written_with_them(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    """Arabic harakat and Hebrew points are optional: a dictionary or the Quran writes ``كِتَابٌ``,
    people type ``كتاب``. They were part of the term, so the query matched nothing (Lucene's Arabic
    normaliser and ICU folding delete them). A collection recorded before keeps them, and says so
    when an analyzer that drops them is handed to it."""
    texts = {
        "book": "هَذَا كِتَابٌ جَمِيلٌ",  # "this is a beautiful book", vocalised
        "house": "البيت كبير",  # "the house is big"
        "peace": "שָׁלוֹם עֲלֵיכֶם",  # "peace be upon you", pointed
    }
    store = _open(kind, tmp_path)
    try:
        _ingest(store, minilm_engine, tmp_path, WordAnalyzer(), texts=texts)
        retriever = Retriever(store, minilm_engine)
        for query, name in [("كتاب", "book"), ("جميل", "book"), ("שלום", "peace")]:
            assert [h.payload["name"] for h in retriever.search(query, 3, mode="sparse")] == [name], query
    finally:
        store.close()
    old = {**WordAnalyzer().record(), "drop_vowel_marks": False}
    store = _open(kind, tmp_path, "before")
    try:
        record = {"avg_doc_length": 3.0, "k1": 1.2, "b": 0.75, "analyzer": old}
        _ingest(store, minilm_engine, tmp_path, WordAnalyzer(), old_record=record, texts=texts)
        assert store.read_spec().model_options[BM25_RECORD_KEY]["analyzer"] == old
        hits = Retriever(store, minilm_engine).search("كِتَابٌ", 3, mode="sparse")  # as it is stored
        assert [h.payload["name"] for h in hits] == ["book"]
        with pytest.raises(CollectionMismatchError, match=r"words \(english, vowel marks kept\) analyzer"):
            Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(None, analyzer=WordAnalyzer()))
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_word_pieces_the_model_does_not_know_are_named_on_ingest(
    kind: str, tmp_path: Path, minilm_engine, caplog: pytest.LogCaptureFixture
) -> None:
    """An English model's vocabulary lacks Thai and most Han characters: their word pieces are its
    unknown token, which BM25 drops, so a default ``--hybrid`` collection of such text had almost no
    terms (a Thai text none) and the ingest said nothing; only a query in that script said it had none."""
    texts = {"thai": "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่าง", "zh": "如何重置我的密码", "en": "Reset the password."}
    store = _open(kind, tmp_path)
    try:
        with caplog.at_level(logging.WARNING, logger="poolrag.ingest.sparse_encoders"):
            _ingest(store, minilm_engine, tmp_path, None, texts=texts)
        warned = [r.getMessage() for r in caplog.records if "unknown token" in r.getMessage()]
        assert len(warned) == 1 and "--analyzer words" in warned[0], caplog.text
        pieces = Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
        with pytest.raises(InvalidInputError, match="no terms"):  # a Thai query is all unknown too
            pieces.search("ภาษาไทย", 3, mode="sparse")
    finally:
        store.close()
    caplog.clear()
    store = _open(kind, tmp_path, "english")
    try:
        with caplog.at_level(logging.WARNING, logger="poolrag.ingest.sparse_encoders"):
            _ingest(store, minilm_engine, tmp_path / "en", None)  # the model knows every word: no warning
        assert "unknown token" not in caplog.text
    finally:
        store.close()


def _query(analyzer: WordAnalyzer):
    (vector,) = BM25Encoder(None, analyzer=analyzer).encode_queries([QUERY])
    return vector


@pytest.mark.parametrize("kind", KINDS)
def test_a_collection_from_before_analyzers_keeps_word_pieces(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    store = _open(kind, tmp_path, "pieces")
    try:
        old = {"avg_doc_length": 10.0, "k1": 1.2, "b": 0.75}
        _ingest(store, minilm_engine, tmp_path, None, old_record=old)
        assert store.read_spec().model_options[BM25_RECORD_KEY] == old
        assert (
            Retriever(store, minilm_engine).sparse_encoder is None
        )  # word pieces need the model's tokenizer
        pieces = BM25Encoder(minilm_engine.tokenizer)
        hits = Retriever(store, minilm_engine, sparse_encoder=pieces).search("boot loader", 3, mode="sparse")
        assert hits[0].payload["name"] == "boot"
        with pytest.raises(CollectionMismatchError, match="wordpiece analyzer"):
            Retriever(store, minilm_engine, sparse_encoder=BM25Encoder(None, analyzer=WordAnalyzer()))
        with pytest.raises(CollectionMismatchError, match="made by the wordpiece analyzer"):
            _ingest(store, minilm_engine, tmp_path, WordAnalyzer())
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_adapters_hybrid_retriever_analyses_queries_as_the_collection_recorded(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    """What both partner packages' hybrid retrievers open (``frameworks.hybrid_search.open_hybrid``)
    takes the collection's analyzer: the query's stems find the document no word piece matches."""
    from poolrag.frameworks.hybrid_search import open_hybrid

    analyzer = WordAnalyzer("english")
    store = _open(kind, tmp_path, "words")
    try:
        _ingest(store, minilm_engine, tmp_path, analyzer)
        retriever = open_hybrid(minilm_engine, store)
        assert retriever.sparse_encoder.analyzer_record() == analyzer.record()
        assert [h.payload["name"] for h in retriever.search(QUERY, 1, mode="sparse")] == ["apt"]
    finally:
        store.close()
    (tmp_path / "old").mkdir()
    pieces = _open(kind, tmp_path / "old", "pieces")
    try:
        _ingest(pieces, minilm_engine, tmp_path / "old", None)
        assert open_hybrid(minilm_engine, pieces).search("boot loader", 1, mode="sparse")[0].payload[
            "name"
        ] == ("boot")
    finally:
        pieces.close()
