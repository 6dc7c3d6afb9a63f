"""A Milvus collection whose schema declares functions is not opened: poolrag creates none, and
Milvus runs them on every insert. Measured on Milvus Lite 3.2: a text-embedding function naming a
URL received each inserted chunk's source and the user's ``$OPENAI_API_KEY``. A database file is
data, never configuration that makes a run call out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest
from pymilvus import DataType, Function, FunctionType, MilvusClient

from poolrag.stores import ChunkRecord, CollectionSpec, open_store
from poolrag.stores.errors import UnsafeStoreFileError

SPEC = CollectionSpec(name="docs", dimension=8, model_identity="tiny@1", full_dimension=8, model_name="tiny")


class _Listener(BaseHTTPRequestHandler):
    calls: list[tuple[str, str | None]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.calls.append((self.path, self.headers.get("Authorization")))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """An HTTP server on 127.0.0.1 that records every request a function sends it."""
    calls: list[tuple[str, str | None]] = []
    handler = type("Handler", (_Listener,), {"calls": calls})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", calls
    server.shutdown()


def _poolrag_properties(tmp_path: Path) -> dict[str, str]:
    """The properties of a collection poolrag made (its metadata), as a crafted file would copy them."""
    with open_store("milvus", "docs", uri=str(tmp_path / "real.db")) as store:
        store.ensure_collection(SPEC)
    client = MilvusClient(str(tmp_path / "real.db"))
    try:
        return dict(client.describe_collection("docs")["properties"])
    finally:
        client.close()


def test_a_collection_with_a_text_embedding_function_is_refused_before_any_insert(
    tmp_path: Path, listener: tuple[str, list[tuple[str, str | None]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, calls = listener
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own")
    crafted = str(tmp_path / "crafted.db")
    client = MilvusClient(crafted)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
    schema.add_field("source", DataType.VARCHAR, max_length=4096)
    schema.add_field("sent", DataType.FLOAT_VECTOR, dim=8)
    schema.add_function(
        Function(
            name="send",
            function_type=FunctionType.TEXTEMBEDDING,
            input_field_names=["source"],
            output_field_names=["sent"],
            params={"provider": "openai", "model_name": "m", "base_url": url, "dim": 8},
        )
    )
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="COSINE")
    index.add_index("sent", index_type="FLAT", metric_type="COSINE")
    client.create_collection(
        "docs", schema=schema, index_params=index, properties=_poolrag_properties(tmp_path)
    )
    client.close()

    with open_store("milvus", "docs", uri=crafted) as store, pytest.raises(UnsafeStoreFileError) as refused:
        store.ensure_collection(SPEC)
        store.upsert(
            [ChunkRecord("c0", np.ones(8, np.float32), {"text": "t", "source": "/home/me/secret.txt"})]
        )
    assert "declares functions poolrag did not create (send (TEXTEMBEDDING))" in str(refused.value)
    assert "choose another --collection" in str(refused.value)
    assert calls == []


def test_a_collection_poolrag_made_declares_no_function_and_opens(tmp_path: Path) -> None:
    _poolrag_properties(tmp_path)
    with open_store("milvus", "docs", uri=str(tmp_path / "real.db")) as store:
        store.ensure_collection(SPEC)
        store.upsert([ChunkRecord("c0", np.ones(8, np.float32), {"text": "t", "source": "a.txt"})])
        assert store.count() == 1
