"""BM25 term counts through the embedding cache: a text counted once is never tokenized again.

What is cached is each text's term counts, not its BM25 weights: counts depend only on the text
and the tokenizer, while the weights also depend on the collection's average chunk length, which
differs between collections. Counts ride in the same SQLite file as the vectors (a float32 row
``[id, count, id, count, ...]``, exact for ids and counts below 2**24) under a namespace of their
own, so they can never be mistaken for an embedding. The word analyzer's ids are 31-bit hashes, too
wide for that, so its rows hold ``[high 16 bits, low 16 bits, count]`` triples instead, under a
namespace that names the analyzer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from poolrag.cache.keys import text_key
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.sparse.bm25 import BM25Encoder

_FORMAT = 1
_EXACT_LIMIT = 1 << 24  # float32 holds every integer below this exactly


def term_counts_namespace(
    tokenizer_identity: str, drop_punctuation: bool, analyzer: dict[str, object] | None = None
) -> bytes:
    """Everything besides the text that decides a text's term counts (``analyzer``: a word analyzer's
    record; ``None`` for word pieces, whose namespace stays what it was before analyzers existed)."""
    description: dict[str, object]
    if analyzer is None:
        description = {
            "v": _FORMAT,
            "kind": "bm25-term-counts",
            "tokenizer": tokenizer_identity,
            "drop_punctuation": drop_punctuation,
        }
    else:
        description = {"v": _FORMAT, "kind": "bm25-word-term-counts", "analyzer": analyzer}
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).digest()


class CachedTermCounter:
    """:meth:`BM25Encoder.term_counts` that remembers its answers in an :class:`EmbeddingCache`.

    Args:
        encoder: the BM25 encoder over the model's tokenizer.
        tokenizer_identity: names the tokenizer (the model identity serves: same weights, same files).
        cache: where counts persist; ``None`` counts every time.
    """

    def __init__(
        self, encoder: BM25Encoder, tokenizer_identity: str, cache: EmbeddingCache | None = None
    ) -> None:
        self.encoder = encoder
        self.cache = cache
        words = encoder.analyzer.record() if encoder.analyzer is not None else None
        self.namespace = term_counts_namespace(tokenizer_identity, encoder.drop_punctuation, words)
        self.wide = words is not None  # hashed word ids: rows of (high, low, count) triples
        self.hits = 0
        self.misses = 0

    def term_counts(self, texts: Sequence[str]) -> list[dict[int, int]]:
        """Each text's token id → count, from the cache where present."""
        texts = list(texts)
        if self.cache is None:
            self.misses += len(texts)
            return self.encoder.term_counts(texts)
        keys = [text_key(self.namespace, text) for text in texts]
        found = self.cache.get_many(keys)
        # a text repeated in the batch is counted once
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        computed = self.encoder.term_counts(list(missing.values())) if missing else []
        fresh = dict(zip(missing, computed, strict=True))
        narrow = (_fits, _to_row, _from_row)
        fits, to_row, read = (_fits_wide, _to_wide_row, _from_wide_row) if self.wide else narrow
        self.cache.put_many({key: to_row(c) for key, c in fresh.items() if fits(c)})
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return [fresh[key] if key in fresh else read(found[key]) for key in keys]


def _fits(counts: dict[int, int]) -> bool:
    return all(t < _EXACT_LIMIT and n < _EXACT_LIMIT for t, n in counts.items())


def _to_row(counts: dict[int, int]) -> np.ndarray:
    return np.asarray([v for pair in sorted(counts.items()) for v in pair], dtype=np.float32)


def _from_row(row: np.ndarray) -> dict[int, int]:
    values = row.astype(np.int64).tolist()
    return dict(zip(values[0::2], values[1::2], strict=True))


def _fits_wide(counts: dict[int, int]) -> bool:
    return all(0 <= t < 1 << 32 and n < _EXACT_LIMIT for t, n in counts.items())


def _to_wide_row(counts: dict[int, int]) -> np.ndarray:
    triples = [(t >> 16, t & 0xFFFF, n) for t, n in sorted(counts.items())]
    return np.asarray([v for triple in triples for v in triple], dtype=np.float32)


def _from_wide_row(row: np.ndarray) -> dict[int, int]:
    values = row.astype(np.int64).tolist()
    return {
        (high << 16) | low: n for high, low, n in zip(values[0::3], values[1::3], values[2::3], strict=True)
    }
