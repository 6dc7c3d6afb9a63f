"""Issue 47 item 3: a full disk under the embedding cache stops ``poolrag ingest`` in one line, exit
code 4, as a full disk under a store does (it was a 52-line traceback from sqlite3). The transaction
that failed leaves the cache as it was, the checkpoint lists what the store acknowledged, and the
same command resumes once there is room."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
from disk_faults import empty_filler, fill_to, one_line, run_poolrag, small_disk
from kill_resume import write_subject_corpus

from poolrag import PoolingParams
from poolrag.cache import EmbeddingCache
from poolrag.ingest import TokenChunker, read_paths
from poolrag.ingest.checkpoint import checkpointed
from poolrag.stores import open_store

CACHE_ROOM = 320 << 10  # bytes left free for the cache: its WAL outgrows it about halfway through


def _ingest(corpus: Path, store: Path, cache: Path, checkpoint: Path, home: Path):
    args = ["ingest", str(corpus), "--store", "qdrant-edge", "--path", str(store), "--collection", "c"]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2", "--cache", str(cache)]
    return run_poolrag([*args, "--checkpoint", str(checkpoint), "--quiet", "--json"], home)


def test_a_full_disk_under_the_cache_is_one_line_and_the_run_resumes(tmp_path: Path, minilm_engine) -> None:
    corpus = write_subject_corpus(tmp_path / "corpus")
    store, checkpoint = tmp_path / "edge", tmp_path / "ingest.checkpoint.json"
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    with small_disk(tmp_path / "disk", 4 << 20) as disk:
        cache = disk / "embeddings.sqlite"
        fill_to(disk, CACHE_ROOM)
        full = _ingest(corpus, store, cache, checkpoint, tmp_path)
        assert full.returncode == 4, (full.returncode, full.stderr[-3000:])
        assert one_line(full.stderr) == (
            f"poolrag ingest: error: cannot write the embedding cache {cache}: the disk is full; "
            "free space there, or use a file on another disk (--cache FILE; cache= in Python) or no cache "
            "(--no-cache; cache=None)"
        )
        done = checkpointed(checkpoint)  # readable, and lists what was stored
        assert 0 < len(done) < len(list(corpus.iterdir())), len(done)
        with open_store("qdrant-edge", "c", path=str(store)) as edge:
            stored_before = set(edge.list_sources())
        assert {c.id for c in chunks if c.source in done} <= stored_before  # a next one's may be there

        empty_filler(disk)
        with sqlite3.connect(cache) as db:  # the failed transaction left nothing half-written
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        with EmbeddingCache(cache) as kept:
            assert len(kept) >= len(stored_before)  # every vector stored so far was cached first

        resumed = _ingest(corpus, store, cache, checkpoint, tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        report = json.loads(resumed.stdout)
        assert report["resumed"] and report["documents_skipped"] == len(done)
        assert not checkpoint.exists()
        with EmbeddingCache(cache) as kept:
            assert len(kept) == len(chunks)

    with open_store("qdrant-edge", "c", path=str(store)) as edge:
        assert edge.count() == len(chunks)  # nothing lost, nothing twice
        stored = edge.fetch_vectors([c.id for c in chunks])
    clean = minilm_engine.embed_array([c.text for c in chunks], PoolingParams(input_type="document"))
    np.testing.assert_allclose(np.stack([stored[c.id] for c in chunks]), clean, atol=1e-5)
