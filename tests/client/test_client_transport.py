"""How the HTTP client sends and reads: one connection pool however many threads start at once,
bodies a server accepts, texts checked before they leave, and answers that are not poolrag's
(a proxy's page, another server's listing) said in one line."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import numpy as np
import pytest

from poolrag import Engine, InputTypeError, InvalidInputError
from poolrag.client import PoolragClient, RemoteError, RemoteInvalidInputError
from poolrag.client import client as client_module
from poolrag.errors import InvalidTextError
from poolrag.testing.live_server import serve
from poolrag.testing.rag_corpus import TEXTS


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm", max_body_bytes=20_000)


def test_threads_that_start_at_once_share_one_connection_pool(minilm_url: str) -> None:
    """Eight threads making a fresh client's first call together: one pool, which close() closes."""
    gc.collect()
    start = threading.Barrier(8)
    client = PoolragClient(minilm_url)

    def first_call(text: str) -> np.ndarray:
        start.wait()
        return client.embed_array([text])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ThreadPoolExecutor(8) as pool:
            assert all(v.shape == (1, 384) for v in pool.map(first_call, TEXTS[:8]))
        client.close()
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_long_texts_are_split_by_size_into_bodies_the_server_takes(
    minilm_url: str, minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server refuses a body over its limit (413); the client sends at most MAX_REQUEST_BYTES of
    text a request, so a list of long documents arrives whole, in order; a request the server still
    refuses for its size is sent again in halves."""
    documents = [f"{i} " + "long passage about rivers and their deltas " * 40 for i in range(12)]  # ~1.8 kB
    monkeypatch.setattr(client_module, "MAX_REQUEST_BYTES", 8_000)
    with PoolragClient(minilm_url) as client:
        sent = client.embed_array(documents)
    np.testing.assert_allclose(sent, minilm_engine.embed_array(documents), atol=1e-6)
    monkeypatch.setattr(client_module, "MAX_REQUEST_BYTES", 10**9)
    with PoolragClient(minilm_url) as client:
        np.testing.assert_allclose(client.embed_array(documents), sent, atol=1e-6)


def test_one_input_over_the_servers_body_limit_is_told_to_shrink_not_to_split(minilm_url: str) -> None:
    with PoolragClient(minilm_url) as client, pytest.raises(RemoteInvalidInputError) as refused:
        client.embed_array(["sea " * 6_000])  # 24 kB, over the test server's 20 kB
    assert refused.value.status_code == 413
    assert "one input alone is over the server's request limit" in str(refused.value)
    assert "max_inputs_per_request" not in str(refused.value)


def test_an_input_refused_in_a_later_request_is_named_where_the_caller_has_it(minilm_url: str) -> None:
    """The server names it in its request (input[1] of the third); the caller's list has it at 9."""
    prompts = [{"prompt_token_ids": [101, 2_000 + i, 102]} for i in range(12)]
    prompts[9] = {"prompt_token_ids": [101, 999_999, 102]}  # past the vocabulary: the server refuses it
    with PoolragClient(minilm_url, max_inputs_per_request=4) as client:
        with pytest.raises(RemoteInvalidInputError, match=r"^/v1/embeddings: input\[9\]"):
            client.embed_array(prompts)
        with pytest.raises(RemoteInvalidInputError, match=r"^/v1/embeddings: input\[9\]"):
            asyncio.run(client.aembed_array(prompts))


def test_pairs_are_split_by_the_size_of_both_texts(
    minilm_url: str, minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N:N pairs carry a text_1 beside each text_2: a split counting text_2 alone sent 413s."""
    queries = [f"{i} " + "a long question about the tides and the moon " * 60 for i in range(8)]  # ~2.8 kB
    passages = [f"{i} a short passage about tides." for i in range(8)]
    monkeypatch.setattr(client_module, "MAX_REQUEST_BYTES", 8_000)
    with PoolragClient(minilm_url) as client:
        got = [out.outputs.score for out in client.score(queries, passages)]
    expected = [out.outputs.score for out in minilm_engine.score(queries, passages)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_texts_are_checked_before_they_are_sent_by_the_engines_rule(
    minilm_url: str, minilm_engine: Engine
) -> None:
    """A lone surrogate cannot be encoded for the wire; the engine's error, named as the engine
    names it, not the codec's. A bare string of documents is one document, not a list of letters."""
    with PoolragClient(minilm_url) as client:
        for call in (minilm_engine.embed_array, client.embed_array):
            with pytest.raises(InvalidTextError, match=r"^input\[1\] is not valid Unicode"):
                call(["fine", "bad \ud800 text"])
        for call in (minilm_engine.embed_array, client.embed_array):  # one text is named input
            with pytest.raises(InvalidTextError, match=r"^input is not valid Unicode"):
                call("bad \ud800 text")
        with pytest.raises(InvalidTextError, match=r"^documents\[0\] is not valid Unicode"):
            client.rerank("query", ["\udfff"])
        for call in (minilm_engine.score_array, client.score_array):
            with pytest.raises(InputTypeError, match="text_2 must be a list of strings, not one string"):
                call("capital of France?", "Paris")
        with pytest.raises(InputTypeError, match="documents must be a list of strings, not one string"):
            client.rerank("capital of France?", "Paris")


def test_atokenize_is_tokenizes_async_twin(minilm_url: str) -> None:
    with PoolragClient(minilm_url) as client:
        assert asyncio.run(client.atokenize("hello there")) == client.tokenize("hello there")


def test_a_url_with_a_bad_port_is_refused_when_the_client_is_made() -> None:
    with pytest.raises(InvalidInputError, match="not a valid URL"):
        PoolragClient("http://127.0.0.1:abc")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/poolrag?code=x", "http://127.0.0.1:8000/#top"])
def test_a_url_with_a_query_or_fragment_is_refused_when_the_client_is_made(url: str) -> None:
    """The endpoints' paths would land after them (``?code=x/v1/embeddings``), reaching another route."""
    with pytest.raises(InvalidInputError, match="has a query or fragment"):
        PoolragClient(url)


def test_a_path_prefix_and_a_pasted_v1_reach_the_same_endpoints() -> None:
    """Behind a proxy serving the server under a prefix, and as pasted from OpenAI's examples."""
    for url in ("http://h/poolrag", "http://h/poolrag/", "http://h/poolrag/v1", "http://h/poolrag/v1/"):
        client = PoolragClient(url)
        assert client._sync().build_request("POST", "/v1/embeddings").url == "http://h/poolrag/v1/embeddings"


# -- answers that are not poolrag's ------------------------------------------------------------------------
VLLM_MODEL = {"id": "BAAI/bge-m3", "object": "model", "owned_by": "vllm"}
VLLM_LISTING = json.dumps({"object": "list", "data": [VLLM_MODEL]})
Answers = dict[str, tuple[int, str, str]]


class _Stub(BaseHTTPRequestHandler):
    """A server that is not poolrag: a proxy's error page, a web page, vLLM's model listing."""

    answers: ClassVar[Answers]
    seen: ClassVar[list[str]]
    headers_sent: ClassVar[dict[str, str]] = {}

    def _answer(self) -> None:
        self.seen.append(self.path)
        status, kind, body = self.answers[self.path]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in self.headers_sent.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def _stub_handler(answers: Answers) -> type[_Stub]:
    return type("Stub", (_Stub,), {"answers": answers, "seen": []})


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = _stub_handler({})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_a_proxys_502_is_sent_again_then_quoted_briefly(stub: tuple[str, type[_Stub]]) -> None:
    url, handler = stub
    page = "<html><body>" + "Bad gateway. " * 300 + "</body></html>"
    handler.answers["/v1/models"] = (502, "text/html", page)
    with PoolragClient(url, max_retries=1) as client, pytest.raises(RemoteError) as failed:
        client.embed_array(["a"])
    assert failed.value.status_code == 502 and len(str(failed.value)) < 400
    assert handler.seen == ["/v1/models", "/v1/models"]  # sent again once (max_retries=1)


NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
)


def test_a_proxys_error_page_is_said_in_one_line_naming_the_server(stub: tuple[str, type[_Stub]]) -> None:
    """An app may call several servers: the error names the URL, and a proxy's HTML page by its
    title, not as lines of markup."""
    url, handler = stub
    handler.answers["/v1/models"] = (502, "text/html", NGINX_502)
    handler.answers["/rerank"] = (504, "text/plain", "upstream\n  timed out\n")
    with PoolragClient(url, max_retries=0) as client, pytest.raises(RemoteError) as failed:
        client.embed_array(["a"])
    assert str(failed.value) == (
        f"{url}/v1/models failed with HTTP 502: 502 Bad Gateway (an HTML page: a proxy in front of the "
        "server answered?)"
    )
    with PoolragClient(url, max_retries=0) as client, pytest.raises(RemoteError) as failed:
        client.rerank("q", ["a"])
    assert str(failed.value) == f"{url}/rerank failed with HTTP 504: upstream timed out"


@pytest.mark.parametrize("retry_after", ["nan", "inf", "-inf", "soon"])
def test_a_retry_after_that_is_not_a_finite_number_falls_back_to_the_backoff(
    stub: tuple[str, type[_Stub]], retry_after: str
) -> None:
    url, handler = stub
    handler.answers["/v1/models"] = (503, "application/json", '{"error": {"message": "busy"}}')
    handler.headers_sent = {"Retry-After": retry_after}
    with PoolragClient(url, max_retries=1) as client, pytest.raises(RemoteError) as failed:
        client.embed_array(["a"])
    assert failed.value.status_code == 503
    assert handler.seen == ["/v1/models", "/v1/models"]  # waited 0.5 s, sent once more, then raised


def test_a_retry_after_given_as_an_http_date_is_waited_until(stub: tuple[str, type[_Stub]]) -> None:
    """RFC 9110's other form: a date, here 2 to 3 s ahead (a date past is sent again at once)."""
    url, handler = stub
    handler.answers["/v1/models"] = (429, "application/json", '{"error": {"message": "slow down"}}')
    handler.headers_sent = {"Retry-After": email.utils.formatdate(time.time() + 3, usegmt=True)}
    started = time.monotonic()
    with PoolragClient(url, max_retries=1) as client, pytest.raises(RemoteError, match="HTTP 429"):
        client.embed_array(["a"])
    assert 1.5 < time.monotonic() - started < 6  # in whole seconds: between 2 and 3 s from now
    assert handler.seen == ["/v1/models", "/v1/models"]
    handler.headers_sent = {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    started = time.monotonic()
    with PoolragClient(url, max_retries=3) as client, pytest.raises(RemoteError, match="HTTP 429"):
        client.embed_array(["a"])
    assert time.monotonic() - started < 1.5  # past: no wait; the backoff's three would be 2.6 s at least


def test_an_async_call_that_failed_sends_none_of_its_remaining_requests(
    stub: tuple[str, type[_Stub]], minilm_url: str
) -> None:
    """A long list is many requests, ``max_concurrency`` in flight: once one is refused and the call
    raised, the rest are not sent on in the background of a loop that lives on (a web app's)."""
    url, handler = stub
    handler.answers["/v1/models"] = (200, "application/json", httpx.get(f"{minilm_url}/v1/models").text)
    handler.answers["/v1/embeddings"] = (400, "application/json", '{"error": {"message": "refused"}}')

    async def call_then_wait() -> None:
        client = PoolragClient(url, max_inputs_per_request=1, max_concurrency=2)
        with pytest.raises(RemoteInvalidInputError, match="refused"):
            await client.aembed_array([f"text {i}" for i in range(40)])
        await asyncio.sleep(1.0)  # the loop runs on
        await client.aclose()

    asyncio.run(call_then_wait())
    # the listing, the two in flight when the first was refused, and any that started before the
    # call raised; sent on in the background, all 40 went
    assert len(handler.seen) <= 1 + 2 + 3


def test_a_page_that_is_not_json_and_another_servers_listing_are_one_line(
    stub: tuple[str, type[_Stub]],
) -> None:
    url, handler = stub
    handler.answers["/v1/models"] = (200, "text/html", "<html>a login page</html>")
    with PoolragClient(url) as client, pytest.raises(RemoteError, match=r"not JSON: is .* a poolrag server"):
        client.embed_array(["a"])
    handler.answers["/v1/models"] = (200, "application/json", VLLM_LISTING)
    with PoolragClient(url) as client, pytest.raises(RemoteError, match="does not describe its models as"):
        client.embed_array(["a"])


def test_a_refused_connection_is_tried_again(stub: tuple[str, type[_Stub]]) -> None:
    """A server restarting refuses connections for a moment; nothing was sent, so the client
    connects again (``max_retries`` times, 0.5 s doubling) and gets the answer."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    handler = _stub_handler({"/v1/models": (200, "application/json", VLLM_LISTING)})
    late = ThreadingHTTPServer(("127.0.0.1", port), handler, bind_and_activate=False)

    def open_soon() -> None:
        late.allow_reuse_address = True
        late.server_bind()
        late.server_activate()
        late.serve_forever()

    timer = threading.Timer(0.3, open_soon)
    timer.start()
    try:
        client = PoolragClient(f"http://127.0.0.1:{port}", max_retries=3)
        with client, pytest.raises(RemoteError, match="does not describe its models as"):  # it answered
            client.embed_array(["a"])
    finally:
        timer.join(5)
        late.shutdown()
        late.server_close()
    with pytest.raises(RemoteError, match="cannot reach"):
        PoolragClient(f"http://127.0.0.1:{port}", max_retries=0).embed_array(["a"])
