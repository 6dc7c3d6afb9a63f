"""Word-analyzer term counts through the embedding cache: the 31-bit hashed ids come back exactly (float32
rows alone hold integers only below 2**24), under a namespace of their own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from poolrag.cache import EmbeddingCache
from poolrag.cache.term_counts import CachedTermCounter, term_counts_namespace
from poolrag.sparse import BM25Encoder, WordAnalyzer

TEXTS = ["Installing packages with apt-get", "Kernel panics at boot", "Installing packages with apt-get"]


def test_hashed_word_ids_round_trip_exactly_through_the_cache(tmp_path: Path) -> None:
    encoder = BM25Encoder(None, analyzer=WordAnalyzer())
    want = encoder.term_counts(TEXTS)
    assert max(t for counts in want for t in counts) >= 2**24  # wider than a float32 holds exactly

    cache = EmbeddingCache(tmp_path / "c.sqlite")
    first = CachedTermCounter(encoder, "model@abc", cache)
    assert first.term_counts(TEXTS) == want and first.misses == 2  # the repeated text counted once
    again = CachedTermCounter(BM25Encoder(None, analyzer=WordAnalyzer()), "model@abc", cache)
    assert again.term_counts(TEXTS) == want and (again.hits, again.misses) == (3, 0)

    # Another language is another namespace: nothing is read across.
    german = CachedTermCounter(BM25Encoder(None, analyzer=WordAnalyzer("german")), "model@abc", cache)
    german.term_counts(TEXTS[:1])
    assert german.misses == 1


def test_word_piece_namespace_is_unchanged_by_the_analyzer_field() -> None:
    # Caches filled before analyzers existed keep serving word-piece counts.
    before = {"v": 1, "kind": "bm25-term-counts", "tokenizer": "m@1", "drop_punctuation": True}
    assert (
        term_counts_namespace("m@1", True)
        == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).digest()
    )
    assert term_counts_namespace("m@1", True) != term_counts_namespace("m@1", True, WordAnalyzer().record())
