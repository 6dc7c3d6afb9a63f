"""Issue 13: what an outside attacker did to ``poolrag serve``, each reproduced on 127.0.0.1.

1. one large request froze the event loop (``/health`` waited with it);
2. memory grew ~150x the request body;
3. work went on after the client had gone, holding its queue slot, counted as 200;
4. slow headers/bodies held connections, aborts counted as 500, ``code: null`` errors, pydantic
   internals in messages, no ``Host`` check, NUL / zero-width-only text accepted.

Bounds are relative (a multiple of the body, a fraction of a second), not one machine's figures.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from poolrag import Engine
from poolrag.errors import InvalidInputError

from .conftest import Served, cli_server, metric_samples, serve_in_thread, wait_for_body_bytes

HEALTH_BOUND_S = 0.5


@pytest.fixture(scope="module")
def cli(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``poolrag serve`` with default limits, in its own process (to read its memory): (url, pid)."""
    log = tmp_path_factory.mktemp("hostile") / "server.log"
    with cli_server(log, str(minilm_path), "--log-level", "warning") as (url, process):
        yield url, process.pid


def _ids_body(count: int, token_id: int = 1) -> bytes:
    ids = [101] + [token_id] * (count - 1)  # MiniLM's [CLS] first: ids its tokenizer could have made
    return json.dumps({"input": ids, "truncate_prompt_tokens": -1}, separators=(",", ":")).encode()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Watch:
    """Samples a server's RSS and its ``/health`` latency while a block runs."""

    def __init__(self, url: str, pid: int | None = None) -> None:
        self.url, self.pid = url, pid
        self.peak_kib = self.start_kib = _rss_kib(pid) if pid else 0
        self.health_max_s = 0.0
        self.health_probes = 0
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._health, daemon=True)]
        if pid:
            self._threads.append(threading.Thread(target=self._rss, daemon=True))

    def _rss(self) -> None:
        while not self._done.is_set():
            self.peak_kib = max(self.peak_kib, _rss_kib(self.pid))  # type: ignore[arg-type]
            time.sleep(0.005)

    def _health(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._done.is_set():
                started = time.perf_counter()
                assert client.get(f"{self.url}/health").status_code == 200
                self.health_max_s = max(self.health_max_s, time.perf_counter() - started)
                self.health_probes += 1
                time.sleep(0.02)

    def __enter__(self) -> Watch:
        for thread in self._threads:
            thread.start()
        time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.1)
        self._done.set()
        for thread in self._threads:
            thread.join()

    @property
    def growth_bytes(self) -> int:
        return (self.peak_kib - self.start_kib) * 1024


def _post(url: str, body: bytes, path: str = "/v1/embeddings") -> httpx.Response:
    return httpx.post(f"{url}{path}", content=body, headers={"content-type": "application/json"}, timeout=120)


def _status_count(url: str, path: str, status: str) -> float:
    key = ("poolrag_requests_total", (("path", path), ("status", status)))
    return metric_samples(url).get(key, 0.0)


# -- 1. the event loop stays free ----------------------------------------------------------------------
def test_health_answers_while_hostile_and_large_requests_are_handled(cli: tuple[str, int]) -> None:
    url, _ = cli
    hostile = _ids_body(2_000_000)  # 4 MB, over the token-id limit: refused before it is parsed
    large = _ids_body(500_000, token_id=2023)  # 3 MB, under it: parsed, validated and served
    with Watch(url) as watch:
        refused = _post(url, hostile)
        served = _post(url, large)
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "request_too_large"
    assert served.status_code == 200, served.text
    assert served.json()["usage"]["prompt_tokens"] == 256  # truncated to the model's length
    assert watch.health_probes >= 3
    assert watch.health_max_s < HEALTH_BOUND_S


# -- 2. memory is a small multiple of the input ------------------------------------------------------
def test_concurrent_large_requests_stay_within_a_small_multiple_of_their_bodies(cli: tuple[str, int]) -> None:
    url, pid = cli
    hostile = _ids_body(2_000_000)
    large = _ids_body(400_000, token_id=2023)
    with Watch(url, pid) as watch, ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda body: _post(url, body).status_code, [hostile, hostile, large, large]))
    sent = 2 * len(hostile) + 2 * len(large)
    assert sorted(statuses) == [200, 200, 413, 413]
    # before issue 13 the hostile bodies alone grew the server by ~150x their size
    assert watch.growth_bytes < 10 * sent, (watch.growth_bytes, sent)


def test_the_byte_budget_answers_503_with_retry_after(minilm_engine: Engine) -> None:
    """A body held open reserves the bytes it has sent; the next one past the budget gets 503."""
    with serve_in_thread(minilm_engine, max_inflight_bytes=100_000, retry_after_s=3) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as held:
            held.sendall(_raw_post_head(port, "/v1/embeddings", 90_000) + b'{"input": "' + b"x" * 80_000)
            wait_for_body_bytes(url, len(b'{"input": "') + 80_000)
            busy = _post(url, json.dumps({"input": ["x" * 40_000]}).encode())
        assert busy.status_code == 503
        assert busy.headers["retry-after"] == "3" and busy.json()["error"]["code"] == "queue_full"
        assert _post(url, json.dumps({"input": ["x" * 40_000]}).encode()).status_code == 200


def test_declared_lengths_alone_do_not_spend_the_byte_budget(minilm_engine: Engine) -> None:
    """Headers claiming large bodies that never come reserve nothing: others are still served."""
    with serve_in_thread(minilm_engine, max_inflight_bytes=100_000) as url:
        port = int(url.rsplit(":", 1)[1])
        claims = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            for claim in claims:
                claim.sendall(_raw_post_head(port, "/v1/embeddings", 90_000))
            time.sleep(0.3)
            assert _post(url, json.dumps({"input": ["x" * 40_000]}).encode()).status_code == 200
        finally:
            for claim in claims:
                claim.close()


def test_an_unclosed_string_is_counted_in_linear_time(minilm_engine: Engine) -> None:
    """A body of many quotes that never close: refused fast, not after a quadratic scan."""
    with serve_in_thread(minilm_engine) as url:
        body = b'{"input":"' + b'\\",' * 530_000
        started = time.monotonic()
        answer = _post(url, body)
        assert answer.status_code in (400, 413), answer.text
        assert time.monotonic() - started < 10


# -- 3. a client that leaves takes its work with it ---------------------------------------------------
def _raw_post_head(port: int, path: str, length: int, host: str = "127.0.0.1") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_a_disconnected_clients_work_is_dropped_and_counted_as_499(cli: tuple[str, int]) -> None:
    url, _ = cli
    port = int(url.rsplit(":", 1)[1])
    texts = [
        f"document {i}: " + "retrieval augmented generation with pooled embeddings " * 8 for i in range(1024)
    ]
    body = json.dumps({"input": texts}).encode()
    model = (("model", httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]),)
    before = metric_samples(url)
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(_raw_post_head(port, "/v1/embeddings", len(body)) + body)
        wait_for_body_bytes(url, len(body))  # read whole: the request is the server's, not the kernel's
        time.sleep(1.0)
    deadline = time.monotonic() + 120  # a bound on a loaded machine; `ran` below is the contract
    while metric_samples(url)[("poolrag_queue_depth", model)] != 0:
        assert time.monotonic() < deadline, "the queue slot was not freed"
        time.sleep(0.1)
    time.sleep(1.0)  # a batch already running finishes; nothing after it should start
    after = metric_samples(url)
    ran = after[("poolrag_engine_sequences_total", model)] - before[("poolrag_engine_sequences_total", model)]
    assert ran < 1024 / 2, ran
    key = ("poolrag_requests_total", (("path", "/v1/embeddings"), ("status", "499")))
    assert after.get(key, 0) - before.get(key, 0) == 1
    ok = ("poolrag_requests_total", (("path", "/v1/embeddings"), ("status", "200")))
    assert after.get(ok, 0) == before.get(ok, 0)


# -- 4. the rest -------------------------------------------------------------------------------------
def test_slow_headers_and_slow_bodies_are_cut_off(minilm_engine: Engine) -> None:
    with serve_in_thread(minilm_engine, header_timeout_s=1.0, body_timeout_s=1.0) as url:
        port = int(url.rsplit(":", 1)[1])
        sockets = []
        for i in range(8):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.settimeout(10)
            if i % 2:
                sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            else:
                sock.sendall(_raw_post_head(port, "/v1/embeddings", 1000) + b'{"input": "')
            sockets.append(sock)
        started = time.monotonic()
        answers = []
        for sock in sockets:
            data = b""
            while chunk := sock.recv(65536):  # returns b"" once the server has closed the connection
                data += chunk
            answers.append(data)
            sock.close()
        assert time.monotonic() - started < 5
        assert all(a == b"" for a in answers[1::2])  # slow headers: closed
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers[0::2])  # slow body: 408, closed
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_bare_crlf_after_an_answer_does_not_hold_the_connection_open(minilm_engine: Engine) -> None:
    """Bytes between two requests that start none (a bare CRLF, which the parser skips) ended the
    keep-alive wait and started no header deadline: 1,000 such connections held 1,000 descriptors
    for good. They are closed by the header deadline now, as a slow request's are."""
    with serve_in_thread(minilm_engine, header_timeout_s=1.0) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(15)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200")
            sock.sendall(b"\r\n")
            started = time.monotonic()
            assert sock.recv(65536) == b""  # closed by the server
            assert time.monotonic() - started < 4  # the 1 s header deadline, not keep-alive's 5 s
        # a request that takes longer than the deadline, with a CRLF sent meanwhile, is answered
        body = json.dumps(
            {"input": [f"{i} " + "a sentence about the weather " * 40 for i in range(256)]}
        ).encode()
        head = (
            f"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(120)
            sock.sendall(head + body + b"\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_an_abort_while_the_body_is_sent_is_a_499_not_a_500(cli: tuple[str, int]) -> None:
    url, _ = cli
    port = int(url.rsplit(":", 1)[1])
    counts = [_status_count(url, "/v1/embeddings", status) for status in ("499", "500")]
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(_raw_post_head(port, "/v1/embeddings", 1000) + b'{"input": "')
        wait_for_body_bytes(url, len(b'{"input": "'))  # the server is reading this body
    # counted once the server sees the close: on a loaded machine, not within a fixed half second
    deadline, before = time.monotonic() + 60, counts
    while counts == before and time.monotonic() < deadline:
        time.sleep(0.1)
        counts = [_status_count(url, "/v1/embeddings", status) for status in ("499", "500")]
    assert counts[0] - before[0] == 1 and counts[1] == before[1], (before, counts)


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "code"),
    [
        ("post", "/v1/embeddings", b"[" * 20_000 + b"]" * 20_000, 400, "invalid_json"),
        ("post", "/v1/embeddings", b'{"input": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", 400, "invalid_json"),
        ("post", "/v1/embeddings", b"\xff\xfe", 400, "invalid_json"),
        ("get", "/nowhere", b"", 404, "not_found"),
        ("get", "/v1/embeddings", b"", 405, "method_not_allowed"),
    ],
)
def test_every_error_has_a_code(
    minilm_server: Served, method: str, path: str, content: bytes, status: int, code: str
) -> None:
    headers = {"content-type": "application/json"}
    response = httpx.request(
        method, f"{minilm_server.url}{path}", content=content or None, headers=headers, timeout=60
    )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("documents", [[1], [{"txt": "a"}], ["ok", None], [["a"]]])
def test_rerank_validation_messages_name_fields_not_pydantic_internals(
    minilm_server: Served, documents: list
) -> None:
    response = httpx.post(f"{minilm_server.url}/rerank", json={"query": "q", "documents": documents})
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "invalid_request"
    for internal in ("function-after", "_encodable", "RerankDocumentIn", "[", "str,"):
        assert internal not in error["message"] and internal not in str(error["param"]), error


def test_the_host_header_is_checked_on_a_keyless_loopback_server(minilm_server: Served) -> None:
    port = int(minilm_server.url.rsplit(":", 1)[1])
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
        response = httpx.get(f"{minilm_server.url}/v1/models", headers={"host": host})
        assert response.status_code == 400, host
        assert response.json()["error"]["code"] == "invalid_host"
    for host in (f"localhost:{port}", "127.0.0.1", f"[::1]:{port}", "LOCALHOST"):
        assert httpx.get(f"{minilm_server.url}/health", headers={"host": host}).status_code == 200, host


def test_a_refused_host_is_named_with_the_flags_that_let_it_in(
    minilm_server: Served, minilm_engine: Engine
) -> None:
    """Behind nginx passing ``Host: embed.example.com`` to a keyless loopback server, the operator
    read "names a host this server does not answer to" and a bare 400 in the access log: neither
    which name nor why."""
    message = httpx.get(f"{minilm_server.url}/v1/models", headers={"host": "embed.example.com"}).json()[
        "error"
    ]["message"]
    assert "'embed.example.com'" in message and "--allowed-hosts" in message and "--api-key" in message
    with serve_in_thread(minilm_engine, allowed_hosts=("embed.internal",)) as url:
        message = httpx.get(f"{url}/health").json()["error"]["message"]
        assert message.startswith("Host '127.0.0.1' is not on this server's --allowed-hosts list"), message


def test_a_keyless_server_on_another_loopback_address_answers_to_that_address() -> None:
    """Bound to 127.0.0.2, a client calling http://127.0.0.2:PORT sends that Host: it was refused
    as a stranger's name (``invalid_host``); another name still is."""
    from poolrag.server import ServerSettings
    from poolrag.server.host_check import effective_hosts

    allowed = effective_hosts(ServerSettings(served_model_names=("m",)), "127.0.0.2")
    assert allowed is not None and {"127.0.0.2", "127.0.0.1", "localhost"} <= allowed
    assert "evil.example" not in allowed and "127.0.0.3" not in allowed


def test_a_keyless_server_on_every_address_answers_a_service_name_through_loopback(
    minilm_path: Path, tmp_path: Path
) -> None:
    """Bound to 0.0.0.0, the check read each connection's own address: one through loopback (a
    sidecar proxy, nginx on the same machine) naming the service was refused ``invalid_host``,
    while the same name on the pod's address was answered."""
    with cli_server(tmp_path / "server.log", str(minilm_path), "--host", "0.0.0.0") as (url, _):
        for host in ("poolrag.default.svc", "poolrag.default.svc.cluster.local:8000", "localhost"):
            response = httpx.get(f"{url}/v1/models", headers={"host": host})
            assert response.status_code == 200, (host, response.text)


def test_a_keyless_server_bound_by_a_name_of_loopback_keeps_the_host_check(
    minilm_path: Path, tmp_path: Path
) -> None:
    """``--host $(hostname)``, which Debian's /etc/hosts resolves to 127.0.1.1, binds loopback: the
    listen-host rule for 0.0.0.0 read the name as another address and answered any ``Host``, so a
    DNS-rebinding page reached the keyless server. ``127.1`` is such a name on every machine."""
    with cli_server(tmp_path / "server.log", str(minilm_path), "--host", "127.1") as (url, _):
        assert httpx.get(f"{url}/health", headers={"host": "evil.example"}).status_code == 400
        assert httpx.get(f"{url}/health", headers={"host": "localhost"}).status_code == 200


def test_allowed_hosts_and_api_keys_change_the_host_rule(minilm_engine: Engine, keyed_server: Served) -> None:
    assert httpx.get(f"{keyed_server.url}/health", headers={"host": "embed.internal"}).status_code == 200
    with serve_in_thread(minilm_engine, allowed_hosts=("embed.internal",)) as url:
        assert httpx.get(f"{url}/health", headers={"host": "embed.internal:8000"}).status_code == 200
        assert httpx.get(f"{url}/health").status_code == 400  # 127.0.0.1 is not on the list
    with serve_in_thread(minilm_engine, allowed_hosts=("*",)) as url:
        assert httpx.get(f"{url}/health", headers={"host": "anything"}).status_code == 200


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00",
        "\x00\x00\x00",
        "\u200b",
        "\u200b\u200c\ufeff",
        " \x00\u2060\n",
        "\u202e\u202c",
        "\u200f\u2067",
    ],
)
def test_invisible_only_text_is_refused_like_empty_text(
    minilm_server: Served, minilm_engine: Engine, text: str
) -> None:
    for path, body in [
        ("/v1/embeddings", {"input": text}),
        ("/v1/embeddings", {"input": ["fine", text]}),
        ("/rerank", {"query": "q", "documents": ["fine", text]}),
        ("/score", {"text_1": "q", "text_2": ["fine", text]}),
        ("/tokenize", {"prompt": text}),
    ]:
        response = httpx.post(f"{minilm_server.url}{path}", json=body)
        assert response.status_code == 400, (path, text)
        assert response.json()["error"]["code"] == "empty_input"
    with pytest.raises(InvalidInputError, match="empty"):
        minilm_engine.embed([text])


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),  # a browser's "simple request": sent cross-site with no preflight
        ("application/x-www-form-urlencoded", 415),  # what curl -d declares
        ("multipart/form-data; boundary=x", 415),
        ("application/json; charset=utf-8", 200),
        ("application/vnd.api+json", 200),
        (None, 415),  # a page's fetch() of a bare Blob: no header, no preflight
        ("", 415),  # declared as nothing too: it was read as JSON
    ],
)
def test_a_body_declared_as_anything_but_json_is_refused_unread(
    minilm_engine: Engine, content_type: str | None, status: int
) -> None:
    """Every POST read its body as JSON whatever it was declared as, so any web page could make a
    visitor's browser spend a keyless loopback server's CPU (FastAPI refuses this since
    CVE-2021-32677; the off-loop route had brought it back)."""
    headers = {} if content_type is None else {"content-type": content_type}
    with serve_in_thread(minilm_engine) as url:
        body = json.dumps({"model": "test-model", "input": "hi"}).encode()
        answer = httpx.post(f"{url}/v1/embeddings", content=body, headers=headers, timeout=60)
    assert answer.status_code == status, answer.text
    if status == 415:
        error = answer.json()["error"]
        assert error["code"] == "unsupported_media_type"
        assert (content_type or "Content-Type: application/json").split(";")[0] in error["message"]


def test_a_server_with_a_key_reads_a_body_with_no_content_type_as_json(minilm_engine: Engine) -> None:
    """As FastAPI and vLLM do: a cross-site page cannot send the key, so nothing is exposed."""
    with serve_in_thread(minilm_engine, api_key="k") as url:
        body = json.dumps({"model": "test-model", "input": "hi"}).encode()
        answer = httpx.post(
            f"{url}/v1/embeddings", content=body, headers={"authorization": "Bearer k"}, timeout=60
        )
    assert answer.status_code == 200, answer.text
    assert "content-type" not in answer.request.headers
