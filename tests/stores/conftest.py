from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import process_store
import pytest
from milvus_server import free_port, start_server
from stores_support import FAST_RETRY, SENTENCES, store_location

from poolrag.stores import STORES, InMemoryStore, RetryPolicy, open_store


@pytest.fixture(autouse=True)
def process_store_registered(monkeypatch):
    """The test-only store kind joins the registry for every store test: one registry line."""
    monkeypatch.setitem(STORES, process_store.KIND, process_store.ENTRY)
    yield
    process_store.ProcessStore.kept.clear()


@pytest.fixture(scope="session")
def sentence_vectors(minilm_engine) -> np.ndarray:
    """Real MiniLM embeddings of SENTENCES (384 dims, unit length)."""
    return minilm_engine.embed_array(SENTENCES)


@pytest.fixture(scope="session")
def sentence_token_vectors(minilm_engine) -> list[np.ndarray]:
    """Real per-token MiniLM vectors, normalised like ColBERT's, to exercise the multivector layout."""
    out = minilm_engine.encode(SENTENCES, pooling_task="token_embed")
    mats = [np.asarray(o.outputs.data, dtype=np.float32) for o in out]
    return [m / np.linalg.norm(m, axis=1, keepdims=True) for m in mats]


@pytest.fixture
def make_store(tmp_path: Path):
    """Open (and later close) stores of any kind on files under this test's tmp folder
    (``memory``: an :class:`InMemoryStore`)."""
    opened = []

    def make(kind: str, collection: str = "docs", root: Path | None = None, retry: RetryPolicy = FAST_RETRY):
        if kind == "memory":
            return InMemoryStore(collection)
        store = open_store(kind, collection, retry=retry, **store_location(kind, root or tmp_path))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def milvus_server_uri(tmp_path: Path) -> Iterator[str]:
    """A real Milvus Lite gRPC server in its own process on 127.0.0.1, stopped after the test."""
    port = free_port()
    server = start_server(tmp_path / "milvus-server", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=60)
