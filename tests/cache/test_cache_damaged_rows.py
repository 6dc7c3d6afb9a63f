"""Issue 47 item 4: a cache row that is not a vector this cache wrote, whatever is wrong with it,
is dropped and recomputed. SQLite keeps any type in any column, so a row edited or pasted in by
hand can hold an integer where the vector's bytes belong (that stopped an ingest with a
``TypeError``), text, a size that is not an integer, or no checksum at all."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache

DIM = 384
TEXTS = [f"sentence {i} about hives, bees and the flowers they visit" for i in range(6)]

#: (column, value): what a damaged row holds instead of what the cache wrote
DAMAGE = {
    "integer vector": ("data", 12345),
    "text vector": ("data", "not a vector"),
    "real vector": ("data", 1.5),
    "text size": ("dim", "three hundred"),  # "384" would be stored as the integer (column affinity)
    "real size": ("dim", 384.5),
    "negative size": ("dim", -1),
    "integer checksum": ("checksum", 7),
    "missing checksum": ("checksum", b""),
}


def _damage(path: Path, column: str, value: object) -> None:
    with sqlite3.connect(path) as conn:  # every row: each text's vector is damaged the same way
        conn.execute(f"UPDATE vectors SET {column} = ?", (value,))


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_row_is_dropped_and_recomputed(tmp_path: Path, minilm_engine, damage: str) -> None:
    path = tmp_path / "embeddings.sqlite"
    with EmbeddingCache(path) as cache:
        expected = CachedEmbedder(minilm_engine, cache).embed_documents(TEXTS)
        assert len(cache) == len(TEXTS)
    _damage(path, *DAMAGE[damage])

    with EmbeddingCache(path) as cache:
        embedder = CachedEmbedder(minilm_engine, cache)
        vectors = embedder.embed_documents(TEXTS)
        assert embedder.misses == len(TEXTS) and cache.stats.corrupt == len(TEXTS)
        np.testing.assert_allclose(vectors, expected, atol=1e-6)
        assert vectors.shape == (len(TEXTS), DIM)
    with EmbeddingCache(path) as cache:  # the recomputed rows replaced the damaged ones
        again = CachedEmbedder(minilm_engine, cache)
        np.testing.assert_array_equal(again.embed_documents(TEXTS), vectors)
        assert again.misses == 0 and cache.stats.corrupt == 0


def test_a_damaged_row_is_deleted_on_read(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    keys = [bytes([i]) * 32 for i in range(3)]
    with EmbeddingCache(path) as cache:
        cache.put_many({k: np.full(DIM, float(i), np.float32) for i, k in enumerate(keys)})
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE vectors SET data = 99 WHERE key = ?", (keys[1],))
    with EmbeddingCache(path) as cache:
        found = cache.get_many(keys)
        assert sorted(found) == sorted([keys[0], keys[2]])
        np.testing.assert_array_equal(found[keys[2]], np.full(DIM, 2.0, np.float32))
        assert len(cache) == 2 and cache.nbytes == 2 * DIM * 4  # the totals follow the deletion
