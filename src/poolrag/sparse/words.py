"""A search engine's word analyzer for BM25: Unicode words, lower-cased, stop words out, stemmed.

BM25 over a model's word pieces splits rare words into fragments that match unrelated words
(``##ing``) and keeps every function word; search engines (Lucene, Elasticsearch, Tantivy) count
whole words instead, fold case, drop the commonest function words and reduce each word to its stem,
so "installing" finds "installed". On the real FAQ sets in benchmarks/RESULTS.md BM25 alone scores
higher over words than over word pieces on three sets of five (Debian FAQ en/de/fr), equal on
perlfaq and lower on chit-chat; fused with dense retrieval, word pieces did as well or better, so
they stay the default and words are ``--analyzer words``.

A term's id is a stable hash of the analysed term (31 bits of BLAKE2b), so no vocabulary has to be
stored or shared: a document analysed today and a query analysed next year land on the same ids.

The language picks a Snowball stemmer (the ``snowballstemmer`` package, which Sphinx uses) and a
stop-word list, both from the fixed table :data:`LANGUAGES`: a language read from a collection's
record is a key into that table, never a name handed to an import.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from poolrag.errors import InputTypeError, InvalidInputError

#: The analyzer names a collection can record; ``wordpiece`` is the model tokenizer's pieces.
WORDS, WORDPIECE = "words", "wordpiece"
ANALYZERS: tuple[str, ...] = (WORDS, WORDPIECE)

_ENGLISH_STOP = [
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "but",
    "by",
    "for",
    "if",
    "in",
    "into",
    "is",
    "it",
    "no",
    "not",
    "of",
    "on",
    "or",
    "such",
    "that",
    "the",
    "their",
    "then",
    "there",
    "these",
    "they",
    "this",
    "to",
    "was",
    "will",
    "with",
]
_GERMAN_STOP = [
    "aber",
    "als",
    "am",
    "an",
    "auch",
    "auf",
    "aus",
    "bei",
    "bin",
    "bis",
    "bist",
    "da",
    "dann",
    "das",
    "dass",
    "dem",
    "den",
    "der",
    "des",
    "die",
    "dies",
    "diese",
    "dieser",
    "dieses",
    "du",
    "durch",
    "ein",
    "eine",
    "einem",
    "einen",
    "einer",
    "eines",
    "er",
    "es",
    "für",
    "hat",
    "hatte",
    "ich",
    "ihr",
    "im",
    "in",
    "ist",
    "ja",
    "kann",
    "mit",
    "nach",
    "nicht",
    "noch",
    "nur",
    "ob",
    "oder",
    "sich",
    "sie",
    "sind",
    "so",
    "um",
    "und",
    "uns",
    "von",
    "vor",
    "war",
    "was",
    "wie",
    "wir",
    "wird",
    "zu",
    "zum",
    "zur",
    "über",
]
_FRENCH_STOP = [
    "a",
    "au",
    "aux",
    "avec",
    "ce",
    "ces",
    "cette",
    "d",
    "dans",
    "de",
    "des",
    "du",
    "elle",
    "en",
    "est",
    "et",
    "il",
    "ils",
    "je",
    "l",
    "la",
    "le",
    "les",
    "leur",
    "lui",
    "mais",
    "me",
    "même",
    "mon",
    "ne",
    "ni",
    "nous",
    "on",
    "ou",
    "par",
    "pas",
    "pour",
    "qu",
    "que",
    "qui",
    "s",
    "sa",
    "se",
    "ses",
    "si",
    "son",
    "sont",
    "sur",
    "ta",
    "te",
    "tes",
    "toi",
    "ton",
    "tu",
    "un",
    "une",
    "vos",
    "votre",
    "vous",
    "y",
    "à",
    "été",
    "être",
]


@dataclass(frozen=True)
class Language:
    """A Snowball stemmer name and the stop words dropped before stemming (empty: none dropped)."""

    stemmer: str
    stop_words: frozenset[str] = field(default_factory=frozenset)


#: Every language the analyzer knows; Snowball has stemmers for each, stop-word lists for three.
LANGUAGES: Mapping[str, Language] = {
    "english": Language("english", frozenset(_ENGLISH_STOP)),
    "german": Language("german", frozenset(_GERMAN_STOP)),
    "french": Language("french", frozenset(_FRENCH_STOP)),
    **{
        name: Language(name)
        for name in [
            "danish",
            "dutch",
            "finnish",
            "hungarian",
            "italian",
            "norwegian",
            "portuguese",
            "romanian",
            "russian",
            "spanish",
            "swedish",
            "turkish",
        ]
    },
}
DEFAULT_LANGUAGE = "english"
#: The analyzer of new BM25 collections (``poolrag ingest --hybrid``, ``poolrag eval``): word pieces,
#: with which the default hybrid did best on the real sets it was chosen on (benchmarks/RESULTS.md).
DEFAULT_ANALYZER = WORDPIECE

_WORD = re.compile(r"\w+")
#: Han, kana (full- and half-width): scripts written without spaces, where a run of ``\w`` is a
#: whole sentence, never a term a query repeats.
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD_OR_CJK_RUN = re.compile(f"[{_CJK}]+|[^\\W{_CJK}]+")
_ID_MASK = 0x7FFFFFFF  # sparse ids are non-negative int32
#: Thai, Lao, Myanmar and Khmer: written without spaces between words too; their runs split into
#: bigrams like Han and kana where words keep their marks (one term per phrase matched nothing).
#: Hangul with them: spaced, but a particle joins its noun (``비밀번호를``), so the whole word missed
#: a query for the noun; Lucene's and Elasticsearch's CJK analyzers bigram it too.
_HANGUL = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"
_UNSPACED = f"{_CJK}{_HANGUL}\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")
#: Invisible characters inside words (a soft hyphen, zero-width joiners, bidi marks, the word joiner,
#: a BOM, variation selectors): deleted, as Unicode's NFKC_Casefold does, so ``infor\xadmation`` is
#: ``information``. A zero-width space separates words, so it stays a break.
_IGNORABLE = dict.fromkeys(
    [
        0xAD,
        *range(0x200C, 0x2010),
        *range(0x2060, 0x2065),
        0xFEFF,
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


#: Arabic harakat (fathatan to sukun) and tatweel, as Lucene's Arabic normaliser deletes them, and
#: Hebrew points and cantillation, as ICU folding does: optional vowel marks that dictionaries, the
#: Quran and children's books write and hardly any query types, so ``كِتَابٌ`` is ``كتاب``.
_VOWEL_MARKS = dict.fromkeys(
    [
        *range(0x064B, 0x0653),
        0x0640,
        *(c for c in range(0x0591, 0x05C8) if unicodedata.category(chr(c)) == "Mn"),
    ]
)


@functools.cache
def _words_with_marks() -> re.Pattern[str]:
    """Unspaced runs, and words that keep their combining marks: ``re``'s ``\\w`` has no marks
    (Hindi's vowel signs, Arabic's harakat), so each mark ended a word. Built once from this
    Python's Unicode tables (every mark lies below U+20000)."""
    ranges: list[list[int]] = []
    for code in (c for c in range(0x20000) if unicodedata.category(chr(c))[0] == "M"):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    marks = "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges)
    return re.compile(f"[{_UNSPACED}]+|[^\\W{_UNSPACED}](?:[^\\W{_UNSPACED}]|[{marks}])*+")


def _unicode_folded(text: str) -> str:
    """``text`` in NFKC (a decomposed accent composed, full-width letters and half-width kana folded,
    as ICU's and Lucene's CJK width filters do) without invisible characters, and the dotted
    capital ``İ`` lowered to ``i`` as Lucene lowers it (``casefold`` gives ``i`` plus a dot mark)."""
    return unicodedata.normalize("NFKC", text.translate(_IGNORABLE)).replace("\u0130", "i")


def term_id(term: str) -> int:
    """The sparse id of an analysed term: the same on every machine and in every run."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & _ID_MASK


@dataclass(frozen=True)
class WordAnalyzer:
    """Unicode word split → case folding → stop words out → Snowball stem → hashed id.

    Args:
        language: a key of :data:`LANGUAGES`.
        stop_words: drop the language's stop words (IDF already discounts common words; dropping the
            commonest ones also keeps them from matching in every document).
        stem: reduce words to their stem.
        cjk_bigrams: split Chinese and Japanese runs into overlapping two-character terms, as
            Lucene's CJK analyzer does (``パスワード`` → ``パス``, ``スワ``, ``ワー``, ``ード``), so a
            query's words match inside a sentence; ``False`` keeps each run one term, which is how
            collections written before it split them (their record says so).
        unicode_words: words keep their combining marks (``हिन्दी`` is one word, not ``ह``, ``न``,
            ``द``), text is compared in NFKC without invisible characters (a decomposed ``café``
            is ``café``), ``İ`` lowers to ``i``, and Thai, Lao, Myanmar and Khmer runs become
            bigrams (with ``cjk_bigrams``), as does Hangul, whose particles join their nouns: as
            Unicode's word rules, search engines' normalisers and CJK analyzers make them;
            ``False``: each mark ended a word and Hangul words stayed whole, as in collections
            recorded before it (their record says so).
        drop_vowel_marks: delete Arabic harakat and tatweel and Hebrew points, so a query typed
            without them finds text written with them; ``False``: they kept words apart, as in
            collections recorded before it (their record says so).
    """

    language: str = DEFAULT_LANGUAGE
    stop_words: bool = True
    stem: bool = True
    cjk_bigrams: bool = True
    unicode_words: bool = True
    drop_vowel_marks: bool = True

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise InvalidInputError(
                f"unknown analyzer language {self.language!r}; choose from {', '.join(sorted(LANGUAGES))}"
            )
        for name in ("stop_words", "stem", "cjk_bigrams", "unicode_words", "drop_vowel_marks"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(f"the word analyzer's {name} must be true or false")

    def terms(self, text: str) -> list[str]:
        """The analysed terms of ``text``, repeats kept: its words in order, then its CJK bigrams."""
        if not isinstance(text, str):
            raise InputTypeError(f"BM25 analyses text, got {type(text).__name__}")
        if self.unicode_words:
            text = _unicode_folded(text)
        if self.drop_vowel_marks:  # after NFKC, which splits presentation forms into letter and mark
            text = text.translate(_VOWEL_MARKS)
        if not self.cjk_bigrams:
            return self._words((_words_with_marks() if self.unicode_words else _WORD).findall(text))
        words: list[str] = []
        bigrams: list[str] = []
        split, run = (
            (_words_with_marks(), _UNSPACED_RUN) if self.unicode_words else (_WORD_OR_CJK_RUN, _CJK_RUN)
        )
        for piece in split.findall(text):
            if run.fullmatch(piece):
                bigrams.extend(
                    [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]
                )
            else:
                words.append(piece)
        return self._words(words) + bigrams

    def _words(self, found: list[str]) -> list[str]:
        language = LANGUAGES[self.language]
        words = [w.casefold() for w in found]
        if self.stop_words:
            words = [w for w in words if w not in language.stop_words]
        if self.stem and words:
            words = _stemmer(language.stemmer).stemWords(words)
        return words

    def term_counts(self, texts: Sequence[str]) -> list[dict[int, int]]:
        """Each text's term id → occurrences."""
        return [dict(Counter(term_id(t) for t in self.terms(text))) for text in texts]

    def record(self) -> dict[str, Any]:
        """What a collection records so that its queries are analysed the same way: every field."""
        return {"name": WORDS, **asdict(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> WordAnalyzer:
        """The analyzer a collection recorded (data: every field validated, nothing imported)."""
        if record.get("name") != WORDS:
            raise InvalidInputError(f"not a word analyzer record: {dict(record)!r}")
        language = record.get("language", DEFAULT_LANGUAGE)
        return cls(
            language if isinstance(language, str) else repr(language),
            record.get("stop_words", True),
            record.get("stem", True),
            record.get("cjk_bigrams", False),  # recorded before bigrams: its runs were whole terms
            record.get("unicode_words", False),  # recorded before: each mark ended a word
            record.get("drop_vowel_marks", False),  # recorded before: harakat kept words apart
        )


_STEMMERS = threading.local()  # a Snowball stemmer keeps state while it stems: one per thread


def _stemmer(name: str) -> Any:
    """This thread's Snowball stemmer for ``name``, made on first use."""
    made: dict[str, Any] = _STEMMERS.__dict__.setdefault("by_name", {})
    stemmer = made.get(name)
    if stemmer is None:
        try:
            import snowballstemmer
        except ImportError:  # pragma: no cover - a dependency of poolrag; only a broken install lacks it
            raise InvalidInputError(
                "the word analyzer's stemmer needs the snowballstemmer package: pip install snowballstemmer"
            ) from None
        stemmer = made[name] = snowballstemmer.stemmer(name)
    return stemmer


def recorded_analyzer(record: object) -> WordAnalyzer | None:
    """The analyzer named by a collection's BM25 record (its ``"analyzer"`` entry): ``None`` for word
    pieces, which is also what every collection written before analyzers were recorded used. The
    record is data: a name outside :data:`ANALYZERS` or a language outside :data:`LANGUAGES` is refused."""
    entry = record.get("analyzer") if isinstance(record, Mapping) else None
    if entry is None:
        return None
    name = entry.get("name") if isinstance(entry, Mapping) else entry
    if name == WORDPIECE:
        return None
    if name != WORDS or not isinstance(entry, Mapping):
        raise InvalidInputError(
            f"the collection records BM25 analyzer {name!r}, which this poolrag does not know "
            f"(known: {', '.join(ANALYZERS)})"
        )
    return WordAnalyzer.from_record(entry)


def analyzer_name(analyzer: WordAnalyzer | None) -> str:
    """``"words (english)"`` or ``"wordpiece"``, for messages."""
    if analyzer is None:
        return WORDPIECE
    notes = [
        *([] if analyzer.cjk_bigrams else ["CJK runs whole"]),
        *([] if analyzer.unicode_words else ["marks end words"]),
        *([] if analyzer.drop_vowel_marks else ["vowel marks kept"]),
    ]
    return f"{WORDS} ({', '.join([analyzer.language, *notes])})"
