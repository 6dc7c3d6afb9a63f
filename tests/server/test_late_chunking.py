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
from poolrag.client import PoolragClient
from poolrag.client.errors import RemoteInvalidInputError

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
