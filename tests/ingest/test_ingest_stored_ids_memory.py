"""A run over a large stored collection holds nothing per stored chunk while it works (real Milvus Lite).

The ids stored when a run starts (to skip them, find stale chunks, prune) used to sit in Python
dicts and sets for the whole run, ~300 bytes per stored chunk: a re-run over a 500 MB corpus started
over 100 MB up. They now live in a scratch SQLite file. The Python objects the run holds when it
writes its first batch (``sys.getallocatedblocks``, which costs nothing to read, unlike tracing the
store's scan) are compared for a collection of 500 and one of 5,000 chunks of other sources: before,
the larger one held two more objects per extra chunk (its id and source strings); now it must hold
fewer than one (the difference measured is within the run's noise of ~700 blocks).
"""

from __future__ import annotations

import gc
import sys
import uuid
from pathlib import Path

import numpy as np
from ingest_support import write_corpus

from poolrag.cache import CachedEmbedder
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.stores import open_store
from poolrag.stores.base import ChunkRecord

SMALL, LARGE = 500, 5_000


def _held_at_first_write(root: Path, engine, stored: int) -> int:
    """Python objects (allocated blocks) held by an ingest of a small corpus when it first writes to a Milvus
    Lite collection already holding ``stored`` chunks of other sources."""
    root.mkdir()
    store = open_store("milvus", "docs", uri=str(root / "milvus.db"))
    try:
        pipeline = IngestPipeline(
            store,
            DenseEncoder(CachedEmbedder(engine)),
            TokenChunker(engine.tokenizer, max_tokens=24, overlap=4),
            batch_size=4,
            checkpoint_dir=root / "ck",
            progress=False,
        )
        store.ensure_collection(pipeline.spec)
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((stored, pipeline.spec.dimension)).astype(np.float32)
        for start in range(0, stored, 1000):
            store.upsert(
                [
                    ChunkRecord(
                        str(uuid.uuid5(uuid.NAMESPACE_URL, f"old-{i}")),
                        vectors[i],
                        {"source": f"gone-{i}.md", "text": "x"},
                    )
                    for i in range(start, min(start + 1000, stored))
                ]
            )
        held: list[int] = []
        upsert = store.upsert

        def sampled_upsert(records):
            if not held:
                gc.collect()
                held.append(sys.getallocatedblocks() - before)
            upsert(records)

        store.upsert = sampled_upsert  # type: ignore[method-assign]
        corpus = write_corpus(root / "corpus")
        gc.collect()
        before = sys.getallocatedblocks()
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted > 4 and store.count() == stored + report.upserted
        return held[0]
    finally:
        store.close()


def test_held_memory_does_not_grow_with_the_stored_collection(tmp_path: Path, minilm_engine) -> None:
    small = _held_at_first_write(tmp_path / "small", minilm_engine, SMALL)
    large = _held_at_first_write(tmp_path / "large", minilm_engine, LARGE)
    assert large - small < LARGE - SMALL, (small, large)
