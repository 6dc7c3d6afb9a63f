"""POST /v1/embeddings with ``late_chunking``: one document, one vector per chunk span, on the
CLI-started MiniLM server (a mean-pooling model), called with httpx."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.client.errors import RemoteInvalidInputError
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.stores import open_store

from .conftest import Served, serve_in_thread

DOCUMENT = (
    "The Eiffel Tower was finished in 1889. It stands in Paris on the Champ de Mars. "
    "Its iron lattice was the tallest structure in the world for four decades."
)
SPANS = [[0, 38], [39, 80], [81, len(DOCUMENT)]]


def test_late_chunking_returns_the_engines_chunk_vectors_in_span_order(
    minilm_server: Served, http: httpx.Client
) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    body = {"input": DOCUMENT, "late_chunking": {"spans": SPANS}, "encoding_format": "float"}
    answer = http.post(url, json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    got = np.array([item["embedding"] for item in data["data"]], dtype=np.float32)
    expected = minilm_server.engine.embed_chunks(DOCUMENT, [tuple(s) for s in SPANS])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert [item["index"] for item in data["data"]] == [0, 1, 2]
    assert data["usage"]["prompt_tokens"] == len(minilm_server.engine.tokenize(DOCUMENT))
    assert answer.headers["X-Truncated-Inputs"] == "0"  # the document is read whole, never cut
    # the wire options apply as on any embeddings answer
    body["encoding_format"] = "base64"
    encoded = http.post(url, json=body).json()["data"][1]["embedding"]
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(encoded), dtype="<f4"), got[1])


def test_spans_outside_the_document_and_bad_shapes_are_400s_naming_the_cause(
    minilm_server: Served, http: httpx.Client
) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    cases = [
        ({"input": DOCUMENT, "late_chunking": {"spans": [[0, 10], [5, 9999]]}}, "spans[1] = [5, 9999]"),
        ({"input": DOCUMENT, "late_chunking": {"spans": [[4, 4]]}}, "spans[0] = [4, 4] is empty"),
        ({"input": [DOCUMENT], "late_chunking": {"spans": [[0, 4]]}}, "input must be a string"),
        ({"input": DOCUMENT, "late_chunking": {"spans": []}}, "spans"),
        ({"input": DOCUMENT, "late_chunking": {"spans": [[0, 1, 2]]}}, "spans"),
        # once accepted and ignored: the vectors read the whole document all the same
        (
            {"input": DOCUMENT, "late_chunking": {"spans": SPANS}, "truncate_prompt_tokens": 8},
            "truncate_prompt_tokens does not apply",
        ),
        (
            {"input": DOCUMENT.split(". "), "late_chunking": True, "truncate_prompt_tokens": 8},
            "truncate_prompt_tokens does not apply",
        ),
    ]
    for body, message in cases:
        answer = http.post(url, json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert message in answer.json()["error"]["message"], (body, answer.text)


def test_the_http_client_gets_what_the_engine_gives(minilm_server: Served) -> None:
    spans = [tuple(s) for s in SPANS]
    expected = minilm_server.engine.embed_chunks(DOCUMENT, spans)
    with PoolragClient(minilm_server.url, model=minilm_server.model) as client:
        np.testing.assert_allclose(client.embed_chunks(DOCUMENT, spans), expected, rtol=0, atol=1e-6)
        got = asyncio.run(client.aembed_chunks(DOCUMENT, spans))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        with pytest.raises(RemoteInvalidInputError, match=r"spans\[0\] = \[5, 9999\]"):
            client.embed_chunks(DOCUMENT, [(5, 9999)])


def test_the_refusal_for_a_model_that_cannot_late_chunk_keeps_the_hosts_folder_path_to_itself(
    minilm_path: Path,
) -> None:
    """The engine's refusal named its model, which over HTTP is the folder the server loaded."""
    engine = Engine(str(minilm_path), pooler_config={"pooling_type": "CLS"})
    with serve_in_thread(engine) as url:
        body = {"model": "test-model", "input": "hello world", "late_chunking": {"spans": [[0, 5]]}}
        answer = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "pools by CLS" in message and str(minilm_path) not in message


def test_an_ingest_over_http_refuses_a_model_that_cannot_late_chunk_before_the_collection_exists(
    minilm_path: Path, minilm_server: Served, tmp_path: Path
) -> None:
    """The remote encoder said nothing until the first batch, whose refusal came after the collection
    had been made and marked as holding late vectors (so the same corpus ingested the ordinary way
    was refused too). The model card now says it, as the in-process engine does, before any input."""
    cls_engine = Engine(str(minilm_path), pooler_config={"pooling_type": "CLS"})
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tower.txt").write_text(DOCUMENT)
    with serve_in_thread(cls_engine) as url, PoolragClient(url) as client:
        card = httpx.get(f"{url}/v1/models/test-model", timeout=60).json()
        assert card["late_chunking_refusal"] == cls_engine.late_chunking_refusal
        assert client.late_chunking_refusal == cls_engine.late_chunking_refusal
        store = open_store("qdrant", "docs", path=str(tmp_path / "qdrant"))
        try:
            with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
                encoder = DenseEncoder(CachedEmbedder(client, cache))
                chunker = TokenChunker(cls_engine.tokenizer, max_tokens=16, overlap=4)
                with pytest.raises(InvalidInputError, match="mean-pooling model; this model pools by CLS"):
                    IngestPipeline(store, encoder, chunker, progress=False, late_chunking=True)
                assert store.read_spec() is None  # nothing was made
                report = IngestPipeline(store, encoder, chunker, progress=False).run(read_paths([corpus]))
            assert report.upserted > 0 and store.read_spec().chunk_vectors == "per_chunk"
        finally:
            store.close()
    with PoolragClient(minilm_server.url) as client:  # a mean-pooling model late-chunks
        assert client.late_chunking_refusal is None
        assert (
            httpx.get(f"{minilm_server.url}/v1/models", timeout=60).json()["data"][0]["late_chunking_refusal"]
            is None
        )
