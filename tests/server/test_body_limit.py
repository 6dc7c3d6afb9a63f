"""Oversized bodies get 413 before they are parsed, whether or not they announce their length; a
413 names the serve flag that sets the limit and the way under it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx

from poolrag import Engine

from .conftest import Served, serve_in_thread

LIMIT = 4096  # small_body_server's max_body_bytes


def _assert_413(response: httpx.Response) -> None:
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "request_too_large"
    assert f"limit of {LIMIT} bytes (--max-body-bytes): split the inputs" in error["message"]


def _body(size: int) -> bytes:
    """A valid embeddings request of exactly ``size`` bytes (truncated to the model's length)."""
    base = json.dumps({"input": "", "truncate_prompt_tokens": -1}).encode()
    words = "word " * ((size - len(base)) // 5)
    text = words + "x" * (size - len(base) - len(words))
    return json.dumps({"input": text, "truncate_prompt_tokens": -1}).encode()


def test_content_length_over_the_limit_is_413(small_body_server: Served, http: httpx.Client) -> None:
    response = http.post(
        f"{small_body_server.url}/v1/embeddings",
        content=_body(LIMIT + 1),
        headers={"content-type": "application/json"},
    )
    _assert_413(response)


def test_a_chunked_body_over_the_limit_is_413(small_body_server: Served, http: httpx.Client) -> None:
    payload = _body(3 * LIMIT)

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent with Transfer-Encoding: chunked
        for start in range(0, len(payload), 1000):
            yield payload[start : start + 1000]

    response = http.post(
        f"{small_body_server.url}/v1/embeddings",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    _assert_413(response)


def test_a_body_at_the_limit_is_served(small_body_server: Served, http: httpx.Client) -> None:
    body = _body(LIMIT)
    assert len(body) == LIMIT
    response = http.post(
        f"{small_body_server.url}/v1/embeddings", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json()["usage"]["prompt_tokens"] == 256  # the text was long, and truncated as asked


def test_a_request_over_the_per_request_caps_is_413_naming_the_flag(minilm_engine: Engine) -> None:
    with serve_in_thread(minilm_engine, max_request_tokens=8, max_request_chars=100) as url:
        over_ids = httpx.post(f"{url}/v1/embeddings", json={"input": [list(range(1000, 1009))]}, timeout=60)
        over_chars = httpx.post(f"{url}/v1/embeddings", json={"input": ["word " * 30]}, timeout=60)
        within = httpx.post(f"{url}/v1/embeddings", json={"input": ["word " * 19]}, timeout=60)
    assert within.status_code == 200, within.text
    for response, flag in ((over_ids, "--max-request-tokens"), (over_chars, "--max-request-chars")):
        assert response.status_code == 413, response.text
        message = response.json()["error"]["message"]
        assert f"({flag}): split the inputs over several requests" in message, message
