"""A Milvus *server* reached by URI (Milvus Lite's own gRPC server, run as a separate process)
goes down in the middle of an ingest: the run retries, then stops with a clear error leaving only
whole batches behind, and once the server is back a re-run completes the collection."""

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

SUBJECTS = [
    "volcanoes",
    "violins",
    "glaciers",
    "satellites",
    "orchids",
    "submarines",
    "deserts",
    "comets",
    "lighthouses",
    "mushrooms",
    "bridges",
    "owls",
]
DOCS = [
    Document(
        f"{s}.txt", " ".join(f"Note {n} on {s}: item {n * 5 + i} was logged by the team." for n in range(8))
    )
    for i, s in enumerate(SUBJECTS)
]


@pytest.mark.slow
def test_server_outage_mid_run_then_resume(tmp_path: Path, minilm_engine) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path / "milvus-data", port)
    checkpoint = tmp_path / "ck.json"
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    expected = {c.id: c for d in DOCS for c in chunker.split(d)}
    cache = EmbeddingCache(tmp_path / "cache.sqlite")

    def pipeline(retry: RetryPolicy) -> tuple[IngestPipeline, CachedEmbedder, MilvusStore]:
        store = MilvusStore("docs", uri, retry=retry, timeout=3)
        embedder = CachedEmbedder(minilm_engine, cache)
        pipe = IngestPipeline(
            store, DenseEncoder(embedder), chunker, batch_size=2, checkpoint_path=checkpoint, progress=False
        )
        return pipe, embedder, store

    try:
        pipe, first_embedder, store = pipeline(RetryPolicy(attempts=3, base_delay=0.2, max_delay=0.5))
        failure: list[BaseException] = []
        worker = threading.Thread(target=lambda: _run_capturing(pipe, failure))
        worker.start()
        deadline = time.monotonic() + 120
        while worker.is_alive() and time.monotonic() < deadline:
            if checkpoint.exists() and len(checkpointed(checkpoint)) >= 2:
                break
            time.sleep(0.01)
        server.send_signal(signal.SIGKILL)
        server.wait()
        worker.join(120)
        assert failure and isinstance(failure[0], StoreUnavailableError), f"ingest did not fail: {failure}"
        assert f"milvus at {uri} is unavailable" in str(failure[0]) and failure[0].attempts == 3
        embedded_before = first_embedder.misses
        assert 0 < embedded_before < len(expected)
        store.close()

        server = start_server(tmp_path / "milvus-data", port)
        # The restarted server accepts connections before it serves requests: retries ride that out.
        pipe, _, store = pipeline(RetryPolicy(attempts=8, base_delay=0.25, max_delay=2.0))
        partial = store.list_sources()
        assert set(partial) <= set(expected) and 0 < len(partial) < len(expected)
        vectors = store.fetch_vectors(list(partial))
        assert all(v.shape == (384,) for v in vectors.values())  # whole rows only
        report = pipe.run(DOCS)
        assert report.resumed and report.embedded == len(expected) - embedded_before
        assert store.count() == len(expected) and set(store.list_sources()) == set(expected)
        stored = store.fetch_vectors(list(expected))
        clean = minilm_engine.embed_array(
            [c.text for c in expected.values()], PoolingParams(input_type="document")
        )
        np.testing.assert_allclose(np.stack([stored[i] for i in expected]), clean, atol=1e-5)
        store.close()
    finally:
        server.kill()
        server.wait()


def _run_capturing(pipe: IngestPipeline, failure: list[BaseException]) -> None:
    try:
        pipe.run(DOCS)
    except BaseException as exc:  # handed to the test thread
        failure.append(exc)
