"""Store writes overlap the next batch's forward pass, and keep every guarantee: the database dies
while a batch is being embedded; the run stops with StoreUnavailableError, the checkpoint claims
only documents the store acknowledged, every vector computed (the one in flight included) is in
the cache, and a re-run embeds exactly what is missing."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from milvus_server import free_port, start_server

from poolrag import PoolingParams
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.ingest import DenseEncoder, Document, IngestPipeline, TokenChunker
from poolrag.ingest.checkpoint import checkpointed
from poolrag.stores import RetryPolicy, StoreUnavailableError
from poolrag.stores.milvus import MilvusStore

BATCH = 3
DOCS = [
    Document(
        f"station-{d}.txt",
        " ".join(
            f"Reading {n} at station {d} on day {n + d}: pressure {990 + n} hPa, wind {n % 7} m/s."
            for n in range(12)
        ),
    )
    for d in range(24)
]


@pytest.mark.slow
def test_store_dies_while_the_next_batch_is_embedded(tmp_path: Path, minilm_engine) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path / "milvus-data", port)
    checkpoint = tmp_path / "ck.json"
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=40, overlap=6)
    chunks_of = {d.source: {c.id for c in chunker.split(d)} for d in DOCS}
    expected = {c.id: c for d in DOCS for c in chunker.split(d)}
    cache = EmbeddingCache(tmp_path / "cache.sqlite")

    def pipeline(retry: RetryPolicy) -> tuple[IngestPipeline, CachedEmbedder, MilvusStore]:
        store = MilvusStore("docs", uri, retry=retry, timeout=3)
        embedder = CachedEmbedder(minilm_engine, cache)
        encoder = DenseEncoder(embedder)
        pipe = IngestPipeline(
            store, encoder, chunker, batch_size=BATCH, checkpoint_path=checkpoint, progress=False
        )
        return pipe, embedder, store

    try:
        pipe, embedder, store = pipeline(RetryPolicy(attempts=2, base_delay=0.1, max_delay=0.2))
        failure: list[BaseException] = []
        worker = threading.Thread(target=lambda: _run_capturing(pipe, failure))
        worker.start()
        deadline = time.monotonic() + 120
        while worker.is_alive() and time.monotonic() < deadline:
            if checkpoint.exists() and len(checkpointed(checkpoint)) >= 3:
                break
            time.sleep(0.005)
        server.send_signal(signal.SIGKILL)
        server.wait()
        worker.join(120)
        assert failure and isinstance(failure[0], StoreUnavailableError), f"ingest did not fail: {failure}"
        assert not any(
            t.name.startswith(("poolrag-ingest-embed", "poolrag-ingest-chunk")) for t in threading.enumerate()
        )
        computed = embedder.misses
        assert len(cache) == computed  # every vector paid for reached the cache, the one in flight too
        done = checkpointed(checkpoint)
        store.close()

        server = start_server(tmp_path / "milvus-data", port)
        pipe, _, store = pipeline(RetryPolicy(attempts=8, base_delay=0.25, max_delay=2.0))
        stored = set(store.list_sources())
        # The failed batch and the one embedded while it was being written: computed, not stored.
        assert computed >= len(stored) + BATCH + 1
        assert done and all(chunks_of[source] <= stored for source in done)  # acknowledged only
        report = pipe.run(DOCS)
        assert report.resumed and report.documents_skipped == len(done)
        assert report.embedded == len(expected) - computed  # nothing computed twice
        assert store.count() == len(expected) and set(store.list_sources()) == set(expected)
        vectors = store.fetch_vectors(list(expected))
        clean = minilm_engine.embed_array(
            [c.text for c in expected.values()], PoolingParams(input_type="document")
        )
        np.testing.assert_allclose(np.stack([vectors[i] for i in expected]), clean, atol=1e-5)
        store.close()
    finally:
        server.kill()
        server.wait()
        cache.close()


def _run_capturing(pipe: IngestPipeline, failure: list[BaseException]) -> None:
    try:
        pipe.run(DOCS)
    except BaseException as exc:  # handed to the test thread
        failure.append(exc)
