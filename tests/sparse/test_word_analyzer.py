"""The word analyzer: Unicode words, case folded, stop words out, Snowball stems, stable hashed ids;
its record is data (validated, never imported from) and BM25 over it scores like the formula."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from collections import Counter

import pytest

from poolrag.errors import InvalidInputError
from poolrag.sparse import BM25Encoder, WordAnalyzer
from poolrag.sparse.bm25 import query_encoder_for_record
from poolrag.sparse.words import LANGUAGES, recorded_analyzer, term_id


def test_words_are_case_folded_stop_words_dropped_and_stemmed() -> None:
    english = WordAnalyzer()
    assert english.terms("Installing the Packages; an installed package.") == ["instal", "packag"] * 2
    assert WordAnalyzer(stem=False).terms("Installing the Packages") == ["installing", "packages"]
    assert WordAnalyzer(stop_words=False, stem=False).terms("THE cat") == ["the", "cat"]
    # Unicode letters are word characters, and case folding is full folding (ß → ss).
    assert WordAnalyzer("german").terms("Die GRÖSSE der Größe") == ["gross", "gross"]
    assert WordAnalyzer("french").terms("Qu'est-ce que les paquets ?") == ["paquet"]


def test_term_ids_are_stable_across_processes_and_fit_int32() -> None:
    # Stored collections depend on these ids never changing: they are pinned here.
    assert term_id("debian") == 585318056
    assert term_id("instal") == 1667093801
    code = "from poolrag.sparse.words import term_id; print(term_id('debian'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == 585318056
    assert all(0 <= term_id(w) < 2**31 for w in ("a", "ä", "日本", "x" * 1000))


def test_term_counts_count_each_analysed_term() -> None:
    (counts,) = WordAnalyzer().term_counts(["cats and a cat, Cat!"])
    assert counts == {term_id("cat"): 3}


def test_a_language_outside_the_table_is_refused_in_one_line() -> None:
    with pytest.raises(InvalidInputError, match="unknown analyzer language 'klingon'; choose from") as info:
        WordAnalyzer("klingon")
    assert "\n" not in str(info.value) and "english" in str(info.value)
    assert {"english", "german", "french"} <= set(LANGUAGES)
    with pytest.raises(InvalidInputError, match="stem must be true or false"):
        WordAnalyzer(stem="yes")  # type: ignore[arg-type]


def test_records_round_trip_and_unknown_records_are_refused() -> None:
    analyzer = WordAnalyzer("french", stop_words=False)
    assert recorded_analyzer({"analyzer": analyzer.record()}) == analyzer
    # Collections written before analyzers were recorded hold word pieces.
    assert recorded_analyzer({"avg_doc_length": 5.0, "k1": 1.2, "b": 0.75}) is None
    assert recorded_analyzer(None) is None
    assert recorded_analyzer({"analyzer": {"name": "wordpiece"}}) is None
    with pytest.raises(InvalidInputError, match=r"BM25 analyzer 'os\.system'"):
        recorded_analyzer({"analyzer": {"name": "os.system"}})
    with pytest.raises(InvalidInputError, match="unknown analyzer language"):
        recorded_analyzer({"analyzer": {"name": "words", "language": "../../etc"}})
    with pytest.raises(InvalidInputError, match="stop_words must be true or false"):
        recorded_analyzer({"analyzer": {"name": "words", "stop_words": "no"}})


def test_chinese_and_japanese_runs_are_overlapping_bigrams_so_a_query_word_matches_inside_them() -> None:
    """A run of Han or kana has no spaces: as one term it never matched a query (パスワード, 15 times
    in a Japanese man page, found nothing). Bigrams, as Lucene's CJK analyzer makes, match it, and
    Hangul's too, whose particles join their nouns; a collection recorded before keeps its whole runs."""
    analyzer = WordAnalyzer()
    sentence = analyzer.terms("パスワードの有効期限を変更する")
    assert set(analyzer.terms("パスワード")) <= set(sentence)
    assert set(analyzer.terms("有効期限")) <= set(sentence)
    assert analyzer.terms("北") == ["北"]
    assert analyzer.terms("Installing Python3の使い方 한국어 단어") == [
        "instal",
        "python3",
        "の使",
        "使い",
        "い方",
        "한국",
        "국어",
        "단어",
    ]
    assert set(analyzer.terms("비밀번호")) <= set(analyzer.terms("비밀번호를 잊으셨나요"))
    assert WordAnalyzer(unicode_words=False).terms("한국어 단어") == ["한국어", "단어"]  # before: whole
    old_record = {"name": "words", "language": "english", "stop_words": True, "stem": True}
    old = recorded_analyzer({"analyzer": old_record})
    assert old is not None and not old.cjk_bigrams
    assert old.terms("パスワードの有効期限") == ["パスワードの有効期限"]


def test_queries_and_documents_are_analysed_alike() -> None:
    encoder = query_encoder_for_record({"analyzer": WordAnalyzer().record()}, None)
    assert encoder.analyzer == WordAnalyzer() and encoder.tokenizer is None
    (document,) = encoder.encode_documents(["Installing packages with apt."], avg_doc_length=3.0)
    (query,) = encoder.encode_queries(["How are packages installed?"])
    shared = set(document.indices.tolist()) & set(query.indices.tolist())
    assert shared == {term_id("packag"), term_id("instal")}
    assert encoder.analyzer_record() == {
        "name": "words",
        "language": "english",
        "stop_words": True,
        "stem": True,
        "cjk_bigrams": True,
        "unicode_words": True,
        "drop_vowel_marks": True,
    }


def test_bm25_over_words_is_the_formula() -> None:
    texts = ["the cat sat", "cats chase cats", "a dog"]
    encoder = BM25Encoder(None, analyzer=WordAnalyzer())
    counts = encoder.term_counts(texts)
    assert counts[1] == dict(Counter([term_id("cat"), term_id("chase"), term_id("cat")]))
    avgdl = sum(sum(c.values()) for c in counts) / 3
    vectors = encoder.document_vectors(counts, avgdl)
    k1, b = 1.2, 0.75
    tf_half = 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / avgdl))
    assert vectors[1].to_dict()[term_id("cat")] == pytest.approx(tf_half, rel=1e-6)


def test_word_pieces_need_a_tokenizer() -> None:
    with pytest.raises(InvalidInputError, match="needs a tokenizer"):
        BM25Encoder(None)
    with pytest.raises(InvalidInputError, match="word pieces"):
        query_encoder_for_record({"k1": 1.2}, None)


@pytest.mark.parametrize(
    ("query", "document"),
    [
        ("हिन्दी", "हिन्दी में संयुक्त अक्षर होते हैं"),  # vowel signs and the virama are marks
        ("مُحَمَّد", "قال مُحَمَّد ذلك"),  # harakat
        ("café", unicodedata.normalize("NFD", "Un café noir")),  # a decomposed accent
        ("information", "more infor\u00admation here"),  # a soft hyphen
        ("istanbul", "İSTANBUL büyük bir şehirdir"),  # the dotted capital I
        ("hello", "ｈｅｌｌｏ world"),  # full-width letters
        ("ภาษาไทย", "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่าง"),  # Thai, written without spaces
    ],
)
def test_a_query_word_matches_its_document_whatever_its_marks_and_forms(query: str, document: str) -> None:
    """``\\w`` has no combining marks, so each ended a word: हिन्दी was the terms ह, न, द and matched
    any word with those consonants; a decomposed café was ``cafe``; İ lowered to i plus a dot mark;
    a Thai phrase was cut at each vowel mark. A collection recorded before keeps that split."""
    analyzer = WordAnalyzer(stem=False, stop_words=False)
    assert set(analyzer.terms(query)) <= set(analyzer.terms(document))
    recorded_before = {k: v for k, v in analyzer.record().items() if k != "unicode_words"}
    old = recorded_analyzer({"analyzer": recorded_before})
    assert old is not None and not old.unicode_words


def test_marks_no_longer_make_words_of_single_letters() -> None:
    analyzer = WordAnalyzer()
    assert analyzer.terms("हिन्दी में") == ["हिन्दी", "में"]
    assert WordAnalyzer(unicode_words=False).terms("हिन्दी में") == ["ह", "न", "द", "म"]  # the old split
