"""Lexical BM25 as sparse vectors, from any Hugging Face tokenizer — hybrid search with no second model.

Dense vectors miss exact terms (part numbers, names, codes); BM25 catches them. Written as sparse
vectors over the tokenizer's vocabulary, BM25 fits the stores' native sparse search:

    BM25(q, d) = Σ_{t ∈ q} IDF(t) · tf(t, d) · (k1 + 1) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    IDF(t)     = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))

The sum splits into a document vector holding only the saturated, length-normalised term
frequency (the fraction) and a query vector holding IDF(t) for each query term, so a store's
inner product *is* BM25. IDF goes on the query side on purpose: it changes with every document
added, and on the query side no stored vector has to be rewritten when it does. Where the IDF
comes from:

- every poolrag store applies it itself (Qdrant's ``Modifier.IDF``; Milvus and the in-memory store
  from the statistics they keep), so queries sent through poolrag carry unit weights
  (``encode_queries(texts)``) — passing statistics there as well would apply IDF twice;
- a store searched outside poolrag, with no IDF of its own, needs the weights in the query, from
  :class:`BM25Stats` (``encode_queries(texts, stats)``).

Terms are the tokenizer's ids: special tokens (``[CLS]``, ``[UNK]``, padding...) never count,
punctuation-only tokens are dropped by default (a comma matching a comma is no evidence of
relevance), and case follows the tokenizer (uncased models lowercase in their normaliser).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.sparse.words import WORDPIECE, WordAnalyzer, recorded_analyzer
from poolrag.tokenization.tokenizer_lock import call_tokenizer

if TYPE_CHECKING:  # transformers loads when a tokenizer is made, not when the CLI parses its flags
    from transformers import PreTrainedTokenizerBase

TermCounts = Mapping[int, int]
"""One document's token id → number of occurrences (after special and punctuation tokens go)."""

_STATS_FORMAT = 1
#: Where a collection records its BM25 settings (``CollectionSpec.model_options``).
BM25_RECORD_KEY = "bm25"


@dataclass(frozen=True)
class BM25Parameters:
    """``k1`` bounds what repeating a term can add; ``b`` is how much long documents are discounted.

    The defaults are Lucene's and Qdrant's (Robertson's 1.2 and 0.75).
    """

    k1: float = 1.2
    b: float = 0.75

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise InvalidInputError(f"BM25 k1 must be a finite number >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise InvalidInputError(f"BM25 b must be in [0, 1], got {self.b}")


@dataclass(frozen=True)
class BM25Stats:
    """Corpus statistics for IDF and the average length: what ingest keeps where the store cannot.

    Counts only, so statistics of separately ingested batches add up exactly (:meth:`merged`) and
    a re-ingested document's old counts can be taken out again (:meth:`without`).
    """

    document_count: int = 0
    total_length: int = 0
    document_frequency: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.document_count < 0 or self.total_length < 0:
            raise InvalidInputError("BM25 statistics cannot hold negative counts")
        for token_id, frequency in self.document_frequency.items():
            if token_id < 0 or not 0 < frequency <= self.document_count:
                raise InvalidInputError(
                    f"token {token_id} is in {frequency} documents of {self.document_count}; "
                    "BM25 statistics are inconsistent"
                )

    @classmethod
    def from_term_counts(cls, documents: Iterable[TermCounts]) -> BM25Stats:
        """Statistics of a batch of documents, as returned by :meth:`BM25Encoder.term_counts`."""
        frequency: Counter[int] = Counter()
        count = length = 0
        for counts in documents:
            count += 1
            length += sum(counts.values())
            frequency.update(token_id for token_id, n in counts.items() if n > 0)
        return cls(count, length, dict(frequency))

    @property
    def avg_doc_length(self) -> float:
        """Mean document length in terms; 0 before any document."""
        return self.total_length / self.document_count if self.document_count else 0.0

    def idf(self, token_id: int) -> float:
        """Lucene's (and Qdrant's) non-negative IDF; a term in no document gets the largest value."""
        n = self.document_frequency.get(token_id, 0)
        return math.log(1.0 + (self.document_count - n + 0.5) / (n + 0.5))

    def merged(self, other: BM25Stats) -> BM25Stats:
        """Statistics of both corpora together (disjoint sets of documents)."""
        frequency = Counter(self.document_frequency)
        frequency.update(other.document_frequency)
        count = self.document_count + other.document_count
        return BM25Stats(count, self.total_length + other.total_length, dict(frequency))

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _STATS_FORMAT,
                "document_count": self.document_count,
                "total_length": self.total_length,
                "document_frequency": {str(k): v for k, v in sorted(self.document_frequency.items())},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> BM25Stats:
        try:
            data: Any = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != _STATS_FORMAT:
                raise ValueError(f"expected a JSON object with format {_STATS_FORMAT}")
            frequency = {int(k): _count(v) for k, v in dict(data["document_frequency"]).items()}
            return cls(_count(data["document_count"]), _count(data["total_length"]), frequency)
        except (ValueError, TypeError, KeyError) as error:
            raise InvalidInputError(f"not valid BM25 statistics: {error}") from None


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer count, got {value!r}")
    return value


def _is_punctuation_or_blank(token_text: str) -> bool:
    text = token_text.strip().removeprefix("##").strip()
    if "\ufffd" in text:
        return False  # a byte-level piece of a longer character (CJK, emoji), not a symbol
    return all(unicodedata.category(char)[0] in "PSZ" for char in text)


class BM25Encoder:
    """Turns texts into BM25 document and query vectors over a tokenizer's vocabulary, or over the
    words of a :class:`~poolrag.sparse.words.WordAnalyzer` when one is given (then no tokenizer is
    needed)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase | None,
        parameters: BM25Parameters | None = None,
        *,
        drop_punctuation: bool = True,
        analyzer: WordAnalyzer | None = None,
    ) -> None:
        if tokenizer is None and analyzer is None:
            raise InvalidInputError("BM25 needs a tokenizer (word pieces) or a WordAnalyzer")
        self.tokenizer = tokenizer
        self.analyzer = analyzer
        self.parameters = parameters or BM25Parameters()
        self.drop_punctuation = drop_punctuation
        self._special_ids = frozenset(tokenizer.all_special_ids) if tokenizer is not None else frozenset()
        self._dropped: dict[int, bool] = {}  # token id → dropped, filled as tokens are first seen

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path,
        revision: str | None = None,
        *,
        download_dir: str | None = None,
        hf_token: str | bool | None = None,
        **kwargs: Any,
    ) -> BM25Encoder:
        """The tokenizer of a model folder (or hub id), found as ``Engine`` finds it: a hub id
        resolves to the installed copy when the hub is out of reach, and a sentence-transformers
        folder's tokenizer is its Transformer module's. BM25 needs nothing else from the model, so
        only tokenizer files are fetched and the model need not be one poolrag runs."""
        from transformers import AutoTokenizer

        from poolrag.config.resolve import resolve_tokenizer_folder

        folder = resolve_tokenizer_folder(model, revision, download_dir=download_dir, hf_token=hf_token)
        return cls(AutoTokenizer.from_pretrained(folder, trust_remote_code=False), **kwargs)  # data: no code

    def analyzer_record(self) -> dict[str, Any]:
        """How this encoder splits text into terms, as a collection records it."""
        return self.analyzer.record() if self.analyzer is not None else {"name": WORDPIECE}

    def _keeps(self, token_id: int) -> bool:
        dropped = self._dropped.get(token_id)
        if dropped is None:
            assert self.tokenizer is not None
            dropped = token_id in self._special_ids or (
                self.drop_punctuation and _is_punctuation_or_blank(self.tokenizer.decode([token_id]))
            )
            self._dropped[token_id] = dropped
        return not dropped

    def term_counts(self, texts: Sequence[str]) -> list[dict[int, int]]:
        """Each text's term counts. The whole text counts: lexical matching has no length limit."""
        for text in texts:
            if not isinstance(text, str):
                raise InputTypeError(f"BM25 encodes text, got {type(text).__name__}")
        if not texts:
            return []
        if self.analyzer is not None:
            return self.analyzer.term_counts(texts)
        return [dict(Counter(t for t in ids if self._keeps(t))) for ids in self._word_pieces(texts)]

    def _word_pieces(self, texts: Sequence[str]) -> list[list[int]]:
        assert self.tokenizer is not None
        # verbose=False: texts longer than the model's window are expected here, not a mistake.
        return call_tokenizer(
            self.tokenizer,
            list(texts),
            add_special_tokens=False,
            verbose=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]

    def unknown_share(self, texts: Sequence[str]) -> float:
        """The share of ``texts``' word pieces that are the tokenizer's unknown token, which counts as
        no term: text in a script the vocabulary lacks (Thai, most Han characters and emoji for an
        English BERT) is invisible to BM25 over word pieces. 0 for the word analyzer."""
        unknown = getattr(self.tokenizer, "unk_token_id", None)
        if self.analyzer is not None or unknown is None or not texts:
            return 0.0
        encoded = self._word_pieces(texts)
        total = sum(len(ids) for ids in encoded)
        return sum(ids.count(unknown) for ids in encoded) / total if total else 0.0

    def document_vectors(self, counts: Sequence[TermCounts], avg_doc_length: float) -> list[SparseVector]:
        """The term-frequency half of BM25 for each document (IDF belongs to the query side).

        ``avg_doc_length`` is the corpus' mean length in terms, usually ``stats.avg_doc_length`` of
        the statistics that already include these documents.
        """
        k1, b = self.parameters.k1, self.parameters.b
        if not (math.isfinite(avg_doc_length) and avg_doc_length >= 0):
            raise InvalidInputError(f"the average document length must be finite and >= 0: {avg_doc_length}")
        vectors = []
        for doc in counts:
            length = sum(doc.values())
            if not length:
                vectors.append(SparseVector.empty())
                continue
            if avg_doc_length == 0 and b > 0:
                raise InvalidInputError("a non-empty document needs an average document length > 0")
            norm = k1 * (1.0 - b + (b * length / avg_doc_length if b > 0 else 0.0))
            vectors.append(SparseVector.from_dict({t: n * (k1 + 1.0) / (n + norm) for t, n in doc.items()}))
        return vectors

    def encode_documents(self, texts: Sequence[str], avg_doc_length: float) -> list[SparseVector]:
        return self.document_vectors(self.term_counts(texts), avg_doc_length)

    def encode_queries(self, texts: Sequence[str], stats: BM25Stats | None = None) -> list[SparseVector]:
        """Each query term once (BM25 sums over distinct query terms), weighted by its IDF from
        ``stats``, or 1 when the store applies IDF itself (every poolrag store does)."""
        vectors = []
        for counts in self.term_counts(texts):
            weights = {t: (stats.idf(t) if stats is not None else 1.0) for t in counts}
            vectors.append(SparseVector.from_dict(weights))
        return vectors


def query_encoder_for_record(record: object, tokenizer: PreTrainedTokenizerBase | None) -> BM25Encoder:
    """The query side of a ``bm25`` collection, analysing text as its documents were analysed.

    ``record`` is the collection's BM25 record (``model_options["bm25"]``): word pieces need the
    model's ``tokenizer``; the word analyzer needs none.
    """
    analyzer = recorded_analyzer(record)
    if analyzer is None and tokenizer is None:
        raise InvalidInputError(
            "the collection's BM25 terms are the model's word pieces: its tokenizer is needed"
        )
    return BM25Encoder(tokenizer if analyzer is None else None, analyzer=analyzer)
