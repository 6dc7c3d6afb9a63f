"""A Qdrant local-mode store written from several threads at once (the async adapters write from
worker threads) stores every point: the client under it is not thread-safe."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from poolrag.stores import ChunkRecord, CollectionSpec, open_store

WIDTH = 8
THREADS = 8
BATCHES = 12
BATCH = 5


def _batch(thread: int, batch: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(thread * 1000 + batch)
    return [
        ChunkRecord(
            f"{thread:08x}{batch:08x}{i:016x}",
            rng.standard_normal(WIDTH).astype(np.float32),
            {"text": f"chunk {i} of batch {batch}", "source": f"{thread}.txt"},
        )
        for i in range(BATCH)
    ]


def test_concurrent_writes_and_searches_lose_no_point(tmp_path: Path) -> None:
    store = open_store("qdrant", "c", path=str(tmp_path / "q"))
    store.ensure_collection(
        CollectionSpec(name="c", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH)
    )
    query = np.ones(WIDTH, dtype=np.float32)

    def write(thread: int) -> None:
        for batch in range(BATCHES):
            store.upsert(_batch(thread, batch))
            store.search(query, 3)  # reads meanwhile, as a retriever's queries do

    with ThreadPoolExecutor(THREADS) as pool:
        for done in [pool.submit(write, thread) for thread in range(THREADS)]:
            done.result()  # raised sqlite3 'cannot start a transaction within a transaction'
    assert store.count() == THREADS * BATCHES * BATCH
    store.close()
    reopened = open_store("qdrant", "c", path=str(tmp_path / "q"))
    try:
        assert reopened.count() == THREADS * BATCHES * BATCH  # on disk, not only in memory
    finally:
        reopened.close()
