"""Issue 13, item 1: SQLite damage found anywhere (open, read, write) sets the file aside and the
run goes on with a fresh cache; a cache that cannot be written is one clear error."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from poolrag.cache import EmbeddingCache
from poolrag.cache.recovery import CacheAccessError

DIM = 384
N = 3000


def _key(i: int) -> bytes:
    return i.to_bytes(4, "little") * 8


def _populated(path: Path) -> list[bytes]:
    rng = np.random.default_rng(0)
    keys = [_key(i) for i in range(N)]
    with EmbeddingCache(path) as cache:
        cache.put_many({k: rng.standard_normal(DIM).astype(np.float32) for k in keys})
    return keys


def _damage_middle_pages(path: Path, start: float = 0.25, stop: float = 0.75) -> None:
    """Overwrite the header of every page from ``start`` to ``stop`` of the file (data pages)."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        for offset in range(max(4096, int(size * start) // 4096 * 4096), int(size * stop), 4096):
            handle.seek(offset)
            handle.write(b"\xff" * 64)


def _set_aside(folder: Path) -> list[Path]:
    return sorted(folder.glob("embeddings.sqlite.corrupt-*"))


def test_damage_in_the_middle_of_the_file_is_set_aside_on_read(tmp_path: Path, caplog) -> None:
    path = tmp_path / "embeddings.sqlite"
    keys = _populated(path)
    assert not (tmp_path / "embeddings.sqlite-wal").exists()  # all of it is in the main file
    _damage_middle_pages(path)
    cache = EmbeddingCache(path)  # the header and schema are intact: opening succeeds
    with caplog.at_level(logging.WARNING, logger="poolrag.cache.sqlite_store"):
        found = cache.get_many(keys)
    assert found == {}  # a fresh cache: everything will be recomputed
    assert len(_set_aside(tmp_path)) == 1
    assert any("is damaged" in r.getMessage() and "moved to" in r.getMessage() for r in caplog.records)
    cache.put_many({keys[0]: np.ones(DIM, np.float32)})  # and the run goes on writing
    assert list(cache.get_many(keys[:2])) == [keys[0]] and len(cache) == 1
    cache.close()
    # the next run opens the fresh file without complaint
    assert len(EmbeddingCache(path)) == 1 and len(_set_aside(tmp_path)) == 1


def test_damage_found_by_a_write_is_set_aside_and_the_write_lands(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    keys = _populated(path)
    _damage_middle_pages(path)
    cache = EmbeddingCache(path, max_bytes=DIM * 4 * 10)  # the write evicts: it walks the whole table
    cache.put_many({keys[5]: np.full(DIM, 2.0, np.float32)})
    assert len(_set_aside(tmp_path)) == 1
    assert np.array_equal(cache.get_many([keys[5]])[keys[5]], np.full(DIM, 2.0, np.float32))


def test_ingest_recomputes_through_a_damaged_cache(tmp_path: Path, minilm_engine) -> None:
    from poolrag.cache import CachedEmbedder

    path = tmp_path / "embeddings.sqlite"
    _populated(path)
    texts = [f"sentence number {i} about bees and flowers" for i in range(40)]
    with EmbeddingCache(path) as cache:  # closed: its rows are in the main file, not the WAL
        CachedEmbedder(minilm_engine, cache).embed_documents(texts)
    _damage_middle_pages(path, start=0.25, stop=1.0)  # the 40 new rows are at the end of the table
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(path))
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (40, DIM) and embedder.misses == 40
    assert np.allclose(vectors, minilm_engine.embed_array(texts), atol=1e-5)


def test_a_cache_that_cannot_be_created_is_one_clear_error(tmp_path: Path) -> None:
    """The way out is named for the Python class that raised it as well as for the CLI."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(CacheAccessError, match=r"cannot use the embedding cache .*not-a-folder") as refused:
        EmbeddingCache(blocker / "embeddings.sqlite")
    assert str(refused.value).endswith(
        "use a file in a writable folder (--cache FILE; cache= in Python) "
        "or no cache (--no-cache; cache=None)"
    )
    with pytest.raises(CacheAccessError, match=r"not-a-folder is a file, not a folder"):  # was "File exists"
        EmbeddingCache(blocker / "deeper" / "embeddings.sqlite")
    folder_in_the_way = tmp_path / "embeddings.sqlite"
    folder_in_the_way.mkdir()
    with pytest.raises(CacheAccessError, match=r"embeddings\.sqlite: it is a folder"):  # "unable to open"
        EmbeddingCache(folder_in_the_way)


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux sysfs (not writable)")
def test_a_read_only_location_is_one_clear_error() -> None:
    with pytest.raises(CacheAccessError, match=r"/sys/poolrag-cache"):
        EmbeddingCache("/sys/poolrag-cache/embeddings.sqlite")
