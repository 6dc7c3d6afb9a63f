"""A hybrid collection whose language nobody declared stems its BM25 words in the language its first
batch is written in: ``--analyzer words`` without ``--language`` recorded German as the collection's
language but stemmed in English (debian-faq-de sparse MRR@10 0.351, 0.393 with German stems)."""

from __future__ import annotations

import pytest

from poolrag.ingest.sparse_encoders import BM25ChunkEncoder, bm25_for_model
from poolrag.sparse.words import WordAnalyzer
from poolrag.stores.language_prior import LanguageRecord

GERMAN = [
    "Wie kann ich das Passwort ändern? Das ist nicht schwer, es wird in den Einstellungen gemacht.",
    "Die Pakete werden mit dem Paketmanager installiert, und die Abhängigkeiten werden aufgelöst.",
] * 3


def _encoder(languages: LanguageRecord | None) -> BM25ChunkEncoder:
    return bm25_for_model(None, "m@1", analyzer=WordAnalyzer(), languages=languages)


def test_an_undeclared_collection_stems_in_the_language_it_is_written_in() -> None:
    for languages in (None, LanguageRecord.declared(("en",), None)):  # no model card languages, or some
        encoder = _encoder(languages)
        encoder.adopt(None, GERMAN)
        assert encoder.analyzer_record()["language"] == "german"
        german = bm25_for_model(None, "m@1", analyzer=WordAnalyzer("german"))
        assert encoder.term_counts(GERMAN[:1]) == german.term_counts(GERMAN[:1])
        lengths = [sum(c.values()) for c in german.term_counts(GERMAN)]
        assert encoder.avg_doc_length == sum(lengths) / len(lengths)  # counted with the German stems


def test_a_declared_language_or_a_chosen_analyzer_language_stays() -> None:
    declared = _encoder(LanguageRecord.declared(("en",), "english"))
    declared.adopt(None, GERMAN)
    assert declared.analyzer_record()["language"] == "english"
    french = bm25_for_model(None, "m@1", analyzer=WordAnalyzer("french"))
    french.adopt(None, GERMAN)
    assert french.analyzer_record()["language"] == "french"


def test_a_later_run_without_a_language_takes_the_one_the_collection_recorded() -> None:
    """Re-running (or resuming) the command that made a German collection, still without
    ``--language``, writes German stems to it; it was refused for a language nobody gave. A
    declared other language, or another analyzer, is still refused."""
    from poolrag.stores.errors import CollectionMismatchError

    first = _encoder(None)
    first.adopt(None, GERMAN)
    recorded = first.settings()
    for languages in (None, LanguageRecord.declared(("en",), None)):
        again = _encoder(languages)
        again.adopt(recorded, GERMAN[:1])
        assert again.analyzer_record() == recorded["analyzer"]
        assert again.term_counts(GERMAN[:1]) == first.term_counts(GERMAN[:1])
        assert again.avg_doc_length == first.avg_doc_length
    with pytest.raises(
        CollectionMismatchError, match=r"words \(german\) analyzer, but this run uses words \(english\)"
    ):
        _encoder(LanguageRecord.declared(("en",), "english")).adopt(recorded, GERMAN[:1])
    unstemmed = bm25_for_model(None, "m@1", analyzer=WordAnalyzer(stem=False))
    with pytest.raises(CollectionMismatchError):
        unstemmed.adopt(recorded, GERMAN[:1])


@pytest.mark.parametrize(
    ("flag", "text", "terms"),
    [
        ("cjk_bigrams", "パスワードの有効期限", ["パスワードの有効期限"]),  # whole runs
        ("unicode_words", "हिन्दी में", ["ह", "न", "द", "म"]),  # words split at each combining mark
        ("drop_vowel_marks", "كِتَابٌ", ["كِتَابٌ"]),  # harakat kept
    ],
)
def test_a_collection_recorded_before_an_analyzer_flag_keeps_its_split(
    flag: str, text: str, terms: list[str]
) -> None:
    """No run's flag chooses how a collection splits CJK runs or marked words: one whose record
    predates the flag is written on as it was (its stored terms are split so), not refused, and its
    queries match alike."""
    first = _encoder(None)
    first.adopt(None, GERMAN)
    recorded = first.settings()
    del recorded["analyzer"][flag]
    again = _encoder(None)
    again.adopt(recorded, [text])
    assert again.analyzer_record()[flag] is False
    assert again.encoder.analyzer.terms(text) == terms


def test_a_declared_language_the_collection_did_not_record_is_refused(minilm_engine) -> None:
    """The languages record is fixed when the collection's first batch is written; a later run with
    another ``--language`` (word pieces, which have no stemmer to refuse) was "up to date" and left
    the collection English, so the hybrid default the user asked for never applied."""
    from poolrag.stores.errors import CollectionMismatchError

    def encoder(language: str | None) -> BM25ChunkEncoder:
        languages = LanguageRecord.declared(("en",), language)
        return bm25_for_model(minilm_engine.tokenizer, "m@1", languages=languages)

    first = encoder("english")
    first.adopt(None, GERMAN)
    recorded = first.settings()
    for language in (None, "english"):  # undeclared, or declared as recorded
        again = encoder(language)
        again.adopt(recorded, GERMAN[:1])
        assert again.avg_doc_length == first.avg_doc_length
    with pytest.raises(CollectionMismatchError, match=r"recorded its language as en.*--language german"):
        encoder("german").adopt(recorded, GERMAN[:1])
    pending = {**recorded, "avg_doc_length": None}  # created, no batch written: nothing is fixed yet
    later = encoder("german")
    later.adopt(pending, GERMAN)
    assert later.settings()["languages"] == {"model": ["en"], "collection": "de"}
